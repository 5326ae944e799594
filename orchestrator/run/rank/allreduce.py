"""An all-reduce calibration's rank (its driver half is run.driver.kinds.allreduce): message sizes × repeats, timed
on every rank (protocol.allreduce_timing)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.run.job import AllreduceTask, RankOutput
from orchestrator.run.reports import AllreduceReport

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob
    from orchestrator.run.rank.process import StartupClock


def run_rank(job: RankJob, progress: ProgressWriter, clock: StartupClock) -> RankOutput:
    """Message sizes × repeats, timed on every rank."""
    import torch.distributed as dist

    from orchestrator.run.job import Phase
    from orchestrator.run.rank.protocol import allreduce_timing
    from orchestrator.run.rank.session import communication, init_process_group

    task = job.task_as(AllreduceTask)
    clock.lap("import_protocol")
    init_process_group(job)
    clock.lap("rendezvous")
    try:
        dist.barrier()
        clock.ready("barrier")
        progress.update(phase=Phase.TIMING, force=True)
        out = AllreduceReport.from_json(allreduce_timing(task.message_bytes, task.precision,
                                                         on_block=lambda: progress.step()))
        dist.barrier()  # leave together (see session.train)
    finally:
        dist.destroy_process_group()
    return RankOutput(report=out, communication=communication(job))
