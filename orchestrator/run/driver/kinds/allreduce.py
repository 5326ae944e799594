"""All-reduce calibration: per link class (within a socket, across sockets, across nodes) × rank count of
the grid, the time of an all-reduce per message size (run.rank.protocol.allreduce_timing), one rank per core."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.core.execution.calibration import GRADIENT_DTYPE, MESSAGE_BYTES, calibration_key, calibration_trials
from orchestrator.core.execution.eta import ALLREDUCE_S, STARTUP_S
from orchestrator.core.measured.records import Kind, Record
from orchestrator.core.planning.plan import PlannedTrial
from orchestrator.core.planning.trial import Trial
from orchestrator.run.driver.kinds.base import SweepContext, WorkItem
from orchestrator.run.job import AllreduceTask, RankJob

if TYPE_CHECKING:
    from orchestrator.run.driver.trial import TrialRun


class AllreduceItem(WorkItem):
    KIND = Kind.ALLREDUCE
    ORDER = 1

    def __init__(self, link: str, planned: PlannedTrial):
        super().__init__(calibration_key(link, planned.trial.ranks), planned)
        self.link = link   # the link class its ranks talk over (core.predict.comm)

    @classmethod
    def plan_items(cls, ctx: SweepContext) -> list[WorkItem]:
        if not ctx.spec.measure.allreduce:
            return []
        cons = ctx.spec.constraints
        counts = tuple(sorted({p.trial.ranks for p in ctx.plan.feasible}))
        return [cls(link, p) for link, p in calibration_trials(
            ctx.plan.topology, counts, hyperthreads=cons.hyperthreads, memory_headroom=cons.memory_headroom)]

    def label(self, ctx: SweepContext, p: PlannedTrial) -> str:
        return (f"{self.key} (all_reduce over {p.trial.ranks} ranks, {self.link}, "
                f"{MESSAGE_BYTES[0] // 1024} KiB to {MESSAGE_BYTES[-1] // 2**20} MiB{ctx.where(p)})")

    def job(self, ctx: SweepContext, p: PlannedTrial) -> RankJob:
        return ctx.job(AllreduceTask(message_bytes=list(MESSAGE_BYTES), precision=GRADIENT_DTYPE), p)

    def estimated_s(self, ctx: SweepContext, step_s: Callable[[Trial], float], startup_s: float) -> float:
        return STARTUP_S + ALLREDUCE_S

    def record(self, ctx: SweepContext, p: PlannedTrial, run: TrialRun, started_at: float) -> Record:
        from orchestrator.run.driver.recording import allreduce_record

        return allreduce_record(self.key, self.link, p, run, topology=ctx.plan.topology, backend=ctx.backend,
                                started_at=started_at)


ITEM = AllreduceItem


def describe(record: Record) -> str:
    """An ok record in one line, for the progress display: its largest message's time."""
    a = record.allreduce
    if a is None:
        return ""
    return f"{a.sizes_bytes[-1] / 2**20:g} MiB in {a.time_s[-1] * 1e3:,.1f} ms ({a.link}, {a.ranks} ranks)"
