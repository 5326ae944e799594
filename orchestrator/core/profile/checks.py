"""What physics allows a profile, checked: a failed check marks the target "disturbed", and the report
withholds the verdicts that rest on it. Pure: the same typed target as profile.analysis, no torch, no clock.

A target is disturbed when
- a primitive ran above its roof by more than the roof's noise: the compute roof (the measured peak of the same
  cores; noise: the fastest against the median GEMM, at least NOISE_FLOOR), or the bandwidth roof of the memory
  level its working set fits in (intensity × that level's triad, profile.levels; noise NOISE_FLOOR). A
  primitive whose data stays in a cache (the P6/P7 convolutions on 1×1 inputs, a few MB of weights) is held to
  that cache's bandwidth, not DRAM's. Results without cache roofs (older ones, a machine whose sysfs lists no
  caches) are held to the compute roof alone: the DRAM line does not bound data in cache. The roofline's rows
  carry the same flag (`above_roof`), so the rows and this check cannot disagree;
- an efficiency is above 1 beyond NOISE_FLOOR (the same oneDNN kernel's fastest call was faster in the model
  than alone), or the replay ran with other threads or on other CPUs than the rank;
- an overhead is negative beyond the plain step's noise (a profiled pass ran faster than the plain one);
- a rank got less than MIN_CPU_SHARE of its CPUs during a pass (its CPU time ÷ wall time ÷ its threads);
- the same work, measured twice, disagrees by more than its noise: every rank of a layout does the same
  primitives; targets with the same layout and the same convolution problems do the same convolutions;
  ranks with the same threads and precision measure the same GEMM peak.

    >>> [f.check for f in check_target(ProfiledTarget(label="1x1x8", results=(RankProfile(plain_cpu_share=0.4),)))]
    ['cpu share']
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.core.profile import analysis as pa
from orchestrator.core.profile.result import ProfiledTarget, RankProfile, as_target

Target = pa.Target
MIN_CPU_SHARE = 0.8     # below this, a rank's times measure its neighbours as much as itself
NOISE_FLOOR = pa.NOISE_FLOOR   # two measurements of the same work may differ by this much before they disagree
PASSES = ("plain", "verbose", "profiler")
CHECKS = ("above roof", "efficiency above 1", "replay setting", "negative overhead", "cpu share",
          "same work disagrees")


@dataclass(frozen=True, slots=True)
class Finding:
    """One failed check, with its numbers."""

    target: str
    check: str      # one of CHECKS
    detail: str


def _noise(step_ms: Sequence[float]) -> float:
    """Relative spread of repeated steps ((max − min) ÷ median), never below NOISE_FLOOR."""
    if len(step_ms) < 2:
        return NOISE_FLOOR
    return max(NOISE_FLOOR, (max(step_ms) - min(step_ms)) / statistics.median(step_ms))


def _roof(target: ProfiledTarget) -> list[Finding]:
    """The roofline's own `above_roof` flags (analysis.roofline_points), so the summary and the rows agree."""
    out = []
    for rank, r in enumerate(target.results):
        if r.peak is None:
            continue
        above = [p for p in pa.roofline_points(target, rank) if p.above_roof]
        if above:
            worst = max(above, key=lambda p: p.achieved_gflops / p.roof_gflops)
            out.append(Finding(target.label, "above roof",
                               f"rank {rank}: {len(above)} primitive(s) above their roof by more than its noise, "
                               f"worst {worst.kind} {worst.direction} {worst.problem} at "
                               f"{worst.achieved_gflops:.1f} GFLOP/s against {worst.roof_gflops:.1f} "
                               f"(×{worst.achieved_gflops / worst.roof_gflops:.2f}): {_roof_words(worst, r)}"))
    return out


