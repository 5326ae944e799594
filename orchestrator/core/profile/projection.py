"""Project a profiled step onto another CPU from its primitives. Pure: a profiled
target (result.ProfiledTarget, as profile.analysis reads it) and two roofs in, typed rows out; no torch, no
clock.

The rule, per rank:

- each oneDNN primitive problem of the verbose pass (ms per step) is scaled by where the roofline puts it
  on each CPU: time × attainable_source(I) ÷ attainable_target(I), with attainable(I) = min(peak, I ×
  bandwidth) at its arithmetic intensity I (core/profile/roofline); the peak is its class's own (a convolution's
  direction) where both CPUs have one measured, else the overall one (`Roof.kind_gflops`). A problem
  compute-bound on both CPUs scales by the peak ratio, one memory-bound on both by the bandwidth ratio, one
  that crosses the ridge by the mix the roofline gives. A reorder (no FLOPs) scales by the bandwidth ratio;
- everything else (the plain step less its oneDNN primitives: ATen elementwise ops, the optimizer, Python,
  dispatch, communication) is scaled by a stated rule, `OtherRule`: kept as measured (`same`, the default:
  a change of ISA leaves Python and dispatch alone, and ATen's elementwise kernels stream memory), or
  scaled by the bandwidth or the peak ratio. The projection reports the step under all three, so the
  rule's weight is visible;
- a primitive kind with no cost model (pooling, concat, ...) is scaled as everything else is.

The projected step is the slowest rank's. Its measured oneDNN time comes from the verbose pass (oneDNN's own
timing of each primitive, so verbose printing is outside it), the rest from the plain pass.

    >>> src, tgt = Roof(gflops=200.0, gbs=20.0), Roof(gflops=100.0, gbs=20.0)
    >>> primitive_scale(intensity=50.0, source=src, target=tgt)    # compute-bound on both: the peak ratio
    2.0
    >>> primitive_scale(intensity=1.0, source=src, target=tgt)     # memory-bound on both: the bandwidth ratio
    1.0
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from orchestrator.core.json.values import JsonReadable
from orchestrator.core.profile import roofline as rl
from orchestrator.core.profile.result import ProfiledTarget, RankProfile, as_target
from orchestrator.core.profile.row import Row
from orchestrator.errors import InputError

Target = ProfiledTarget | Mapping[str, JsonReadable]   # typed, or its JSON as read (result.as_target)


class OtherRule(StrEnum):
    """How the time outside oneDNN's primitives scales to the target CPU."""

    SAME = "same"              # kept as measured
    BANDWIDTH = "bandwidth"    # × source bandwidth ÷ target bandwidth
    PEAK = "peak"              # × source peak ÷ target peak


@dataclass(frozen=True, slots=True)
class Roof:
    """A CPU's roofline on the rank's cores: compute roof (GFLOP/s) and memory roof (GB/s, STREAM triad),
    and optionally a compute roof per primitive class ('convolution backward_weights': GFLOP/s), measured
    with that class's own kernel. Why per class: under the AVX2 cap a GEMM and a forward convolution ran as
    fast as natively on the Zen 4 here (its AVX-512 is two 256-bit halves), while the backward-weights
    convolutions ran 1.44× slower: a kernel's ISA changes its efficiency, not only the peak."""

    gflops: float
    gbs: float
    kind_gflops: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = {k: v for k, v in self.kind_gflops.items() if v <= 0}
        if self.gflops <= 0 or self.gbs <= 0 or bad:
            raise InputError(f"a roof needs gflops({self.gflops}) > 0, gbs({self.gbs}) > 0 and every class's "
                             f"roof > 0 (got {bad})")

    def for_class(self, key: str, other: Roof) -> Roof:
        """This roof with its compute roof for primitive class `key`, where both this CPU and `other` have
        one measured (like against like); the overall roof otherwise."""
        if key in self.kind_gflops and key in other.kind_gflops:
            return Roof(self.kind_gflops[key], self.gbs)
        return Roof(self.gflops, self.gbs)


@dataclass(frozen=True, slots=True)
class PrimitiveRow:
    """One oneDNN problem, measured and projected (ms per step)."""

    kind: str
    direction: str
    problem: str
    dtype: str
    measured_ms: float
    bound: str            # compute | memory | ridge (compute on one CPU, memory on the other) | bandwidth | other
    scale: float          # target time ÷ measured time
    projected_ms: float


@dataclass(frozen=True, slots=True)
class RankProjection:
    rank: int
    plain_step_ms: float
    onednn_ms: float          # Σ primitives per step, verbose pass
    other_ms: float           # plain step − onednn_ms (never below 0)
    projected_onednn_ms: float
    other_scales: Mapping[str, float]   # OtherRule value → the scale it gives the rest
    rows: tuple[PrimitiveRow, ...]

    def projected_step_ms(self, rule: OtherRule = OtherRule.SAME) -> float:
        return self.projected_onednn_ms + self.other_ms * self.other_scales[rule.value]


def attainable(intensity: float, roof: Roof) -> float:
    return rl.attainable_gflops(intensity, roof.gflops, roof.gbs)


def primitive_scale(intensity: float, source: Roof, target: Roof) -> float:
    """Target time ÷ source time of a primitive at this intensity (FLOP/byte; 0: pure data movement)."""
    if intensity <= 0:
        return source.gbs / target.gbs
    return attainable(intensity, source) / attainable(intensity, target)


def _bound(intensity: float, source: Roof, target: Roof) -> str:
    if intensity <= 0:
        return "bandwidth"
    on = tuple("compute" if intensity * r.gbs >= r.gflops else "memory" for r in (source, target))
    return on[0] if on[0] == on[1] else "ridge"


