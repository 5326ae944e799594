"""GEMM peaks and compute roofs: one per distinct layout (ranks × threads per rank), every rank of the layout
multiplying at once, pinned as in its trials (run.protocol.gemm_peak, then run.roof.compute_roof). A layout's
peak does not depend on the local batch, so it is measured once, on the layout's first planned placement."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orchestrator.core.eta import PEAK_S, ROOF_S, STARTUP_S
from orchestrator.core.grid import Trial
from orchestrator.core.plan import PlannedTrial
from orchestrator.core.records import Kind, Record, peak_key
from orchestrator.run.job import RankJob
from orchestrator.run.kinds.base import SweepContext, WorkItem
from orchestrator.run.reports import PeakReport

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter
    from orchestrator.run.rank_main import StartupClock
    from orchestrator.run.trial import TrialRun


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
        return ctx.job(self.KIND, p, peak_precision=ctx.precision)

    def estimated_s(self, ctx: SweepContext, step_s: Callable[[Trial], float], startup_s: float) -> float:
        return STARTUP_S + PEAK_S + ROOF_S

    def record(self, ctx: SweepContext, p: PlannedTrial, run: TrialRun, started_at: float) -> Record:
        from orchestrator.run.recording import peak_record

        return peak_record(self.key, p, run, topology=ctx.plan.topology, started_at=started_at)


ITEM = PeakItem
REPORT = PeakReport


def describe(record: Record) -> str:
    """An ok record in one line, for the progress display: '812.0 GFLOP/s (fp32), roof 930.5'."""
    if record.peak is None:
        return ""
    roof = f", roof {record.peak.roof_gflops:,.1f}" if record.peak.roof_gflops else ""
    return f"{record.peak.gflops:,.1f} GFLOP/s ({record.peak.precision}){roof}"


def run_rank(job: RankJob, progress: ProgressWriter, clock: StartupClock) -> dict[str, Any]:
    """The GEMM on every rank of the layout at once, synchronized by barriers. Each matmul is a step of the
    progress file: a slow CPU's peak is progress, not a hang. No communication section: the barriers are
    gloo's whatever the trial's backend (they carry no data, and gloo is always there)."""
    import torch.distributed as dist

    from orchestrator.run.job import Phase
    from orchestrator.run.rank_session import init_process_group

    def heartbeat() -> None:
        progress.step(phase=Phase.TIMING)

    if int(os.environ.get("WORLD_SIZE", 1)) == 1:
        clock.ready("import_protocol")
        return {"report": _peak_and_roof(job, None, heartbeat)}
    clock.lap("import_protocol")
    init_process_group(job, backend="gloo")
    clock.ready("rendezvous")   # every rank has joined the group: all of them are ready to multiply
    try:
        def barrier() -> None:
            dist.barrier()

        return {"report": _peak_and_roof(job, barrier, heartbeat)}
    finally:
        dist.destroy_process_group()


def _peak_and_roof(job: RankJob, barrier: Callable[[], None] | None, heartbeat: Callable[[], None]) -> PeakReport:
    """The 2048² GEMM's peak, then the compute roof (run.roof: more GEMM sizes, convolutions in both memory
    formats), each primitive's window started by the barrier; the roof's primitives include the peak's GEMM."""
    from orchestrator.run.protocol import gemm_peak
    from orchestrator.run.roof import compute_roof

    report = gemm_peak(job.threads, job.peak_precision, barrier=barrier, on_matmul=heartbeat)
    rates = {name: r["gflops"] for name, r in
             compute_roof(job.peak_precision, report["gemm_size"], barrier=barrier, on_call=heartbeat).items()}
    gemm = f"gemm {report['gemm_size']}"
    rates[gemm] = max(rates.get(gemm, 0.0), report["gflops"])
    return PeakReport.from_json({**report, "roof_by_primitive": rates})
