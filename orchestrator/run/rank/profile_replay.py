"""Run one primitive alone, through torch, on the rank's pinned cores (oneDNN's benchdnn ships in no
package, so torch is the way to reach the same kernels), and measure the cores' memory bandwidth with a
STREAM-style triad. Runs inside the rank process after its profiled steps.

A torch call does more than the primitive: dispatch, output allocation, and a weight reorder that the
model's log shows as a primitive of its own. So each replay runs with oneDNN's verbose capture on, and the
isolated time is what oneDNN logged for the matching primitive, timed as the model's own log times it (as
benchdnn would); the call's wall time is kept beside it. The kernel oneDNN picked is kept too: a replay
that ran another implementation than the model did measures something else, and the report says so.

Why each problem runs many times and its fastest call is kept beside the median: at 2 threads on a 2-CPU
machine every CPU carries one of the rank's OpenMP threads, so anything else that runs (Ray's daemons, the
launcher's watchdog, another process) takes a CPU from one thread for a scheduler slice, and the other thread
waits at the primitive's barrier: a 1.3 ms convolution then logs 5-20 ms. Measured on this repository's
2-vCPU machine under load, in one process: per problem, the fastest replayed call and the fastest in-model
call agreed within -12%..+4%, while median-of-5 replays against in-model means ranged 0.55-1.28 from one
run to the next. Five runs could not tell a slow kernel from an unlucky one.

Why those calls are spread over `REPLAY_PASSES` passes through every problem, not made back to back: a
burst of other work (the launcher's memory read takes about 16 ms every 10 s) can cover all of one
problem's back-to-back calls of a fraction of a millisecond, and then even its fastest call is slow. In a
quiet run at 1 × 2 a different small primitive came out 1.2-2.2× slower alone than in the model on each of
three tries, back to back; a burst covers one block of one problem, and the fastest call comes from the
others. Within a block the calls stay back to back, as the model's repeated use of a kernel keeps its
weights warm.

The replay runs in the rank process itself, after its profiled steps: the same OpenMP threads, bound to
the same cores, with the same environment (`replay_setting` records what it had, and the checks compare it
with the rank's placement)."""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypedDict

import torch
import torch.nn.functional as F

from orchestrator.core.profile import onednn_verbose as ov
from orchestrator.core.profile.roofline import conv_problem, matmul_problem
from orchestrator.run.comm import thread_cpu_masks

_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
REPLAY_MIN_RUNS = 10        # calls timed per problem at least ...
REPLAY_MIN_S = 0.2          # ... and until this much time was spent calling it ...
REPLAY_MAX_RUNS = 60        # ... but never more calls than this
REPLAY_PASSES = 3           # spread over this many passes through every problem (see the docstring)
TRIAD_ELEMENTS = 1 << 23       # 32 MiB per float32 array, 96 MiB in all: well past any L3 of one socket

Call = Callable[[], object]   # a problem rebuilt as a torch call (what it returns is not read)


class ReplayRowJson(TypedDict):
    """One replayed problem as `replay_shapes` writes it (core.profile.result.ReplayRow reads it)."""

    kind: str
    direction: str
    problem: str
    dtype: str
    layout: str
    dst_dtype: str
    dst_layout: str
    isolated_ms: float | None
    isolated_min_ms: float | None
    runs: int
    call_ms: float | None
    implementation: str | None
    note: str | None


class ReplaySettingJson(TypedDict):
    """The replay's threads and CPUs (core.profile.result.ReplaySetting reads it)."""

    threads: int
    cpus: list[int]


class LevelRoofJson(TypedDict):
    """One memory level's bandwidth roof (core.profile.result.CacheRoof reads it)."""

    level: str
    fits_bytes: int
    gbs: float | None
    triad_bytes: int


