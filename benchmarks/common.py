"""Shared helpers for the benchmark scripts: thread count, interleaved timing with laps, ratios, tables.

The machines these run on are shared and noisy, so a comparison runs its cases *interleaved*: repeat r runs
every case once (in an order rotated by r), so that a burst of noise hits all of them rather than whichever
happened to run during it. Each timed callable gets a `lap(name)` function to split its time into phases
(forward / backward / optimizer step) measured within the same run; the whole run is the phase "total".

Example (a training step against a candidate):

    set_threads(2)
    def step(lap):
        loss = model(x, y); lap("forward")
        loss.backward(); lap("backward")
        optimizer.step(); optimizer.zero_grad(); lap("optimizer")
    timings = time_interleaved({"reference": Case(run=step), "fused": Case(run=fused_step)},
                               warmup=1, repeats=5)
    timings["fused"]["total"].median_ms, speedup(timings["reference"]["total"], timings["fused"]["total"])
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

Lap = Callable[[str], None]
TOTAL = "total"


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    run: Callable[[Lap], Any]
    """The timed region. Calls `lap(phase)` at the end of each phase it wants timed separately."""
    setup: Callable[[], None] | None = None
    """Untimed, before every run (e.g. clearing `.grad`)."""


@dataclass(frozen=True, slots=True)
class Timing:
    samples_ms: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @property
    def max_ms(self) -> float:
        return max(self.samples_ms)

    @property
    def spread_pct(self) -> float:
        """(max - min) / median, in percent: how far apart the repeats were."""
        return 100.0 * (self.max_ms - self.min_ms) / self.median_ms if self.median_ms > 0 else 0.0


def set_threads(threads: int) -> int:
    """Set torch's intra-op thread count (OpenMP and MKL); returns the previous one."""
    if threads < 1:
        raise ValueError(f"threads({threads}) must be >= 1")
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    return previous


def _run_once(case: Case) -> dict[str, float]:
    if case.setup is not None:
        case.setup()
    laps_ms: dict[str, float] = {}
    start = last = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal last
        now = time.perf_counter()
        laps_ms[phase] = laps_ms.get(phase, 0.0) + (now - last) * 1e3
        last = now

    case.run(lap)
    laps_ms[TOTAL] = (time.perf_counter() - start) * 1e3
    return laps_ms


def time_interleaved(cases: dict[str, Case], *, warmup: int = 1, repeats: int = 5) -> dict[str, dict[str, Timing]]:
    """{case: {phase: Timing}} over `repeats` interleaved runs, after `warmup` untimed interleaved runs.

    Phases are those a case's `lap` named, plus "total" (the whole run, setup excluded).
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats({repeats}) >= 1 and warmup({warmup}) >= 0")
    names = list(cases)
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    for r in range(warmup + repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()  # a collection inside a timed region would be charged to whichever case it hit
            laps_ms = _run_once(cases[name])
            if r >= warmup:
                for phase, ms in laps_ms.items():
                    samples[name].setdefault(phase, []).append(ms)
    return {name: {phase: Timing(tuple(ms)) for phase, ms in phases.items()} for name, phases in samples.items()}


def speedup(reference: Timing, candidate: Timing) -> float:
    """reference median / candidate median: > 1 means the candidate is faster."""
    return reference.median_ms / candidate.median_ms


def format_ms(t: Timing) -> str:
    """'123.4 ±5%': median and spread."""
    return f"{t.median_ms:.1f} ±{t.spread_pct:.0f}%"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain fixed-width table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in cells[1:]])


def environment_line() -> str:
    """What the numbers were measured on (one line, printed above a table)."""
    return (f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
            f"{platform.processor() or platform.machine()}, interop threads {torch.get_num_interop_threads()}")


def add_common_args(parser: argparse.ArgumentParser, *, quick_repeats: int = 2) -> None:
    """--quick, --threads, --warmup, --repeats (read them back with `repeats_of(args)`)."""
    parser.add_argument("--quick", action="store_true", help="small shapes and few repeats (a smoke run)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="intra-op thread counts to run")
    parser.add_argument("--warmup", type=int, default=1, help="untimed interleaved runs first")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"timed interleaved runs (default 5, or {quick_repeats} with --quick)")
    parser.set_defaults(quick_repeats=quick_repeats)


def repeats_of(args: argparse.Namespace) -> int:
    if args.repeats is not None:
        return args.repeats
    return args.quick_repeats if args.quick else 5
