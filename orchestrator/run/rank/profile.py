"""The rank side of `orch profile` (its driver is run.driver.profile_run; its output is a profile folder, not a trial
record, so it has no work item): the training session of a throughput trial, profiled (run.rank.profiling)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob, RankOutput
    from orchestrator.run.rank.process import StartupClock


def run_rank(job: RankJob, progress: ProgressWriter, clock: StartupClock) -> RankOutput:
    from orchestrator.run.rank.profiling import profile_rank
    from orchestrator.run.rank.session import train

    return train(job, progress, clock, lambda s: profile_rank(job, s.trainer, s.module, progress))
