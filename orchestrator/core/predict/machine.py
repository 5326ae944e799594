"""A CPU what-if: how much faster or slower the target's cores compute than the measured ones. Pure.

A topology file may state, per node, one core's GEMM peak for each precision and its STREAM-triad bandwidth
(`isa.peak_fp32_gflops_per_core`, `isa.peak_bf16_gflops_per_core`, `isa.triad_gb_per_s_per_core`). The step
model's compute term is then scaled by the ratio of GEMM peaks, target ÷ measured, in the precision the sweep
trained in, measured source against measured (or stated) target:

- the measured CPU's peak is the sweep's own 1-rank, 1-thread peak record (`peaks.peak_index`), compared with
  the target's stated peak; failing either, the two probes `orch topology` runs (a small GEMM on one core, in
  `isa.fp32_gflops`/`bf16_gflops`) are compared, never a probe with a peak (different GEMM sizes);
- a synchronous step goes at its slowest node's pace, so the slowest target node sets the ratio;
- a step that is memory-bound scales with bandwidth, not with the GEMM peak: the interval's other end is at
  the bandwidth ratio where both CPUs state one, else at no change (scale 1), so the interval covers a step
  anywhere between wholly compute-bound and not sped up (or slowed) at all.

Without figures for both, compute is left as measured and every row says "CPU assumed as fast as the
measured <CPU>".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.core.machine.isa import CpuIsa
from orchestrator.core.machine.topology import NodeLink


@dataclass(frozen=True, slots=True)
class MachineWhatIf:
    """How the target's cores compare with the measured ones (a CPU what-if), or the assumption made; and the link
    between its nodes where the target's topology file states one (`predict.network`)."""

    compute_scale: float = 1.0           # target compute time ÷ measured (1 / the GEMM-peak ratio)
    other_end_scale: float = 1.0         # the scale at the interval's other end (memory-bandwidth ratio or 1)
    note: str = ""                       # said on every row of another machine
    node_link: NodeLink | None = None    # the target's stated link between nodes


SAME_MACHINE = MachineWhatIf()     # the target is the measured machine: nothing to scale, nothing to say


@dataclass(frozen=True, slots=True)
class SourceCpu:
    """The measured CPU: its name and per-core figures (None where not measured)."""

    name: str
    precision: str                       # what the sweep trained in
    peak_gflops_per_core: float | None   # the sweep's 1-rank, 1-thread GEMM peak
    isa: CpuIsa | None = None            # probe figures and a stated bandwidth, where the records keep them


def _min(values: Sequence[float | None]) -> float | None:
    return min(v for v in values if v is not None) if values and all(v is not None for v in values) else None


def what_if(source: SourceCpu, targets: Sequence[CpuIsa | None]) -> MachineWhatIf:
    """The compute scale for a target whose nodes have these CPUs, with its note.

    >>> src = SourceCpu("EPYC", "fp32", 100.0)
    >>> w = what_if(src, [CpuIsa(peak_fp32_gflops_per_core=150.0), CpuIsa(peak_fp32_gflops_per_core=200.0)])
    >>> round(w.compute_scale, 4), w.other_end_scale
    (0.6667, 1.0)
    >>> print(what_if(src, [None]).note)
    CPU assumed as fast as the measured EPYC (the target topology gives no per-core fp32 GEMM peak to scale compute by)
    """
    prec = source.precision
    assumed = f"CPU assumed as fast as the measured {source.name}"
    target_peak = _min([t.peak_gflops_per_core(prec) if t else None for t in targets])
    target_probe = _min([t.gflops_per_core(prec) if t else None for t in targets])
    source_probe = source.isa.gflops_per_core(prec) if source.isa else None
    if target_peak is not None and source.peak_gflops_per_core:
        kind, ratio = "GEMM peak", target_peak / source.peak_gflops_per_core
        figures = f"{target_peak:,.1f} ÷ {source.peak_gflops_per_core:,.1f}"
    elif target_probe is not None and source_probe:
        kind, ratio = "GEMM probe (orch topology's)", target_probe / source_probe
        figures = f"{target_probe:,.1f} ÷ {source_probe:,.1f}"
    elif target_peak is not None:
        return MachineWhatIf(note=f"{assumed} (the target gives a per-core {prec} GEMM peak, but the sweep has no "
                                  "1-rank, 1-thread peak record of the measured CPU to compare it with)")
    else:
        return MachineWhatIf(note=f"{assumed} (the target topology gives no per-core {prec} GEMM peak to scale "
                                  "compute by)")
    target_bw = _min([t.triad_gb_per_s_per_core if t else None for t in targets])
    source_bw = source.isa.triad_gb_per_s_per_core if source.isa else None
    if target_bw is not None and source_bw:
        other, other_words = source_bw / target_bw, f"the memory-bandwidth ratio ×{target_bw / source_bw:.2f}"
    else:
        other, other_words = 1.0, "no change (no triad bandwidth of both CPUs to bound a memory-bound step)"
    note = (f"compute scaled by the target's per-core {prec} {kind} over the measured {source.name}'s: {figures} "
            f"GFLOP/s = ×{ratio:.2f} (slowest target node); the interval's other end at {other_words}")
    return MachineWhatIf(1 / ratio, other, note)