def _roof_words(p: pa.RooflinePoint, r: RankProfile) -> str:
    """Which roof bounds the point, with its figures."""
    if p.level_gbs and r.peak is not None and p.roof_gflops < r.peak.gflops:
        return (f"the {p.level} roof, {p.level_gbs:.1f} GB/s × {p.flop_per_byte:.3g} FLOP/byte (its working set, "
                f"{p.mbytes_per_call:.3g} MB, fits in {p.level}), noise {NOISE_FLOOR:.0%}")
    return f"the compute roof, noise {pa.peak_noise(r.peak):.0%}"


def _efficiency(target: ProfiledTarget) -> list[Finding]:
    rows = pa.replay_rows(target) if target.results[0].replay else []
    # The same kernel alone cannot beat itself in the model by more than the timing's noise; a replay that ran
    # another kernel measured other work (the replay table lists it as a mismatch), so it is not compared.
    over = [(x, x.efficiency) for x in rows if x.efficiency is not None and x.efficiency > 1 + NOISE_FLOOR
            and x.same_implementation is not False]
    if not over:
        return []
    worst, worst_eff = max(over, key=lambda x: x[1])
    ratio = pa.efficiency(target).efficiency_ratio
    return [Finding(target.label, "efficiency above 1",
                    f"{len(over)} of {len(rows)} replayed primitive(s) ran faster in the model than alone (fastest "
                    f"call against fastest call), worst {worst.kind} {worst.direction} {worst.problem}: "
                    f"{worst.isolated_fastest_ms:.3g} ms alone, {worst.in_model_fastest_ms:.3g} ms in the "
                    f"model (×{worst_eff:.2f}); ratio over all replayed {ratio:.2f}")]


def _replay_setting(target: ProfiledTarget) -> list[Finding]:
    """The replay must run where the rank ran: its threads, on its cores. A replay with other threads or
    on other cores times another machine, and every efficiency built on it compares unlike with unlike."""
    out = []
    placement = target.rank_cpus()
    for rank, r in enumerate(target.results):
        setting = r.replay_setting
        if not r.replay or not setting:
            continue
        if setting.threads != target.threads:
            out.append(Finding(target.label, "replay setting",
                               f"rank {rank}: the replay ran {setting.threads} thread(s), the rank "
                               f"{target.threads}"))
        cpus = placement.get(rank)
        if cpus is not None and sorted(setting.cpus) != cpus:
            out.append(Finding(target.label, "replay setting",
                               f"rank {rank}: the replay could run on CPUs {list(setting.cpus)}, the rank was "
                               f"placed on {cpus}"))
    return out


def step_noise(target: Target) -> float:
    """The plain steps' relative spread, the largest over ranks (never below NOISE_FLOOR): how far apart two
    passes of the same steps may come out before the difference means anything."""
    return max(_noise(r.plain_step_ms) for r in as_target(target).results)


def _overheads(target: ProfiledTarget) -> list[Finding]:
    s = pa.summary(target)
    # a profiled pass cannot be faster than the plain one; by less than the plain steps' own spread it only
    # looks so
    noise = step_noise(target)
    out = [Finding(target.label, "negative overhead",
                   f"the {name} pass's step ({(1 + value) * s.plain_step_ms:.1f} ms) is {-value:.1%} faster than "
                   f"the plain step ({s.plain_step_ms:.1f} ms), beyond its noise ({noise:.0%})")
           for name, value in (("oneDNN verbose", s.verbose_overhead), ("torch.profiler", s.profiler_overhead))
           if value < -noise]
    out += [Finding(target.label, "negative overhead",
                    f"rank {a.rank}: profiled step {a.profiled_step_ms:.1f} ms < its plain step "
                    f"{a.plain_step_ms:.1f} ms, beyond its noise ({noise:.0%})")
            for a in pa.attribution(target) if a.profiler_overhead < -noise]
    return out


def _cpu_shares(target: ProfiledTarget) -> list[Finding]:
    out = []
    for rank, r in enumerate(target.results):
        for name, share in r.cpu_shares():
            if share is not None and share < MIN_CPU_SHARE:
                out.append(Finding(target.label, "cpu share",
                                   f"rank {rank} got {share:.1%} of its CPUs in the {name} pass "
                                   f"(CPU time ÷ wall time ÷ threads; at least {MIN_CPU_SHARE:.0%} required)"))
    return out


