"""What the measured cells and GEMM peaks say about how a training step scales over more cores: the evidence
that bounds a prediction where an axis has one measured level. Pure.

Scaling efficiency from a layout A to a layout L with n = cores(L) ÷ cores(A) more cores, at the same local
batch, is (samples/s of L ÷ samples/s of A) ÷ n; per doubling of the cores it is that to the power 1/log2 n.

- **Physics**: no more than linear scaling, efficiency ≤ 1 (a superlinear cell, a cache effect, is counted
  as 1: an upper bound that a cell broke once is not a bound, but the broken one is within its noise on every
  committed folder).
- **Measured steps**: every pair of measured cells at one local batch, one with more cores, gives a step
  efficiency per doubling; the worst of them (any axis: 2 ranks × 1 thread and 1 rank × 2 threads use the same
  two cores) is the least the evidence allows.
- **GEMM peaks**: the peak records give the GEMM's own efficiency across the same cores (all ranks computing
  at once). A step scales worse than a GEMM (it has memory-bound and serial parts): the ratio step ÷ GEMM
  efficiency, measured on every pair of cells whose layouts have peaks, is the GEMM proxy's bias; its lowest
  value times the GEMM's efficiency on a layout not measured is another bound from below, and its median the
  GEMM proxy's corrected estimate.

Where a folder has no pair of cells on different core counts, the committed folders stand in (`PRIOR_*`, from
`benchmarks/proxy_bias.py` over every committed folder but the disturbed one; the note says so). A GEMM peak
that is slower on more cores than on fewer marks the records disturbed (a GEMM cannot slow down on idle cores:
the machine was busy, or the "cores" share one physical core's units, as a VM's vCPUs can), and the prediction
warns.

Memory bandwidth across the same cores is not measured by a sweep; where a future record measures it, it
enters here like the GEMM peak.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.core.predict.step import Cell, Layout

# From the committed folders (benchmarks/proxy_bias.py; example-ipex left out: disturbed): the worst step
# efficiency per doubling of the cores (example-ddp-script, 2×1×16 over 1×1×16 on an AMD EPYC Zen 3: 0.240, a
# 458 kFLOP step that the all-reduce dominates), the lowest step ÷ GEMM efficiency ratio (example-ddp-script
# again: 0.241) and the median ratio of the pairs that grow the threads only (0.815 over the folders that have
# one): the stand-ins where a folder has no pair of its own. proxy_bias.py recomputes them.
PRIOR_WORST_PER_DOUBLING = 0.24
PRIOR_RATIO_LOW = 0.24
PRIOR_THREAD_RATIO = 0.81
PRIOR_SOURCE = "the committed folders', with no pair of cells on different cores here"
# The other axis's evidence on the same cores, where an axis has no pair of its own, times this margin: over the
# committed folders a thread's efficiency fell to 0.647 of a rank's on the same two cores (example-mlm, BERT-tiny
# at local batch 16); a rank's fell to 0.81 of a thread's on the RetinaNet (example-predict-retinanet, local
# batch 2) and to 0.37 on the classifier, whose 2-rank steps are mostly all-reduce (the prediction adds the
# calibrated all-reduce to the low end for that; without a calibration, `COMM_UNBOUNDED` below).
CROSS_AXIS = 0.64
# On the same two cores, a thread's speed-up over one core against a rank's, measured by the ledger's thread and rank
# cases (benchmarks/ledger/cases, this 2-vCPU Xeon, local batches 16-64): MobileNet-V2, SqueezeNet 1.1 and
# ShuffleNet V2 0.69-0.77, ResNet-18 1.28-1.39 (one SqueezeNet cell, 2 threads slower than 1, left out). Neither axis
# predicts the other: a centre fitted to one axis is said to be so on the other's rows.
SAME_CORES_AXIS_SPAN = (0.69, 1.39)
# More ranks with nothing here to bound their communication (no all-reduce calibration, no multi-rank cell):
# the other axis's evidence says nothing about an all-reduce, so the low end falls to the committed folders'
# worst step efficiency, PRIOR_WORST_PER_DOUBLING, set by a 2-rank step that its all-reduce dominates.
COMM_UNBOUNDED = ("the committed folders', set by a 2-rank step its all-reduce dominates: no all-reduce "
                  "calibration nor multi-rank cell here bounds this layout's communication")


@dataclass(frozen=True, slots=True)
class Pair:
    """Two measured cells at one local batch, `high` on more cores than `low`."""

    low: Cell
    high: Cell

    @property
    def cores_ratio(self) -> float:
        return self.high.layout.cores / self.low.layout.cores

    @property
    def efficiency(self) -> float:
        """Speed-up ÷ cores ratio, capped at 1 (physics)."""
        return min(1.0, self.high.samples_per_s / self.low.samples_per_s / self.cores_ratio)

    @property
    def per_doubling(self) -> float:
        return float(self.efficiency ** (1 / math.log2(self.cores_ratio)))

    @property
    def label(self) -> str:
        return f"{self.high.layout.label} over {self.low.layout.label}"


def pairs(cells: Sequence[Cell]) -> list[Pair]:
    """Every pair of cells at one local batch and one node count, the second on more cores."""
    out = []
    for lo in cells:
        for hi in cells:
            same = lo.layout.local_batch == hi.layout.local_batch and lo.layout.nodes == hi.layout.nodes
            if same and hi.layout.cores > lo.layout.cores:
                out.append(Pair(lo, hi))
    return out


def efficiency_power(per_doubling: float, cores_ratio: float) -> float:
    """The efficiency over `cores_ratio` times the cores, at `per_doubling` per doubling.

    >>> efficiency_power(0.8, 4.0), efficiency_power(0.8, 1.0)
    (0.6400000000000001, 1.0)
    """
    return float(per_doubling ** math.log2(cores_ratio)) if cores_ratio > 1 else 1.0


THREADS, RANKS = "threads", "ranks"


def axes_grown(lay: Layout, base: Layout) -> tuple[str, ...]:
    """Which of threads and ranks `lay` has more of than `base`."""
    return tuple(a for a, more in ((THREADS, lay.threads > base.threads), (RANKS, lay.ranks > base.ranks)) if more)


@dataclass(frozen=True, slots=True)
class Worst:
    """The worst measured step efficiency per doubling of the cores, and the pair that set it."""

    per_doubling: float
    pair: str


@dataclass(frozen=True, slots=True)
class Evidence:
    """The scaling evidence of a set of cells and the GEMM peaks of their machine."""

    worst: Mapping[str, Worst] = field(default_factory=dict)   # by axis grown (THREADS, RANKS), and "any"
    gemm: Mapping[tuple[int, int], float] = field(default_factory=dict)   # (ranks, threads) → GFLOP/s, at once
    ratios: tuple[float, ...] = ()        # step ÷ GEMM efficiency, per pair with peaks (the proxy's bias)
    ratio_low_from: str = ""              # the pair with the lowest ratio
    thread_ratios: tuple[float, ...] = ()  # the same, of pairs that grow the threads only
    disturbed: str = ""                   # why the GEMM peaks say the machine was busy; "" when they do not

    @property
    def measured(self) -> bool:
        """At least one pair of cells on different cores at one local batch (else the priors stand in)."""
        return ANY in self.worst

    @property
    def multi_rank(self) -> bool:
        """Some pair grows the ranks: communication was measured in a step."""
        return RANKS in self.worst

    @property
    def ratio_low(self) -> float | None:
        return min(self.ratios) if self.ratios else None

    @property
    def thread_ratio(self) -> float:
        """The GEMM proxy's bias correction per doubling of the threads: the median step ÷ GEMM efficiency of
        thread pairs (the committed folders' without one here)."""
        return statistics.median(self.thread_ratios) if self.thread_ratios else PRIOR_THREAD_RATIO

    def unmeasured_axes(self, lay: Layout, base: Layout) -> tuple[str, ...]:
        """The axes `lay` grows over `base` that no pair of cells here grows (their scaling comes from the other
        axis, or from the committed folders where no pair was measured at all)."""
        return tuple(a for a in axes_grown(lay, base) if a not in self.worst)

    def gemm_efficiency(self, lay: Layout, base: Layout) -> float | None:
        """The GEMM's efficiency from `base` to `lay`, when both were measured (None otherwise)."""
        speedup = self.gemm_speedup(lay, base)
        if speedup is None or lay.cores <= base.cores:
            return None
        return min(1.0, speedup / (lay.cores / base.cores))

    def gemm_speedup(self, lay: Layout, base: Layout) -> float | None:
        """The GEMM peak of `lay` over that of `base`, both measured (None otherwise)."""
        hi, lo = self.gemm.get((lay.ranks, lay.threads)), self.gemm.get((base.ranks, base.threads))
        return hi / lo if hi is not None and lo is not None and lo > 0 else None

    def _worst_for(self, grown: Sequence[str], comm_unbounded: bool) -> tuple[float, str]:
        """The worst per-doubling efficiency for a step that grows these axes: each axis's own pairs, or the
        other axis's times CROSS_AXIS (the same cores split another way scale alike, within it), or the
        committed folders' where no pair was measured here or (`comm_unbounded`) where more ranks add an
        all-reduce that nothing here bounds."""
        if not self.measured:
            return PRIOR_WORST_PER_DOUBLING, PRIOR_SOURCE
        found = []
        for axis in grown or (ANY,):
            own = self.worst.get(axis)
            if own is not None:
                found.append((own.per_doubling, own.pair))
                continue
            other = self.worst[ANY]
            found.append((other.per_doubling * CROSS_AXIS,
                          f"{other.pair} × {CROSS_AXIS:g}: no pair grows the {axis} here, so the other axis's "
                          "evidence on the same cores stands in, with the committed folders' margin"))
            if axis == RANKS and comm_unbounded:
                found.append((PRIOR_WORST_PER_DOUBLING, COMM_UNBOUNDED))
        return min(found)

    def low_efficiency(self, lay: Layout, base: Layout, *, comm_unbounded: bool = False) -> tuple[float, str]:
        """The lowest efficiency from `base` to `lay` (more cores) the evidence allows, and what set it: the
        worst measured step efficiency compounded over the doublings, and the GEMM's efficiency on these cores
        times the lowest step ÷ GEMM ratio; the committed folders' figures where no pair was measured here, or
        where `lay` has more ranks than `base` and nothing here bounds their all-reduce (`comm_unbounded`:
        no calibration, no multi-rank cell)."""
        n = lay.cores / base.cores
        if n <= 1:
            return 1.0, "no more cores"
        worst, worst_from = self._worst_for(axes_grown(lay, base), comm_unbounded)
        ratio, ratio_from = ((self.ratio_low, self.ratio_low_from) if self.ratio_low is not None
                             else (PRIOR_RATIO_LOW, PRIOR_SOURCE) if not self.measured else (None, ""))
        found = [(efficiency_power(worst, n), f"the worst step efficiency, {worst:.2f} per doubling of the cores "
                                              f"({worst_from}), over {math.log2(n):.2g} doubling(s)")]
        gemm = self.gemm_efficiency(lay, base)
        if gemm is not None and ratio is not None:
            found.append((gemm * ratio, f"the GEMM peak's efficiency on these cores ({gemm:.2f}) × the lowest "
                                        f"step ÷ GEMM efficiency ({ratio:.2f}, {ratio_from})"))
        return min(found)


ANY = "any"


def disturbed_by(gemm: Mapping[tuple[int, int], float]) -> str:
    """Why GEMM peaks that run slower on more cores say the machine was busy; "" when none does."""
    for (r, t), g in sorted(gemm.items()):
        for (r0, t0), g0 in sorted(gemm.items()):
            if r * t > r0 * t0 and g < g0:
                return (f"the GEMM peak on {r}×{t} ({g:,.1f} GFLOP/s) is below the one on {r0}×{t0} ({g0:,.1f}): a "
                        "GEMM does not slow down on more idle cores, so the machine was busy while it was measured "
                        "(or these cores share one physical core's units, as a VM's vCPUs can) and these records' "
                        "scaling is not to be trusted")
    return ""


def disturbed_warning(gemm: Mapping[tuple[int, int], float]) -> str:
    """The one warning a disturbed folder gets, in the same words wherever orch shows the folder (the sweep's
    terminal output, its report, `orch predict`); "" when the GEMM peaks say nothing of the kind."""
    why = disturbed_by(gemm)
    return f"scaling evidence: {why}" if why else ""


def evidence_of(cells: Sequence[Cell], gemm: Mapping[tuple[int, int], float]) -> Evidence:
    """The evidence of these cells, with the GEMM peaks (ranks, threads) → GFLOP/s measured at once."""
    found = pairs(cells)
    worst: dict[str, Worst] = {}
    for p in sorted(found, key=lambda p: (-p.per_doubling, p.label)):       # the worst last, so it stays
        for axis in (*axes_grown(p.high.layout, p.low.layout), ANY):
            if axis not in worst or p.per_doubling <= worst[axis].per_doubling:
                worst[axis] = Worst(p.per_doubling, p.label)
    ratios: list[tuple[float, str]] = []
    thread_ratios = []
    for p in found:
        g = Evidence(gemm=gemm).gemm_efficiency(p.high.layout, p.low.layout)
        if g:
            ratios.append((p.efficiency / g, p.label))
            if axes_grown(p.high.layout, p.low.layout) == (THREADS,) and p.high.layout.ranks == p.low.layout.ranks:
                thread_ratios.append(p.efficiency / g)
    low = min(ratios, default=(0.0, ""))
    return Evidence(worst, dict(gemm), tuple(r for r, _ in ratios), low[1], tuple(thread_ratios),
                    disturbed_by(gemm))