@contextmanager
def stdout_to(path: Path) -> Iterator[None]:
    """Point file descriptor 1 (where oneDNN's C code prints) at `path`, flushing C's buffers on both
    sides so no line lands in the wrong file."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        libc.fflush(None)
        os.dup2(saved, 1)
        os.close(fd)
        os.close(saved)


def _captured(fn: Call, min_runs: int = REPLAY_MIN_RUNS, min_s: float = REPLAY_MIN_S,
              max_runs: int = REPLAY_MAX_RUNS) -> tuple[list[ov.Execution], float]:
    """(oneDNN's executions during the timed calls, the calls' median wall time in ms). At least `min_runs`
    calls and at least `min_s` of calling, at most `max_runs`: a short primitive gets enough calls that
    some escape the other processes' time slices (see the module's docstring)."""
    for _ in range(2):    # primitive creation and first-touch are not part of a warm step either
        fn()
    times: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "replay.log"
        with stdout_to(log), torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            while len(times) < max_runs and (len(times) < min_runs or sum(times) < min_s * 1e3):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        executions, _ = ov.parse_lines(log.read_text(errors="replace").splitlines())
    return executions, statistics.median(times)


def _matching(executions: list[ov.Execution], shape: ov.ShapeTotal) -> list[ov.Execution]:
    """The replay's executions of the model's problem. A reorder must match in both formats (it is the
    format change); a convolution or matmul in kind, direction, problem and type, with the model's source
    layout preferred when the replay ran several."""
    same = [e for e in executions if (e.kind, e.direction, e.problem, e.dtype)
            == (shape.kind, shape.direction, shape.problem, shape.dtype)]
    if shape.kind == "reorder":
        return [e for e in same if (e.layout, e.dst_dtype, e.dst_layout)
                == (shape.layout, shape.dst_dtype or shape.dtype, shape.dst_layout or shape.layout)]
    exact = [e for e in same if e.layout == shape.layout]
    return exact or same


def _conv_call(shape: ov.ShapeTotal) -> Call | None:
    c = conv_problem(shape.problem)
    if c.in_spatial[0] != 1 or c.kernel[0] != 1:
        return None   # 3-D convolutions: not replayed here
    dtype = _DTYPES.get(shape.dtype)
    if dtype is None:
        return None
    fmt = torch.channels_last if shape.layout == "acdb" else torch.contiguous_format
    x = torch.randn(c.mb, c.ic, c.in_spatial[1], c.in_spatial[2], dtype=dtype).to(memory_format=fmt)
    w = torch.randn(c.oc, c.ic // c.groups, c.kernel[1], c.kernel[2], dtype=dtype).to(memory_format=fmt)
    stride, padding = list(c.stride[1:]), list(c.padding[1:])
    dilation = [d + 1 for d in c.dilation[1:]]
    if shape.direction == "forward":
        return lambda: F.conv2d(x, w, None, stride, padding, dilation, c.groups)
    y = F.conv2d(x, w, None, stride, padding, dilation, c.groups)
    if (y.shape[2], y.shape[3]) != (c.out_spatial[1], c.out_spatial[2]):
        return None   # the descriptor's padding convention differs (asymmetric padding): skip, not guess
    grad = torch.randn_like(y)
    mask = [True, False, False] if shape.direction == "backward_data" else [False, True, False]
    if shape.direction not in ("backward_data", "backward_weights"):
        return None
    return lambda: torch.ops.aten.convolution_backward(grad, x, w, None, stride, padding, dilation, False, [0, 0],
                                                       c.groups, mask)


def _reorder_call(shape: ov.ShapeTotal) -> Call | None:
    """A 4-D weight reorder (the model's reorders are mostly weights re-laid out for a convolution kernel
    every step): a convolution with that weight triggers it, and only the reorder's logged time is used.
    Whether the kernel picks the same destination format is checked by the match, not assumed."""
    dims = [int(x) for x in shape.problem.split("x")] if shape.problem.replace("x", "").isdigit() else []
    dtype = _DTYPES.get(shape.dtype)
    if len(dims) != 4 or dtype is None or (shape.dst_dtype or shape.dtype) != shape.dtype:
        return None
    fmt = {"acdb": torch.channels_last, "abcd": torch.contiguous_format}.get(shape.layout)
    if fmt is None:
        return None
    oc, ic, kh, kw = dims
    w = torch.randn(oc, ic, kh, kw, dtype=dtype).to(memory_format=fmt)
    x = torch.randn(1, ic, 2 * kh, 2 * kw, dtype=dtype).to(memory_format=fmt)
    return lambda: F.conv2d(x, w, None, 1, (kh // 2, kw // 2))


def _matmul_call(shape: ov.ShapeTotal) -> Call | None:
    mm = matmul_problem(shape.problem)
    dtype = _DTYPES.get(shape.dtype)
    if dtype is None:
        return None
    a = torch.randn(mm.batch, mm.m, mm.k, dtype=dtype).squeeze(0)
    b = torch.randn(mm.batch, mm.k, mm.n, dtype=dtype).squeeze(0)
    return lambda: torch.matmul(a, b)


REPLAYED_KINDS = {"convolution": _conv_call, "matmul": _matmul_call, "reorder": _reorder_call}


def replay_shapes(shapes: list[ov.ShapeTotal], budget_s: float = 60.0) -> list[ReplayRowJson]:
    """Isolated time of each distinct convolution, matmul and reorder problem (largest logged time first),
    its calls spread over `REPLAY_PASSES` passes through all of them, until the budget is spent; a problem
    that never ran is listed with `isolated_ms: None` and why."""
    kept = [s for s in shapes if s.kind in REPLAYED_KINDS]
    rows = [_row(shape) for shape in kept]
    calls = [_rebuilt(shape, row) for shape, row in zip(kept, rows)]
    found: list[list[ov.Execution]] = [[] for _ in kept]
    call_ms: list[list[float]] = [[] for _ in kept]
    deadline = time.monotonic() + budget_s
    for _ in range(REPLAY_PASSES):
        for i, (shape, call) in enumerate(zip(kept, calls)):
            if call is None or time.monotonic() > deadline:
                continue
            executions, ms = _captured(call, min_runs=-(-REPLAY_MIN_RUNS // REPLAY_PASSES),
                                       min_s=REPLAY_MIN_S / REPLAY_PASSES, max_runs=REPLAY_MAX_RUNS // REPLAY_PASSES)
            found[i] += _matching(executions, shape)
            call_ms[i].append(ms)
            if not found[i]:
                other = "; ".join(sorted({f"{e.kind} {e.problem} {e.layout}->{e.dst_layout}" for e in executions})[:3])
                rows[i]["note"] = f"the replay did not run this problem in oneDNN (it ran: {other or 'nothing'})"
                calls[i] = None
    for row, call, executed, wall_ms in zip(rows, calls, found, call_ms):
        if call is not None and not executed:
            row["note"] = f"replay budget ({budget_s:g} s) spent"
        if executed:
            _record(row, executed, wall_ms)
    return rows


def _row(shape: ov.ShapeTotal) -> ReplayRowJson:
    return {"kind": shape.kind, "direction": shape.direction, "problem": shape.problem, "dtype": shape.dtype,
            "layout": shape.layout, "dst_dtype": shape.dst_dtype, "dst_layout": shape.dst_layout,
            "isolated_ms": None, "isolated_min_ms": None, "runs": 0, "call_ms": None, "implementation": None,
            "note": None}


def _rebuilt(shape: ov.ShapeTotal, row: ReplayRowJson) -> Call | None:
    """The torch call that runs the problem, or None with the reason in the row's note."""
    try:
        call = REPLAYED_KINDS[shape.kind](shape)
    except (ValueError, RuntimeError) as err:
        call, row["note"] = None, f"cannot rebuild: {err}"
    if call is None:
        row["note"] = row["note"] or "not replayed (3-D, unknown data type, padding convention or format)"
    return call