def _conv_ms_per_step(r: RankProfile) -> float:
    return float(sum(s.time_ms for s in r.onednn.shapes if s.kind == "convolution") / r.steps)


def _disagree(what: str, values: Sequence[tuple[str, float]], noise: float) -> str | None:
    """A message when the largest and smallest of `values` (label, value) differ by more than `noise`."""
    positive = [(label, v) for label, v in values if v > 0]
    if len(positive) < 2:
        return None
    lo, hi = min(positive, key=lambda x: x[1]), max(positive, key=lambda x: x[1])
    if hi[1] / lo[1] - 1 <= noise:
        return None
    return (f"{what}: {hi[0]} {hi[1]:.4g} against {lo[0]} {lo[1]:.4g} ({hi[1] / lo[1] - 1:.0%} apart, "
            f"noise {noise:.0%})")


def _ranks_agree(target: ProfiledTarget) -> list[Finding]:
    """Data-parallel ranks run the same primitives on the same shapes: their oneDNN convolution time per
    step must agree within the steps' own spread."""
    results = target.results
    noise = max(_noise(r.plain_step_ms) for r in results)
    msgs = [_disagree("convolution ms per step (oneDNN log)",
                      [(f"rank {i}", _conv_ms_per_step(r)) for i, r in enumerate(results)], noise)]
    if all(r.peak is not None for r in results):
        msgs.append(_disagree("GEMM peak, GFLOP/s", [(f"rank {i}", _gemm(r)) for i, r in enumerate(results)], noise))
    return [Finding(target.label, "same work disagrees", m) for m in msgs if m]


def _gemm(r: RankProfile) -> float:
    return float(r.peak.gemm) if r.peak is not None else 0.0


def check_target(target: Target) -> list[Finding]:
    """Every check that one target's own data can fail; what `orch profile` repeats a pass for."""
    t = as_target(target)
    out = _cpu_shares(t)
    if all(r.plain_step_ms for r in t.results):
        out += _overheads(t) + _roof(t) + _efficiency(t) + _replay_setting(t) + _ranks_agree(t)
    return out


def _conv_work(r: RankProfile) -> frozenset[tuple[str, str, str, str, int]]:
    return frozenset((s.kind, s.direction, s.problem, s.dtype, s.calls)
                     for s in r.onednn.shapes if s.kind == "convolution")


def check_across(targets: Sequence[Target]) -> list[Finding]:
    """The same work in different targets: convolutions of targets with the same layout and the same
    convolution problems (variants that change something else), and the GEMM peak of ranks with the same
    threads and precision. Each disagreement is a finding on every target involved."""
    out: list[Finding] = []
    groups: dict[tuple[object, ...], list[ProfiledTarget]] = {}   # keyed by the work: its kind first
    for t in map(as_target, targets):
        r0 = t.results[0]
        groups.setdefault(("conv", t.ranks, t.threads, t.local_batch, _conv_work(r0)), []).append(t)
        groups.setdefault(("peak", t.threads, r0.peak.precision if r0.peak else None), []).append(t)
    for key, members in groups.items():
        if len(members) < 2:
            continue
        noise = max(_noise(t.results[0].plain_step_ms) for t in members)
        if key[0] == "conv":
            msg = _disagree("the same convolutions, ms per step", [(t.label, _conv_ms_per_step(t.results[0]))
                                                                   for t in members], noise)
        else:
            msg = _disagree(f"GEMM peak at {key[1]} thread(s), {key[2]}, GFLOP/s",
                            [(t.label, _gemm(t.results[0])) for t in members], noise)
        if msg:
            out += [Finding(t.label, "same work disagrees", msg) for t in members]
    return out


def disturbed(findings: Sequence[Finding]) -> frozenset[str]:
    """The labels of the targets with at least one failed check."""
    return frozenset(f.target for f in findings)
