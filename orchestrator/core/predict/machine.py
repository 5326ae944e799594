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
    precision: str = ""                  # what the target computes in ("": as the cells were measured)
    # where the target states no figure to scale by: the compute scales at the interval's fast and slow ends, from
    # the per-core speeds of the CPUs orch has measured (CPU_SPREAD); None where the target's figures set the scale
    spread: tuple[float, float] | None = None


SAME_MACHINE = MachineWhatIf()     # the target is the measured machine: nothing to scale, nothing to say


@dataclass(frozen=True, slots=True)
class SourceCpu:
    """The measured CPU: its name and per-core figures (None where not measured)."""

    name: str
    precision: str                       # what the sweep trained in
    peak_gflops_per_core: float | None   # the sweep's 1-rank, 1-thread GEMM peak
    isa: CpuIsa | None = None            # probe figures and a stated bandwidth, where the records keep them


# The per-core GEMM probes (GFLOP/s, one core: `orch topology`'s) of every CPU in the committed results folders, the
# lowest and the highest per precision (bf16: the CPUs that compute it natively); tests/core/test_predict_machine.py
# checks them against the folders. A target that states no figure may be any of them, for all orch knows.
CPU_SPREAD = {"fp32": (43.5, 155.0), "bf16": (173.94, 775.91)}


def _min(values: Sequence[float | None]) -> float | None:
    return min(v for v in values if v is not None) if values and all(v is not None for v in values) else None


def target_precision(source: SourceCpu, targets: Sequence[CpuIsa | None]) -> tuple[str, str]:
    """(what the target computes in, why): the measured precision, unless it is bf16 and a target node says it does
    not compute bf16 natively (a bf16 step there would be emulated, 6-65× slower): then fp32."""
    if source.precision == "bf16" and any(_says_no_bf16(t) for t in targets):
        return "fp32", (f"the target computes in fp32: its CPU does not compute bf16 natively, so a sweep would run "
                        f"fp32 there (measured in bf16 on {source.name})")
    return source.precision, ""


def _says_no_bf16(isa: CpuIsa | None) -> bool:
    """The node's description says it does not compute bf16 natively (stated, probed, or flags listed without the
    bf16 ones); a node that states a bf16 peak, or says nothing, does not."""
    if isa is None or isa.peak_bf16_gflops_per_core:
        return False
    evidence = isa.native_bf16 is not None or bool(isa.fp32_gflops and isa.bf16_gflops) or bool(isa.features)
    return evidence and not isa.bf16_native


def what_if(source: SourceCpu, targets: Sequence[CpuIsa | None]) -> MachineWhatIf:
    """The compute scale for a target whose nodes have these CPUs, with its note.

    >>> src = SourceCpu("EPYC", "fp32", 100.0)
    >>> w = what_if(src, [CpuIsa(peak_fp32_gflops_per_core=150.0), CpuIsa(peak_fp32_gflops_per_core=200.0)])
    >>> round(w.compute_scale, 4), w.other_end_scale
    (0.6667, 1.0)
    >>> for part in what_if(src, [None]).note.split("; "):
    ...     print(part)
    CPU assumed as fast as the measured EPYC (the target topology gives no per-core fp32 GEMM peak to scale compute by)
    the interval spans the per-core fp32 speeds of the CPUs orch has measured (43.5-155 GFLOP/s)
    """
    prec, why_prec = target_precision(source, targets)
    assumed = f"CPU assumed as fast as the measured {source.name}"
    target_peak = _min([t.peak_gflops_per_core(prec) if t else None for t in targets])
    target_probe = _min([t.gflops_per_core(prec) if t else None for t in targets])
    source_peak = source.peak_gflops_per_core if prec == source.precision else None
    source_probe = source.isa.gflops_per_core(source.precision) if source.isa else None
    if target_peak is not None and (source_peak or (prec != source.precision and source.peak_gflops_per_core)):
        base = source_peak or source.peak_gflops_per_core
        kind, ratio = "GEMM peak", target_peak / base  # type: ignore[operator]
        figures = f"{target_peak:,.1f} ÷ {base:,.1f}"
    elif target_probe is not None and source_probe:
        kind, ratio = "GEMM probe (orch topology's)", target_probe / source_probe
        figures = f"{target_probe:,.1f} ÷ {source_probe:,.1f}"
    else:
        why = (f"the target gives a per-core {prec} GEMM peak, but the sweep has no 1-rank, 1-thread peak record of "
               "the measured CPU to compare it with" if target_peak is not None else
               f"the target topology gives no per-core {prec} GEMM peak to scale compute by")
        return _spread(source, prec, f"{assumed} ({why})", why_prec)
    target_bw = _min([t.triad_gb_per_s_per_core if t else None for t in targets])
    source_bw = source.isa.triad_gb_per_s_per_core if source.isa else None
    if target_bw is not None and source_bw:
        other, other_words = source_bw / target_bw, f"the memory-bandwidth ratio ×{target_bw / source_bw:.2f}"
    else:
        other, other_words = 1.0, "no change (no triad bandwidth of both CPUs to bound a memory-bound step)"
    note = (f"compute scaled by the target's per-core {prec} {kind} over the measured {source.name}'s "
            f"{source.precision}: {figures} GFLOP/s = ×{ratio:.2f} (slowest target node); the interval's other end at "
            f"{other_words}")
    return MachineWhatIf(1 / ratio, other, "; ".join(w for w in (why_prec, note) if w), precision=prec)


def _spread(source: SourceCpu, precision: str, assumed: str, why_precision: str) -> MachineWhatIf:
    """No figure to scale by: compute as measured (in another precision: by the measured CPU's own probes of the
    two), the interval's ends at the slowest and fastest CPU orch has measured per core (CPU_SPREAD) against the
    measured CPU's own probe (or, without it, the middle of the range)."""
    low, high = CPU_SPREAD.get(precision, CPU_SPREAD["fp32"])
    isa = source.isa
    own = isa.gflops_per_core(precision) if isa else None
    scale, said = 1.0, assumed
    if precision != source.precision:
        measured = isa.gflops_per_core(source.precision) if isa else None
        if own and measured:
            scale = measured / own
            said = (f"compute slowed ×{scale:.2f}: the measured {source.name}'s own {precision} probe against its "
                    f"{source.precision} one ({own:,.1f} against {measured:,.1f} GFLOP/s on one core), no figure of "
                    "the target's")
    own = own or (low * high) ** 0.5
    note = (f"{said}; the interval spans the per-core {precision} speeds of the CPUs orch has measured "
            f"({low:g}-{high:g} GFLOP/s)")
    return MachineWhatIf(compute_scale=scale, note="; ".join(w for w in (why_precision, note) if w),
                         precision=precision, spread=(scale * own / high, scale * own / low))