def _record(row: ReplayRowJson, found: list[ov.Execution], call_ms: list[float]) -> None:
    row["isolated_ms"] = statistics.median(e.time_ms for e in found)
    row["isolated_min_ms"] = min(e.time_ms for e in found)
    row["runs"] = len(found)
    row["call_ms"] = statistics.median(call_ms)
    impls = [e.implementation for e in found]
    row["implementation"] = max(set(impls), key=impls.count)


def replay_setting() -> ReplaySettingJson:
    """The threads and CPUs the replay ran with, read from the OS: every thread's mask and torch's thread
    count. The checks compare them with the rank's own (profile.checks: a replay on other cores or with
    other threads measured another machine)."""
    return {"threads": torch.get_num_threads(), "cpus": sorted(set().union(*thread_cpu_masks()))}


def _triad_best_s(elements: int, runs: int) -> float:
    """The fastest of `runs` triads a = b + s·c over `elements` float32 each, on this process's threads."""
    a = torch.empty(elements)
    b = torch.rand(elements)
    c = torch.rand(elements)
    best = float("inf")
    for _ in range(runs + 2):
        t0 = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best = min(best, time.perf_counter() - t0)
    return best


def stream_triad_gbs(elements: int = TRIAD_ELEMENTS, runs: int = 10) -> float:
    """a = b + s·c over arrays far larger than the caches, on this process's threads; the best run's
    bytes (3 arrays × 4 bytes × elements, STREAM's convention: write-allocate traffic not counted) per
    second, in GB/s."""
    return 3 * 4 * elements / _triad_best_s(elements, runs) / 1e9


