"""A throughput trial's rank (its driver half is run.driver.kinds.throughput): timed repeats of training steps
(protocol.measure_throughput), with what DDP put on the wire."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.run.job import RankOutput

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob
    from orchestrator.run.rank.process import StartupClock
    from orchestrator.run.rank.session import Session
    from orchestrator.run.reports import ThroughputReport


def run_rank(job: RankJob, progress: ProgressWriter, clock: StartupClock) -> RankOutput:
    from orchestrator.run.rank.session import train

    return train(job, progress, clock, lambda session: _measure(job, progress, session))


def _measure(job: RankJob, progress: ProgressWriter, session: Session) -> ThroughputReport:
    from orchestrator.run.rank import ddp, protocol

    report = protocol.measure_throughput(job, session.trainer, session.module, progress)
    wire = ddp.wire_sizes(report.to_json(), session.options if session.world > 1 else None)
    return report.with_fields(**wire)
