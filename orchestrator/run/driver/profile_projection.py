"""`orch profile --project-to`: the roofs a projection needs, measured or read, and the projection of every
profiled target (core/profile/projection holds the rule).

Two targets:
- `avx2`: this CPU under ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2. Both roofs are measured now, by
  the same probe (roof_probe), natively and under the cap, on rank 0's cores at the target's threads:
  like against like, whatever the profile's own in-rank peak read; with a roof per convolution direction;
- a topology file whose nodes' `isa` state one core's GEMM peak in the profile's precision and its
  STREAM-triad bandwidth (`peak_fp32_gflops_per_core` / `peak_bf16_gflops_per_core`,
  `triad_gb_per_s_per_core`, added for `orch predict`'s CPU what-if): the slowest node's figures × the
  rank's threads (linear in cores: a stated assumption), against this CPU's probe at the same threads
  counting its GEMM only, as the file's figure is a GEMM's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from orchestrator.core.json.values import JsonMapping, JsonReadable
from orchestrator.core.machine.isa import CpuIsa
from orchestrator.core.machine.topology import Topology
from orchestrator.core.profile import projection as pj
from orchestrator.core.profile.result import ProfiledTarget, as_target
from orchestrator.errors import InputError
from orchestrator.run.driver.roof_probe import AVX2_CAP_ENV, Probe, class_gflops, measure_roofs, roof_number

AVX2 = "avx2"
Measure = Callable[[list[int], str], Mapping[str, Probe]]   # roof_probe.measure_roofs: setting → its roofs


class RoofJson(TypedDict):
    gflops: float
    gbs: float
    kind_gflops: NotRequired[dict[str, float]]


class ProjectionJson(TypedDict):
    """One profiled target's projection, as `orch profile` writes it (report.projection_report)."""

    label: str
    target: str
    note: str
    source_roof: RoofJson
    target_roof: RoofJson
    measured_step_ms: float
    projected_step_ms: dict[str, float]   # OtherRule value → the step
    ranks: list[dict[str, JsonReadable]]
    probes: Mapping[str, Probe]


@dataclass(frozen=True, slots=True)
class Roofs:
    source: pj.Roof
    target: pj.Roof
    target_name: str
    note: str                       # where each roof came from, in words
    probes: Mapping[str, Probe]     # the probes' own records


def _precision(result: ProfiledTarget) -> str:
    peak = result.results[0].peak
    return str((peak.precision if peak else None) or "fp32")


def _slowest_isa(topology: Topology, precision: str) -> tuple[float, float]:
    """(per-core peak, per-core triad) of the slowest node; InputError naming what the file lacks."""
    isas: list[CpuIsa | None] = [getattr(n, "isa", None) for n in topology.nodes]
    peaks = [i.peak_gflops_per_core(precision) if i else None for i in isas]
    triads = [i.triad_gb_per_s_per_core if i else None for i in isas]
    missing = [name for name, values in ((f"isa.peak_{precision}_gflops_per_core", peaks),
                                         ("isa.triad_gb_per_s_per_core", triads)) if any(v is None for v in values)]
    if missing:
        raise InputError(f"the topology file states no {' and no '.join(missing)} for every node: a projection "
                         "needs one core's GEMM peak and STREAM-triad bandwidth on the target")
    return min(p for p in peaks if p is not None), min(t for t in triads if t is not None)


def check_projectable(topology: Topology) -> None:
    """Before anything runs: an InputError unless every node states a triad and a GEMM peak in some
    precision (which one the profile needs is known only once it ran)."""
    errors = []
    for precision in ("fp32", "bf16"):
        try:
            _slowest_isa(topology, precision)
            return
        except InputError as exc:
            errors.append(str(exc))
    raise InputError(errors[0])


