"""GEMM peaks and compute roofs: one per distinct layout (ranks × threads per rank), every rank of the layout
multiplying at once, pinned as in its trials (run.rank.protocol.gemm_peak, then run.rank.roof.compute_roof). A layout's
peak does not depend on the local batch, so it is measured once, on the layout's first planned placement."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.core.execution.eta import PEAK_S, ROOF_S, STARTUP_S
from orchestrator.core.measured.records import Kind, Record, peak_key
from orchestrator.core.planning.plan import PlannedTrial
from orchestrator.core.planning.trial import Trial
from orchestrator.run.driver.kinds.base import SweepContext, WorkItem
from orchestrator.run.job import PeakTask, RankJob

if TYPE_CHECKING:
    from orchestrator.run.driver.trial import TrialRun


class PeakItem(WorkItem):
    KIND = Kind.PEAK
    ORDER = 0

    @classmethod
    def plan_items(cls, ctx: SweepContext) -> list[WorkItem]:
        layouts: dict[tuple[int, int], PlannedTrial] = {}
        for p in ctx.plan.feasible if ctx.spec.measure.peak else ():
            layouts.setdefault((p.trial.ranks, p.trial.threads_per_rank), p)
        return [cls(peak_key(ranks, threads, ctx.precision), p) for (ranks, threads), p in sorted(layouts.items())]

    def label(self, ctx: SweepContext, p: PlannedTrial) -> str:
        t = p.trial
        return f"{self.key} (GEMM peak on {t.ranks} rank(s) × {t.threads_per_rank} pinned core(s), all at once" \
               f"{ctx.where(p)})"

    def job(self, ctx: SweepContext, p: PlannedTrial) -> RankJob:
        return ctx.job(PeakTask(precision=ctx.precision), p)

    def estimated_s(self, ctx: SweepContext, step_s: Callable[[Trial], float], startup_s: float) -> float:
        return STARTUP_S + PEAK_S + ROOF_S

    def record(self, ctx: SweepContext, p: PlannedTrial, run: TrialRun, started_at: float) -> Record:
        from orchestrator.run.driver.recording import peak_record

        return peak_record(self.key, p, run, topology=ctx.plan.topology, started_at=started_at)


ITEM = PeakItem


def describe(record: Record) -> str:
    """An ok record in one line, for the progress display: '812.0 GFLOP/s (fp32), roof 930.5'."""
    if record.peak is None:
        return ""
    roof = f", roof {record.peak.roof_gflops:,.1f}" if record.peak.roof_gflops else ""
    return f"{record.peak.gflops:,.1f} GFLOP/s ({record.peak.precision}){roof}"
