"""The rank side of `orch profile` (its driver is run.profile_run; its output is a profile folder, not a trial
record, so it has no work item): the training session of a throughput trial, profiled (run.profiling)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.core.profile.result import RankProfile

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob
    from orchestrator.run.rank_main import StartupClock


REPORT = RankProfile   # the rank's profile (run.profiling.profile_rank)


def run_rank(job: RankJob, progress: ProgressWriter, clock: StartupClock) -> dict[str, Any]:
    from orchestrator.run.profiling import profile_rank
    from orchestrator.run.rank_session import train

    def profiled(s: Any) -> dict[str, Any]:
        return {"report": profile_rank(job, s.trainer, s.module, progress)}

    return train(job, progress, clock, profiled)
