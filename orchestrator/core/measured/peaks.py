"""The measured GEMM peak of a layout, from the peak records.

A layout's peak is measured with all of its ranks running the GEMM at once, pinned as in the trial
(records with ``peak.concurrent``): neighbours share memory bandwidth, caches and the power budget, so
ranks × the peak of one rank alone overstates it. Results recorded before such peaks existed hold one
rank's peak per threads count; for them the layout's peak is still ranks × peak(threads), and the table
says so.

A peak record also holds the layout's compute roof (`roof_gflops`, newer records): the best rate of several
GEMM sizes and convolution shapes in both memory formats (run.rank.roof), which a training step's convolutions
cannot beat the way they beat one square GEMM. The GEMM alone stays `gflops`: `orch predict` compares GEMM
with GEMM (a topology file states a GEMM's peak). What a step is held against is `roof_of_layout`: the roof
where the record has one, else the GEMM, said so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from orchestrator.core.measured import records as rec

DEFAULT_PEAK_PRECISION = "fp32"   # what training runs in unless the workload says otherwise


@dataclass(frozen=True, slots=True)
class LayoutPeak:
    gflops: float
    concurrent: bool   # measured with all ranks at once; False: ranks × one rank's peak
    gemm_only: bool = False   # a record from before the roof: one square GEMM, which convolutions can beat


@dataclass(frozen=True, slots=True)
class Peaks:
    """GFLOP/s by (ranks, threads, precision) measured at once, and by (threads, precision) for one rank."""

    layouts: dict[tuple[int, int, str], float] = field(default_factory=dict)
    one_rank: dict[tuple[int, str], float] = field(default_factory=dict)
    layout_roofs: dict[tuple[int, int, str], float] = field(default_factory=dict)   # the compute roof, at once

    def precisions(self) -> list[str]:
        return sorted({p for _, _, p in self.layouts} | {p for _, p in self.one_rank})

    def of_layout(self, ranks: int, threads: int, precision: str | None) -> LayoutPeak | None:
        """The layout's own measurement when there is one, else ranks × one rank's peak, else None.

        >>> peaks = Peaks({(2, 1, "fp32"): 288.0}, {(1, "fp32"): 213.5})
        >>> [(p.gflops, p.concurrent) for p in (peaks.of_layout(2, 1, "fp32"), peaks.of_layout(4, 1, "fp32"))]
        [(288.0, True), (854.0, False)]
        """
        if precision is None:
            return None
        measured = self.layouts.get((ranks, threads, precision))
        if measured is not None:
            return LayoutPeak(measured, True)
        alone = self.one_rank.get((threads, precision))
        return LayoutPeak(ranks * alone, ranks == 1) if alone is not None else None

    def roof_of_layout(self, ranks: int, threads: int, precision: str | None) -> LayoutPeak | None:
        """The layout's compute roof where its record holds one, else its GEMM peak marked `gemm_only`.

        >>> peaks = Peaks({(1, 1, "fp32"): 90.3, (2, 1, "fp32"): 170.0}, {}, {(1, 1, "fp32"): 108.5})
        >>> [(p.gflops, p.gemm_only) for p in (peaks.roof_of_layout(1, 1, "fp32"), peaks.roof_of_layout(2, 1, "fp32"))]
        [(108.5, False), (170.0, True)]
        """
        roof = self.layout_roofs.get((ranks, threads, precision)) if precision is not None else None
        if roof is not None:
            return LayoutPeak(roof, True)
        gemm = self.of_layout(ranks, threads, precision)
        return LayoutPeak(gemm.gflops, gemm.concurrent, gemm_only=True) if gemm is not None else None


def peak_index(records: Iterable[rec.Record]) -> Peaks:
    """Peaks from the ok peak records. A concurrent 1-rank measurement also serves as one rank's peak."""
    layouts: dict[tuple[int, int, str], float] = {}
    one_rank: dict[tuple[int, str], float] = {}
    roofs: dict[tuple[int, int, str], float] = {}
    for r in rec.Records.of(records).ok(rec.Kind.PEAK):
        peak, threads = r.peak, r.threads_per_rank or 0
        if peak is None:
            continue
        if peak.concurrent:
            layouts[(r.ranks or 0, threads, peak.precision)] = peak.gflops
            if peak.roof_gflops:
                roofs[(r.ranks or 0, threads, peak.precision)] = peak.roof_gflops
            if r.ranks == 1:
                one_rank.setdefault((threads, peak.precision), peak.gflops)
        else:  # an older record: one rank alone per threads count, which wins over a derived one
            one_rank[(threads, peak.precision)] = peak.gflops
    return Peaks(layouts, one_rank, roofs)


def choose_precision(peaks: Peaks, wanted: str | None = None) -> str | None:
    """`wanted` if given, else fp32 when measured, else the first measured precision by name."""
    if wanted:
        return wanted
    measured = peaks.precisions()
    if not measured:
        return None
    return DEFAULT_PEAK_PRECISION if DEFAULT_PEAK_PRECISION in measured else measured[0]