def cached_triad_gbs(working_set_bytes: int, runs: int = 200) -> float:
    """The triad's bandwidth over a working set that stays in a cache: a torch call costs ~1.5 µs of its own
    (dispatch, allocation checks), as long as a triad over 256 KiB takes, so the rate is the slope between
    the working set and a quarter of it (what one more byte costs), not bytes ÷ time; bytes ÷ time where the
    slope is not measurable (the two times too close): the larger of the two, as a roof takes the least
    disturbed figure."""
    large = max(1, working_set_bytes // 12)
    small = max(1, large // 4)
    t_small, t_large = _triad_best_s(small, runs), _triad_best_s(large, runs)
    raw = 12 * large / t_large / 1e9
    if t_large <= t_small:
        return raw
    slope = 12 * (large - small) / (t_large - t_small) / 1e9
    return max(raw, slope) if slope < 4 * raw else raw


def level_roofs(cpus: list[int], threads: int) -> list[LevelRoofJson]:
    """A bandwidth roof per cache level on this rank's CPUs (core/profile/levels), each a dict of its
    LevelRoof's fields and how it was measured: L1 bounded by compute alone; L2 (private per core) one
    thread's triad in half of one core's L2, × the rank's threads; L3 the rank's threads at once in half of
    its share of the L3; DRAM the rank's threads over DRAM_OVER_CACHES × every cache. Empty when sysfs lists
    no caches."""
    from orchestrator.core.profile import levels as lv
    from orchestrator.io.caches import cpu_caches

    caps = lv.capacities(cpu_caches(cpus), cpus)
    if not caps:
        return []
    out: list[LevelRoofJson] = []
    for cap in caps:
        if cap.level == "L1":
            out.append({"level": cap.level, "fits_bytes": cap.fits_bytes, "gbs": None, "triad_bytes": 0})
            continue
        if cap.level == "L2":
            working_set = cap.share_bytes // cap.instances // 2
            torch.set_num_threads(1)
            try:
                gbs = cached_triad_gbs(working_set) * threads
            finally:
                torch.set_num_threads(threads)
        else:
            working_set = cap.share_bytes // 2
            gbs = cached_triad_gbs(working_set, runs=50)
        out.append({"level": cap.level, "fits_bytes": cap.fits_bytes, "gbs": gbs, "triad_bytes": working_set})
    dram = lv.dram_triad_bytes(caps)
    out.append({"level": lv.DRAM, "fits_bytes": 0, "gbs": stream_triad_gbs(max(TRIAD_ELEMENTS, dram // 12)),
                "triad_bytes": max(TRIAD_ELEMENTS * 12, dram)})
    return out
