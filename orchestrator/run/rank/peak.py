"""A GEMM peak's rank (its driver half is run.driver.kinds.peak): the 2048² GEMM's peak (protocol.gemm_peak), then the
compute roof (run.rank.roof), on every rank of the layout at once."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.run.job import PeakTask, RankOutput
from orchestrator.run.reports import PeakReport

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob
    from orchestrator.run.rank.process import StartupClock


def run_rank(job: RankJob, progress: ProgressWriter, clock: StartupClock) -> RankOutput:
    """The GEMM on every rank of the layout at once, synchronized by barriers. Each matmul is a step of the
    progress file: a slow CPU's peak is progress, not a hang. No communication section: the barriers are
    gloo's whatever the trial's backend (they carry no data, and gloo is always there)."""
    import torch.distributed as dist

    from orchestrator.run.job import Phase
    from orchestrator.run.rank.session import init_process_group

    def heartbeat() -> None:
        progress.step(phase=Phase.TIMING)

    if int(os.environ.get("WORLD_SIZE", 1)) == 1:
        clock.ready("import_protocol")
        return RankOutput(report=_peak_and_roof(job, None, heartbeat))
    clock.lap("import_protocol")
    init_process_group(job, backend="gloo")
    clock.ready("rendezvous")   # every rank has joined the group: all of them are ready to multiply
    try:
        def barrier() -> None:
            dist.barrier()

        return RankOutput(report=_peak_and_roof(job, barrier, heartbeat))
    finally:
        dist.destroy_process_group()


def _peak_and_roof(job: RankJob, barrier: Callable[[], None] | None, heartbeat: Callable[[], None]) -> PeakReport:
    """The 2048² GEMM's peak, then the compute roof (run.rank.roof: more GEMM sizes, convolutions in both memory
    formats), each primitive's window started by the barrier; the roof's primitives include the peak's GEMM."""
    from orchestrator.run.rank.protocol import gemm_peak
    from orchestrator.run.rank.roof import compute_roof

    precision = job.task_as(PeakTask).precision
    report = gemm_peak(job.threads, precision, barrier=barrier, on_matmul=heartbeat)
    rates = {name: r["gflops"] for name, r in
             compute_roof(precision, report["gemm_size"], barrier=barrier, on_call=heartbeat).items()}
    gemm = f"gemm {report['gemm_size']}"
    rates[gemm] = max(rates.get(gemm, 0.0), report["gflops"])
    return PeakReport.from_json({**report, "roof_by_primitive": rates})
