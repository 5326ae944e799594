"""Tables of `orch profile`, from the ranks' profile results: step summary and overhead, oneDNN breakdown,
operator categories side by side with how they scale, layers, roofline and the efficiency ratio. Pure: no
torch, no files.

A profiled target is a `result.ProfiledTarget` (its label, layout and every rank's `RankProfile`, what
`orchestrator.run.rank.profiling.profile_rank` returns); a caller holding the saved JSON may pass it as read.
Breakdowns come from rank 0, the attribution from every rank; step times are the slowest rank's. The
per-row tables are `record.Row`s: typed here, written as the dicts of their fields.

An operator the profiler names falls into the category its time is reported under:

>>> [category(op) for op in ("aten::mkldnn_convolution", "aten::addmm", "aten::relu")]
['convolution', 'matmul', 'elementwise and other ATen']
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.core.json.values import JsonReadable
from orchestrator.core.profile import levels as lv
from orchestrator.core.profile import roofline as rl
from orchestrator.core.profile.levels import LevelRoof
from orchestrator.core.profile.onednn_verbose import ShapeTotal
from orchestrator.core.profile.result import Peak, ProfiledTarget, RankProfile, ReplayRow, as_target
from orchestrator.core.profile.row import Row

Target = ProfiledTarget | Mapping[str, JsonReadable]   # typed, or its JSON as read (as_target)
OTHER = "other (between ops)"
ALLREDUCE_WAIT = "communication: all-reduce wait (inferred)"
CONTENDED = 0.8   # below this share of its cores, a rank's times say more about its neighbours than itself
NOISE_FLOOR = 0.10  # two measurements of the same work may differ by this much before they disagree (checks)
OUTSIDE_ONEDNN = "outside oneDNN (ATen, BLAS, Python)"

# Operator categories for the side-by-side view, first match wins (lower-cased substring of the op name).
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("communication", ("c10d", "allreduce", "all_reduce", "gloo", "broadcast", "barrier", "ccl")),
    ("convolution", ("convolution", "conv2d", "conv3d")),
    ("matmul", ("addmm", "aten::mm", "bmm", "matmul", "linear")),
    ("optimizer", ("optimizer", "_foreach", "adam", "sgd")),
    ("normalization", ("batch_norm", "layer_norm", "group_norm")),
    ("memory (copy, fill, reorder)", ("copy_", "fill_", "zero_", "clone", "to_dense", "reorder", "empty",
                                      "contiguous", "cat")),
)
ELEMENTWISE = "elementwise and other ATen"


def category(op: str) -> str:
    low = op.lower()
    for name, needles in CATEGORIES:
        if any(n in low for n in needles):
            return name
    return ELEMENTWISE


@dataclass(frozen=True, slots=True)
class StepSummary:
    label: str
    plain_step_ms: float       # median of the unprofiled steps, slowest rank
    verbose_overhead: float    # oneDNN-verbose step ÷ plain step − 1
    profiler_overhead: float   # torch.profiler step ÷ plain step − 1
    named_share: float         # lowest over ranks: named ops (recorded, nothing inferred) ÷ the profiled step
    onednn_ms: float           # per step, rank 0, sum of logged primitive times
    verbose_step_ms: float
    named_of_plain: float = 0.0   # lowest over ranks: RankAttribution.named_of_plain, what the ≥ 90% check reads


@dataclass(frozen=True, slots=True)
class RankAttribution:
    """One rank's profiled step split into what the profiler recorded and what it did not. named_ms +
    inferred_wait_ms + other_ms = profiled_step_ms; the all-reduce is in named_ms only where the profiler
    recorded it (recorded_allreduce_ms, its communication ops' self time)."""

    rank: int
    plain_step_ms: float          # the rank's own median plain step
    profiled_step_ms: float       # the rank's mean profiled step (the coverage's wall time)
    named_ms: float
    recorded_allreduce_ms: float
    inferred_wait_ms: float       # DDP's wait placed by where a gap sits: inferred, never in named_ms
    other_ms: float

    @property
    def profiler_overhead(self) -> float:
        return self.profiled_step_ms / self.plain_step_ms - 1 if self.plain_step_ms else 0.0

    @property
    def named_of_profiled(self) -> float:
        return self.named_ms / self.profiled_step_ms if self.profiled_step_ms else 0.0

    @property
    def profiler_overhead_ms(self) -> float:
        """What the profiler added to the step; 0 where the profiled step came out shorter (noise: the
        checks flag it beyond the plain steps' spread)."""
        return max(0.0, self.profiled_step_ms - self.plain_step_ms)

    @property
    def named_of_plain(self) -> float:
        """The share of the plain step spent in named ops, at least: (named − profiler overhead) ÷ plain.

        Why not named ÷ plain: the named time comes from the profiled pass, which the profiler slows, so
        that quotient is a ratio of two passes, not a share, and read 112.5% at 1×1 (17% overhead). Why not
        named ÷ profiled (the same as scaling the named time by plain ÷ profiled): that assumes the
        profiler slows named ops and the gaps between them alike, and it does not — an op's range contains
        the recording of every op nested in it (aten::conv2d → aten::convolution → ... each with its
        shapes), so much of the overhead sits inside named time. What is known is that profiling makes
        nothing faster: the named part of the plain step is at least the profiled named time less all the
        overhead. That bound cannot exceed 1 (named ≤ profiled step), is never above named ÷ profiled, and
        is the figure the ≥ 90% check reads: when it passes, named ops cover 90% of the plain step whatever
        the profiler's cost was spent on."""
        if not self.plain_step_ms:
            return 0.0
        return max(0.0, self.named_ms - self.profiler_overhead_ms) / self.plain_step_ms



@dataclass(frozen=True, slots=True, eq=False)
class KernelRow(Row):
    """One kind × direction × kernel of rank 0's oneDNN log, per step."""

    kind: str
    direction: str
    implementation: str
    calls_per_step: float
    ms_per_step: float
    share_of_step: float    # of the verbose pass's step


@dataclass(frozen=True, slots=True, eq=False)
class LayerShare(Row):
    layer: str
    forward_ms: float
    backward_ms: float
    total_ms: float
    share_of_step: float    # of the profiler pass's step


@dataclass(frozen=True, slots=True, eq=False)
class RooflinePoint(Row):
    """One distinct primitive problem on the roofline (see roofline_points)."""

    kind: str
    direction: str
    problem: str
    dtype: str
    layout: str
    dst_layout: str
    calls: int
    calls_per_step: float
    ms_per_call: float
    ms_per_step: float
    gflop_per_call: float
    mbytes_per_call: float
    flop_per_byte: float
    achieved_gflops: float
    attainable_gflops: float
    fraction_of_attainable: float | None
    achieved_gbs: float
    level: str                  # where the working set fits: L1, L2, L3, DRAM; "" where no cache sizes were read
    level_gbs: float | None     # that level's bandwidth roof (None: L1, or not measured)
    roof_gflops: float          # what the check holds the point against: attainable, or the compute roof alone
    above_roof: bool            # above roof_gflops by more than its noise: the check's finding (profile.checks)


@dataclass(frozen=True, slots=True, eq=False)
class RooflineKind(Row):
    kind: str
    direction: str
    ms_per_step: float
    gflop_per_step: float
    achieved_gflops: float
    attainable_gflops: float
    fraction_of_attainable: float | None


@dataclass(frozen=True, slots=True, eq=False)
class ReplayComparison(Row):
    """One replayed primitive, in the model and alone (see replay_rows)."""

    kind: str
    direction: str
    problem: str
    dtype: str
    layout: str
    calls_per_step: float
    in_model_ms_per_call: float
    in_model_fastest_ms: float
    isolated_ms_per_call: float
    isolated_fastest_ms: float
    replay_runs: int | None
    efficiency: float | None
    in_model_ms_per_step: float
    lost_ms_per_step: float | None
    implementation: str | None
    replay_implementation: str | None
    same_implementation: bool | None


@dataclass(frozen=True, slots=True, eq=False)
class Efficiency(Row):
    """The efficiency ratio of a target's replayed primitives, and what it speaks for (see efficiency)."""

    step_ms: float
    replayed_shapes: int
    not_replayed_shapes: int
    unmatched_shapes: int
    isolated_ms_per_step: float
    logged_ms_per_step: float
    in_model_fastest_ms_per_step: float
    efficiency_ratio: float | None
    replayed_share_of_step: float | None
    implementation_mismatches: int


def _ms(values: Mapping[str, float], name: str) -> float:
    """A category's (or kind's) ms per step; 0 where the target has none."""
    return values.get(name, 0.0)


def attribution(target: Target) -> list[RankAttribution]:
    """Every rank's attribution, rank order."""
    out = []
    for rank, r in enumerate(as_target(target).results):
        cov = r.profiler.coverage
        comm = sum(row.self_ms_per_step for row in r.profiler.ops if category(row.op) == "communication")
        out.append(RankAttribution(rank, float(statistics.median(r.plain_step_ms)), cov.step_ms,
                                   cov.named_ms, comm, cov.allreduce_wait_ms, cov.other_ms))
    return out


def _rank0(target: Target) -> RankProfile:
    return as_target(target).results[0]


def _median_step(r: RankProfile) -> float:
    return float(statistics.median(r.plain_step_ms))


def summary(target: Target) -> StepSummary:
    t = as_target(target)
    r0 = t.results[0]
    plain = max(_median_step(r) for r in t.results)
    verbose = float(max(statistics.median(r.verbose_step_ms) for r in t.results))
    prof = max(statistics.median(r.profiler.step_ms) for r in t.results)
    onednn = sum(k.time_ms for k in r0.onednn.totals) / r0.steps
    ranks = attribution(t)
    return StepSummary(t.label, plain, verbose / plain - 1, prof / plain - 1,
                       min(a.named_of_profiled for a in ranks), onednn, verbose,
                       named_of_plain=min(a.named_of_plain for a in ranks))


def onednn_breakdown(target: Target) -> dict[str, float]:
    """ms per step by 'kind direction' (rank 0), plus what the verbose pass's step spent outside oneDNN."""
    r0 = _rank0(target)
    out: defaultdict[str, float] = defaultdict(float)
    for k in r0.onednn.totals:
        out[k.label] += k.time_ms / r0.steps
    step = statistics.median(r0.verbose_step_ms)
    out[OUTSIDE_ONEDNN] = max(0.0, step - sum(out.values()))
    return dict(out)


def onednn_kernels(target: Target) -> list[KernelRow]:
    """Rows kind × direction × implementation with calls and ms per step and share of the verbose step."""
    r0 = _rank0(target)
    steps = r0.steps
    step = statistics.median(r0.verbose_step_ms)
    return [KernelRow(k.kind, k.direction, k.implementation, k.calls / steps, k.time_ms / steps,
                      k.time_ms / steps / step if step else 0.0) for k in r0.onednn.totals]


def categories(target: Target) -> dict[str, float]:
    """ms per step by operator category (self time, rank 0's profiler pass) plus the time between ops."""
    r0 = _rank0(target)
    out: defaultdict[str, float] = defaultdict(float)
    for row in r0.profiler.ops:
        out[category(row.op)] += row.self_ms_per_step
    out[OTHER] = r0.profiler.coverage.other_ms
    wait = r0.profiler.coverage.allreduce_wait_ms
    if wait:
        out[ALLREDUCE_WAIT] = wait
    return dict(out)


def cpu_share(target: Target) -> float | None:
    """The lowest share of its cores any rank got during the plain steps (None when not measured)."""
    shares = [r.plain_cpu_share for r in as_target(target).results]
    known = [x for x in shares if x is not None]
    return min(known) if shares and len(known) == len(shares) else None


def scaling(targets: Sequence[Target], values: Sequence[Mapping[str, float]],
            disturbed: frozenset[str] = frozenset()) -> list[dict[str, JsonReadable]]:
    """Each category's time per step in every target, and against the first target of the same variant
    (layouts are compared, not variants): the speed-up and the speed-up that threads alone would give
    (threads ratio; same local batch per rank). A category whose speed-up stays near 1 while threads
    double does not scale with threads. No verdict is given when a rank of either target got less than
    CONTENDED of its cores (then the times measure the other processes on the machine, not the layout), nor
    when either target is in `disturbed` (a failed physical check, see profile.checks). The rows' columns
    are the targets' labels, so they stay dicts."""
    typed = [as_target(t) for t in targets]
    bases: dict[str, int] = {}
    for i, t in enumerate(typed):
        bases.setdefault(t.variant, i)
    names = sorted({k for v in values for k in v}, key=lambda k: -max(_ms(v, k) for v in values))
    rows = []
    for name in names:
        row: dict[str, JsonReadable] = {"category": name}
        for t, v in zip(typed, values):
            row[t.label] = round(_ms(v, name), 3)
        for i, (t, v) in enumerate(zip(typed, values)):
            b = bases[t.variant]
            if b != i:
                row.update(_compare(name, typed[b], values[b], t, v, disturbed))
        rows.append(row)
    return rows


def _compare(name: str, base_t: ProfiledTarget, base: Mapping[str, float], t: ProfiledTarget,
             v: Mapping[str, float], disturbed: frozenset[str]) -> dict[str, JsonReadable]:
    now, before = _ms(v, name), _ms(base, name)
    speedup = before / now if now > 0 and before > 0 else None
    starved = [x for x in (cpu_share(base_t), cpu_share(t)) if x is not None and x < CONTENDED]
    bad = [x.label for x in (base_t, t) if x.label in disturbed]
    verdict = (f"not judged: a rank got {min(starved):.0%} of its cores" if starved
               else f"withheld: {', '.join(bad)} disturbed" if bad
               else _verdict(speedup, t.threads / base_t.threads))
    return {f"speed-up {t.label}": round(speedup, 2) if speedup else None, f"verdict {t.label}": verdict}


def _verdict(speedup: float | None, ideal: float) -> str:
    if speedup is None:
        return "–"
    if ideal <= 1:
        # Same threads per rank (more ranks): per-rank time should stay put; growth is contention.
        return "unchanged" if speedup >= 0.9 else f"slower ×{1 / speedup:.2f} (contention)"
    efficiency = (speedup - 1) / (ideal - 1)
    if efficiency >= 0.6:
        return "scales with threads"
    if efficiency >= 0.25:
        return "scales partly"
    return "does not scale"


def layers(target: Target, top: int = 15) -> list[LayerShare]:
    r0 = _rank0(target)
    step = r0.profiler.coverage.step_ms
    rows = [LayerShare(r.layer, r.forward_ms, r.backward_ms, r.total_ms, r.total_ms / step if step else 0.0)
            for r in r0.profiler.layers]
    rows.sort(key=lambda r: -r.total_ms)
    return rows[:top]


def layer_share(target: Target, name: str) -> float:
    """Share of the profiled step spent in one layer or region (forward + backward), e.g. focal_loss."""
    r0 = _rank0(target)
    step = r0.profiler.coverage.step_ms
    total = sum(r.total_ms for r in r0.profiler.layers if r.layer == name)
    return total / step if step else 0.0


def peak_noise(peak: Peak | None) -> float:
    """How far the compute roof itself may be off: its fastest GEMM over its median one, never below
    NOISE_FLOOR."""
    best, median = (peak.best_gflops, peak.gemm) if peak is not None else (None, None)
    if isinstance(best, (int, float)) and isinstance(median, (int, float)) and median > 0:
        return max(NOISE_FLOOR, best / median - 1)
    return NOISE_FLOOR


def _bounds(cost: rl.Cost, r: RankProfile) -> tuple[LevelRoof | None, float, float, float]:
    """(the level the working set fits in, attainable GFLOP/s, the bound the check holds it to, that bound's
    noise). Without cache roofs (older results, no sysfs caches) the bandwidth roof is DRAM's, shown but not
    checked: data in cache may outrun it; the check holds the point to the compute roof alone."""
    peak = r.peak.gflops if r.peak else 0.0
    if not cost.flops or peak <= 0:
        return None, 0.0, 0.0, 0.0
    roofs = [c.roof() for c in r.level_roofs or ()]
    level = lv.level_of(cost.bytes, roofs) if roofs else None
    compute = (peak_noise(r.peak), peak)
    if level is None:
        dram = rl.attainable_gflops(cost.intensity, peak, r.stream_triad_gbs) if r.stream_triad_gbs > 0 else peak
        return None, dram, peak, compute[0]
    if level.gbs is None or level.gbs <= 0:      # L1: the compute roof alone
        return level, peak, peak, compute[0]
    attainable = rl.attainable_gflops(cost.intensity, peak, level.gbs)
    return level, attainable, attainable, compute[0] if attainable >= peak else NOISE_FLOOR


def roofline_points(target: Target, rank: int = 0) -> list[RooflinePoint]:
    """Per distinct primitive problem of one rank: FLOPs and bytes per call, achieved GFLOP/s from the
    logged time, the attainable GFLOP/s under that rank's compute roof and the bandwidth roof of the memory
    level its working set fits in (profile.levels), the fraction reached, and whether it ran above its roof
    beyond the roof's noise (`above_roof`: physically impossible, so the target is disturbed, profile.checks)."""
    r = as_target(target).results[rank]
    out = []
    for s in r.onednn.shapes:
        cost = rl.primitive_cost(s.kind, s.problem, s.dtype, s.dst_dtype or None)
        if cost is None or s.time_ms <= 0 or cost.bytes <= 0:
            continue
        per_call_ms = s.time_ms / s.calls
        achieved = cost.flops / (per_call_ms / 1e3) / 1e9
        level, attainable, bound, noise = _bounds(cost, r)
        out.append(RooflinePoint(s.kind, s.direction, s.problem, s.dtype, s.layout, s.dst_layout, s.calls,
                                 s.calls / r.steps, per_call_ms, s.time_ms / r.steps, cost.flops / 1e9,
                                 cost.bytes / 1e6, cost.intensity, achieved, attainable,
                                 achieved / attainable if attainable else None,
                                 cost.bytes / (per_call_ms / 1e3) / 1e9, level.level if level else "",
                                 level.gbs if level else None, bound, bool(bound) and achieved > bound * (1 + noise)))
    return out


def roofline_by_kind(points: Sequence[RooflinePoint]) -> list[RooflineKind]:
    """Time-weighted roofline figures per kind × direction, per step like every other table: FLOPs per
    step ÷ time per step."""
    groups: dict[tuple[str, str], list[RooflinePoint]] = {}
    for p in points:
        groups.setdefault((p.kind, p.direction), []).append(p)
    rows = []
    for (kind, direction), pts in groups.items():
        ms = sum(p.ms_per_step for p in pts)
        gflop = sum(p.gflop_per_call * p.calls_per_step for p in pts)
        attain_ms = sum(p.ms_per_step * (p.attainable_gflops or 0) for p in pts)
        rows.append(RooflineKind(kind, direction, ms, gflop, gflop / (ms / 1e3) if ms else 0.0,
                                 attain_ms / ms if ms else 0.0,
                                 (gflop / (ms / 1e3)) / (attain_ms / ms) if ms and attain_ms else None))
    return sorted(rows, key=lambda r: -r.ms_per_step)


def _logged_shape(shapes: Sequence[ShapeTotal], row: ReplayRow) -> ShapeTotal | None:
    """The logged problem a replay row stands for, matched on every key the row carries (results written
    before the layouts were recorded lack some): None when no problem or several problems match."""
    want = row.match_key
    found = [s for s in shapes if all(w is None or w == have for w, have in zip(want, s.key))]
    return found[0] if len(found) == 1 else None


def _fastest(value: float | None, fallback: float) -> float:
    """A recorded fastest call, or `fallback` for results written before fastest calls were kept."""
    return float(value) if isinstance(value, (int, float)) and value > 0 else fallback


def replay_rows(target: Target, rank: int = 0) -> list[ReplayComparison]:
    """Per replayed primitive: its in-model time per call (mean of the logged calls) and fastest call, its
    isolated time (median of the replay's calls) and fastest call, the efficiency, the time lost per step,
    (1 − efficiency) × in-model time per step, and whether the replay ran the kernel the model ran. Largest
    loss first: where a performance engineer starts.

    The efficiency is the fastest isolated call ÷ the fastest in-model call (1: the model ran the kernel as
    fast as it runs alone). Fastest against fastest, because a CPU taken by another process adds to either
    side's calls but never takes away: each side's fastest call is its kernel with the least disturbance,
    where a median of a few calls on a shared machine measured luck (profile_replay's docstring has the
    numbers). Results written before fastest calls were kept fall back to the median and the mean."""
    r = as_target(target).results[rank]
    out = []
    for row in r.replay:
        s = _logged_shape(r.onednn.shapes, row)
        if s is None or row.isolated_ms is None:
            continue
        in_model = s.time_ms / s.calls
        in_model_best = _fastest(s.min_ms, in_model)
        isolated_best = _fastest(row.isolated_min_ms, row.isolated_ms)
        eff = isolated_best / in_model_best if in_model_best > 0 else None
        impl, replay_impl = s.implementation or None, row.implementation
        per_step = s.time_ms / r.steps
        out.append(ReplayComparison(
            s.kind, s.direction, s.problem, s.dtype, s.layout, s.calls / r.steps, in_model, in_model_best,
            row.isolated_ms, isolated_best, row.runs, eff, per_step,
            (1 - eff) * s.time_ms / r.steps if eff is not None else None,   # in this order: the same float as before
            impl, replay_impl, None if impl is None or replay_impl is None else impl == replay_impl))
    return sorted(out, key=lambda x: -(x.lost_ms_per_step or 0.0))


def efficiency(target: Target) -> Efficiency:
    """The efficiency ratio of the replayed primitives: Σ(fastest isolated call × calls) ÷ Σ(fastest
    in-model call × calls) (fastest against fastest, as per primitive: replay_rows), both oneDNN's own
    timing of the primitive, so framework time (dispatch, allocation, Python) is in neither. The share of the
    plain step those primitives cover (their logged time, every call) says how much of the step the ratio
    speaks for."""
    r0 = _rank0(target)
    rows = replay_rows(target)
    isolated_ms = sum(x.isolated_fastest_ms * x.calls_per_step for x in rows)
    best_ms = sum(x.in_model_fastest_ms * x.calls_per_step for x in rows)
    logged_ms = sum(x.in_model_ms_per_step for x in rows)
    step = statistics.median(r0.plain_step_ms)
    replayable = [x for x in r0.replay if x.isolated_ms is not None]
    return Efficiency(step, len(rows), len(r0.replay) - len(rows), len(replayable) - len(rows), isolated_ms,
                      logged_ms, best_ms, isolated_ms / best_ms if best_ms else None,
                      logged_ms / step if step else None, sum(1 for x in rows if x.same_implementation is False))