def roofs_for(target: ProfiledTarget | JsonMapping, to: str, topology: Topology | None,
              measure: Measure = measure_roofs) -> Roofs:
    """The source and target roofs for one profiled target (`to`: "avx2", or a topology file's name with
    `topology` loaded from it)."""
    result = as_target(target)
    cpus = sorted(result.placement[0].cpus) if result.placement else []
    if not cpus:
        raise InputError(f"{result.label}: no placement recorded; the probe needs rank 0's cores")
    precision = _precision(result)
    probes = measure(cpus, precision)
    native = probes["native"]
    if to == AVX2:
        capped = probes["avx2"]
        cap = " ".join(f"{k}={v}" for k, v in AVX2_CAP_ENV.items())
        return Roofs(_probed_roof(native), _probed_roof(capped),
                     f"this CPU under {cap}",
                     f"both roofs probed now on CPUs {cpus} at {len(cpus)} thread(s), {precision}: the best of the "
                     "median GEMM and a 3×3 convolution (and that convolution in each direction, for the "
                     "convolutions of that direction), and the STREAM triad, natively and under the cap "
                     "alternately, the best of each", probes)
    assert topology is not None
    peak, triad = _slowest_isa(topology, precision)
    threads = int(result.threads)
    source = pj.Roof(roof_number(native, "gemm_gflops"), roof_number(native, "triad_gbs"))
    return Roofs(source, pj.scaled_roof(peak, triad, threads), to,
                 f"source: this CPU's GEMM and triad probed now on CPUs {cpus} at {threads} thread(s), {precision}; "
                 f"target: {to}'s slowest node, {peak:g} GFLOP/s and {triad:g} GB/s per core × {threads} "
                 "core(s) (linear in cores, assumed)", {"native": native})


def project(results: Sequence[ProfiledTarget | JsonMapping], to: str, topology: Topology | None,
            measure: Measure = measure_roofs) -> list[ProjectionJson]:
    """One projection per profiled target that ran: its roofs, each rank's projection and the step under
    every rule for what lies outside oneDNN."""
    out: list[ProjectionJson] = []
    for result in map(as_target, results):
        if result.status != "ok" or not result.results:
            continue
        roofs = roofs_for(result, to, topology, measure)
        ranks = pj.project_target(result, roofs.source, roofs.target)
        out.append({"label": result.label, "target": roofs.target_name, "note": roofs.note,
                    "source_roof": _roof_json(roofs.source), "target_roof": _roof_json(roofs.target),
                    "measured_step_ms": max(r.plain_step_ms for r in ranks),
                    "projected_step_ms": {rule.value: pj.projected_step_ms(ranks, rule) for rule in pj.OtherRule},
                    "ranks": [_rank_json(r) for r in ranks], "probes": roofs.probes})
    return out


def _probed_roof(probe: Probe) -> pj.Roof:
    return pj.Roof(roof_number(probe, "gflops"), roof_number(probe, "triad_gbs"), class_gflops(probe))


def _roof_json(roof: pj.Roof) -> RoofJson:
    out: RoofJson = {"gflops": roof.gflops, "gbs": roof.gbs}
    if roof.kind_gflops:
        out["kind_gflops"] = dict(roof.kind_gflops)
    return out


def _rank_json(r: pj.RankProjection) -> dict[str, JsonReadable]:
    return {"rank": r.rank, "plain_step_ms": r.plain_step_ms, "onednn_ms": r.onednn_ms, "other_ms": r.other_ms,
            "projected_onednn_ms": r.projected_onednn_ms, "other_scales": dict(r.other_scales),
            "primitives": [{"kind": p.kind, "direction": p.direction, "problem": p.problem, "dtype": p.dtype,
                            "measured_ms": p.measured_ms, "bound": p.bound, "scale": p.scale,
                            "projected_ms": p.projected_ms} for p in r.rows]}


def ranks_from_json(projection: Mapping[str, Any]) -> list[pj.RankProjection]:
    """A saved projection's ranks back as core data (the validation reads what `orch profile` wrote)."""
    return [pj.RankProjection(r["rank"], r["plain_step_ms"], r["onednn_ms"], r["other_ms"], r["projected_onednn_ms"],
                              r["other_scales"],
                              tuple(pj.PrimitiveRow(**p) for p in r["primitives"])) for r in projection["ranks"]]