def other_scales(source: Roof, target: Roof) -> dict[str, float]:
    return {OtherRule.SAME.value: 1.0, OtherRule.BANDWIDTH.value: source.gbs / target.gbs,
            OtherRule.PEAK.value: source.gflops / target.gflops}


def project_rank(result: RankProfile | Mapping[str, JsonReadable], rank: int, source: Roof,
                 target: Roof) -> RankProjection:
    """One rank's step on the target CPU (see the module docstring for the rule)."""
    r = result if isinstance(result, RankProfile) else RankProfile.from_json(result)
    scales = other_scales(source, target)
    rows = []
    for s in r.onednn.shapes:
        ms = s.time_ms / r.steps
        cost = rl.primitive_cost(s.kind, s.problem, s.dtype, s.dst_dtype or None)
        key = f"{s.kind} {s.direction}"
        src, tgt = source.for_class(key, target), target.for_class(key, source)
        if cost is None:
            bound, scale = "other", scales[OtherRule.SAME.value]
        else:
            bound, scale = _bound(cost.intensity, src, tgt), primitive_scale(cost.intensity, src, tgt)
        rows.append(PrimitiveRow(s.kind, s.direction, s.problem, s.dtype, ms, bound, scale, ms * scale))
    plain = float(statistics.median(r.plain_step_ms))
    onednn = sum(row.measured_ms for row in rows)
    return RankProjection(rank, plain, onednn, max(0.0, plain - onednn), sum(row.projected_ms for row in rows),
                          scales, tuple(sorted(rows, key=lambda row: -row.measured_ms)))


def project_target(target: Target, source: Roof, to: Roof) -> list[RankProjection]:
    """Every rank of a profiled target, rank order."""
    return [project_rank(r, i, source, to) for i, r in enumerate(as_target(target).results)]


def projected_step_ms(ranks: Sequence[RankProjection], rule: OtherRule = OtherRule.SAME) -> float:
    """The step goes at its slowest rank's pace."""
    return max(r.projected_step_ms(rule) for r in ranks)


def by_kind(ranks: Sequence[RankProjection]) -> dict[str, tuple[float, float]]:
    """Rank 0's 'kind direction' → (measured, projected) ms per step, plus the rest under the `same` rule:
    what a measured run on the target is compared with, kind by kind."""
    measured: defaultdict[str, float] = defaultdict(float)
    projected: defaultdict[str, float] = defaultdict(float)
    r0 = ranks[0]
    for row in r0.rows:
        key = row.kind if row.direction == "undef" else f"{row.kind} {row.direction}"
        measured[key] += row.measured_ms
        projected[key] += row.projected_ms
    out = {key: (measured[key], projected[key]) for key in measured}
    out[OUTSIDE] = (r0.other_ms, r0.other_ms)
    return out


OUTSIDE = "outside oneDNN (plain step − primitives)"


def relative_error(projected: float, measured: float) -> float:
    """(projected − measured) ÷ measured: positive when the projection is too slow."""
    if measured <= 0:
        raise InputError(f"measured({measured}) must be > 0")
    return projected / measured - 1


def scaled_roof(per_core_gflops: float, per_core_gbs: float, threads: int) -> Roof:
    """A topology file's per-core figures for a rank of `threads` cores: linear in cores, a stated
    assumption (GEMM scales with cores; a socket's bandwidth does not, so for a memory-bound step the
    projection is optimistic by as much as the socket saturates)."""
    if threads < 1:
        raise InputError(f"threads({threads}) must be >= 1")
    return Roof(per_core_gflops * threads, per_core_gbs * threads)


def measured_by_kind(target: Target) -> dict[str, tuple[float, float]]:
    """A measured run's step split as `by_kind` splits a projection (the same roof on both sides: nothing
    scaled), so a projection and a run on the target are compared kind by kind with the same arithmetic."""
    same = Roof(1.0, 1.0)
    return by_kind(project_target(target, same, same))


def slowest_plain_step_ms(target: Target) -> float:
    return float(max(statistics.median(r.plain_step_ms) for r in as_target(target).results))


def kernels_above(target: Target, isa_word: str = "avx512") -> list[str]:
    """The oneDNN kernels of a run (every rank) whose name says they used `isa_word`: under the AVX2 cap
    there must be none, or the 'capped' run was not capped."""
    return sorted({s.implementation for r in as_target(target).results for s in r.onednn.shapes
                   if isa_word in s.implementation})


@dataclass(frozen=True, slots=True, eq=False)
class ValidationRow(Row):
    """One kind (or the whole step) projected and measured on the target."""

    part: str
    native_ms: float
    projected_ms: float
    measured_ms: float
    error: float | None       # projected ÷ measured − 1; None where nothing was measured


def _part(parts: Mapping[str, tuple[float, float]], key: str) -> tuple[float, float]:
    """A part's (native or measured, projected) ms; nothing where that side has no such part."""
    return parts.get(key, (0.0, 0.0))


def validation_rows(projected: Sequence[RankProjection], measured: Target) -> list[ValidationRow]:
    """Kind by kind (rank 0) and for the whole step (slowest rank): the native time, the projection, the
    time measured on the target and the projection's error against it."""
    ours, theirs = by_kind(projected), measured_by_kind(measured)
    rows = []
    for key in sorted(set(ours) | set(theirs), key=lambda k: (k == OUTSIDE, -_part(ours, k)[0])):
        native, proj = _part(ours, key)
        real = _part(theirs, key)[0]
        rows.append(ValidationRow(key, native, proj, real, relative_error(proj, real) if real > 0 else None))
    step = projected_step_ms(projected)
    real_step = slowest_plain_step_ms(measured)
    rows.append(ValidationRow("step (slowest rank)", max(r.plain_step_ms for r in projected), step, real_step,
                              relative_error(step, real_step)))
    return rows
