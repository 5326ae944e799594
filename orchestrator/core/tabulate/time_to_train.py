"""Time-to-train: the scalability and convergence measurements joined.

    hours(layout) = epochs_to_target(global batch of the layout) × samples_per_epoch ÷ samples_per_s(layout)
                    ÷ 3600

A layout with more ranks is often faster per sample but trains a larger global batch, which needs more
epochs: only this product says which layout finishes first. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from orchestrator.core.json.values import JsonMapping
from orchestrator.core.measured import records as rec
from orchestrator.core.measured.convergence import BatchConvergence
from orchestrator.core.planning.trial import Trial
from orchestrator.core.tabulate.throughput import format_quantity, layout_label, samples_per_s, throughput_index
from orchestrator.core.text.table import BEST, DASH, FAILED, MISSING, Cell, Footnotes, Table
from orchestrator.core.text.units import SECONDS_PER_HOUR, human_duration


def hours_to_train(epochs: float, samples_per_epoch: int, samples_per_s: float) -> float:
    """Wall-clock hours of training to the target at a measured throughput.

    >>> hours_to_train(3.5, 1_200_000, 4_000.0)     # 4.2 M samples at 4,000 samples/s = 1,050 s
    0.2916666666666667
    """
    return epochs * samples_per_epoch / samples_per_s / SECONDS_PER_HOUR


@dataclass(frozen=True, slots=True)
class LayoutTime:
    point: Trial
    samples_per_s: float
    epochs: float | None         # olympic mean of the layout's global batch; None when unknown
    hours: float | None          # None when it cannot be computed; `missing` says why
    missing: str = ""
    not_converged: bool = False  # the global batch ran but did not converge

    @property
    def cores(self) -> int:
        return self.point.cores

    @property
    def global_batch(self) -> int:
        return self.point.global_batch


def layout_times(records: Iterable[rec.Record], derived: rec.Derived | JsonMapping,
                 batches: Sequence[BatchConvergence]) -> list[LayoutTime]:
    """Time-to-train of every ok throughput layout, ordered by cores, then ranks, threads, local batch."""
    index = throughput_index(records)
    by_batch = {b.global_batch: b for b in batches}
    samples_per_epoch = rec.Derived.of(derived).samples_per_epoch
    times = []
    ok = {p: sps for p, record in index.items() if (sps := samples_per_s(record))}
    for point in sorted(ok, key=lambda p: (p.cores, p)):
        sps = ok[point]
        global_batch = point.global_batch
        conv = by_batch.get(global_batch)
        if conv is None:
            times.append(LayoutTime(point, sps, None, None, f"no convergence run for global batch {global_batch} yet"))
        elif conv.mean_epochs is None:
            cap = f" by {conv.max_epochs:g} epochs" if conv.max_epochs is not None else ""
            times.append(LayoutTime(point, sps, None, None,
                                    f"global batch {global_batch} did not converge{cap} "
                                    f"({conv.converged} of {len(conv.runs)} seeds converged)", not_converged=True))
        elif not samples_per_epoch:
            times.append(LayoutTime(point, sps, conv.mean_epochs, None,
                                    "samples per epoch unknown (spec.json has no derived.samples_per_epoch)"))
        else:
            times.append(LayoutTime(point, sps, conv.mean_epochs,
                                    hours_to_train(conv.mean_epochs, samples_per_epoch, sps)))
    return times


def fastest(times: Sequence[LayoutTime]) -> tuple[LayoutTime | None, dict[int, LayoutTime]]:
    """The fastest layout overall and the fastest for each core count (ties: the first in order)."""
    timed = [(t.hours, t) for t in times if t.hours is not None]
    per_cores: dict[int, tuple[float, LayoutTime]] = {}
    for hours, t in timed:
        if t.cores not in per_cores or hours < per_cores[t.cores][0]:
            per_cores[t.cores] = (hours, t)
    overall = min(timed, key=lambda ht: ht[0])[1] if timed else None
    return overall, {cores: t for cores, (_, t) in per_cores.items()}


def time_to_train_table(times: Sequence[LayoutTime], samples_per_epoch: int | None) -> Table:
    """One row per ok layout: cores, global batch, samples/s, epochs, hours, and which is fastest.

    Example: 1×4×32 at 11,000 samples/s, global batch 32 at 3.5 epochs, 1,200,000 samples per epoch →
    3.5 × 1,200,000 ÷ 11,000 = 381.8 s → '0.106' hours.
    """
    notes = Footnotes()
    overall, per_cores = fastest(times)
    rows = []
    for t in times:
        if t.hours is not None:
            hours = Cell(format_quantity(t.hours), t.hours, BEST if t is overall else None)
        elif t.not_converged:
            hours = Cell(f"did not converge {notes.letter(t.missing)}", None, FAILED)
        else:
            hours = Cell(f"{DASH} {notes.letter(t.missing)}", None, MISSING)
        flag = ("overall" if t is overall else
                f"at {t.cores} core{'s' if t.cores != 1 else ''}" if per_cores.get(t.cores) is t else "")
        rows.append((layout_label(t.point), (
            Cell(str(t.cores), t.cores), Cell(str(t.global_batch), t.global_batch),
            Cell(format_quantity(t.samples_per_s), t.samples_per_s),
            Cell(f"{t.epochs:.2f}", t.epochs) if t.epochs is not None else Cell(DASH),
            hours, Cell(human_duration(t.hours) if t.hours is not None else DASH),
            Cell(flag, None, BEST if t is overall else None))))
    if not rows:
        caption = "No layout ran ok yet: no data yet."
    else:
        per_epoch = f"{samples_per_epoch:,}" if samples_per_epoch else "unknown"
        caption = ("Hours to train = epochs to target of the layout's global batch (see the convergence table) × "
                   f"samples per epoch ({per_epoch}) ÷ the layout's median samples/s ÷ 3600. Every layout that ran "
                   "ok, grouped by total cores (ranks × threads); 'overall' marks the fastest layout, "
                   "'at N cores' the fastest for its core count.")
    return Table(name="time-to-train", title="Time to train (hours)", corner="layout (r×t×b)",
                 columns=("cores", "global batch", "samples/s", "epochs", "hours", "time", "fastest"),
                 rows=tuple(rows), footnotes=notes.lines(), caption=caption)
