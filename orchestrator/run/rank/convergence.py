"""A convergence run's rank (its driver half is run.driver.kinds.convergence): training to the spec's target metric
(protocol.train_to_target), at the learning rate the run's schedule starts from."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob, RankOutput
    from orchestrator.run.rank.process import StartupClock


def run_rank(job: RankJob, progress: ProgressWriter, clock: StartupClock) -> RankOutput:
    from orchestrator.run.job import ConvergenceTask
    from orchestrator.run.rank import protocol
    from orchestrator.run.rank.session import train

    lr = job.task_as(ConvergenceTask).settings.schedule.at(0.0)
    return train(job, progress, clock, lambda s: protocol.train_to_target(job, s.trainer, s.module, progress), lr=lr)
