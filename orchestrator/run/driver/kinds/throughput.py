"""Throughput trials: one per feasible point of the grid (ranks × threads per rank × local batch), timed
repeats of training steps (run.rank.protocol.measure_throughput)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.core.execution.eta import throughput_s
from orchestrator.core.measured.records import Kind, Record
from orchestrator.core.planning.plan import PlannedTrial
from orchestrator.core.planning.trial import Trial
from orchestrator.run.driver.kinds.base import SweepContext, WorkItem
from orchestrator.run.job import RankJob, Steps, ThroughputTask

if TYPE_CHECKING:
    from orchestrator.run.driver.trial import TrialRun


class ThroughputItem(WorkItem):
    KIND = Kind.THROUGHPUT
    ORDER = 2
    trains = True

    @classmethod
    def plan_items(cls, ctx: SweepContext) -> list[WorkItem]:
        return [cls(p.trial.key, p) for p in ctx.plan.feasible]

    def label(self, ctx: SweepContext, p: PlannedTrial) -> str:
        t = p.trial
        return f"{self.key} ({t.ranks} rank(s) × {t.threads_per_rank} thread(s), local batch {t.local_batch}" \
               f"{ctx.where(p)})"

    def job(self, ctx: SweepContext, p: PlannedTrial) -> RankJob:
        return ctx.job(ThroughputTask(steps=Steps.of(ctx.spec.measure)), p)

    def estimated_s(self, ctx: SweepContext, step_s: Callable[[Trial], float], startup_s: float) -> float:
        m = ctx.spec.measure
        return throughput_s(step_s(self.planned.trial), m.warmup_steps, m.timed_steps, m.repeats, startup_s,
                            ranks=self.planned.trial.ranks)

    def record(self, ctx: SweepContext, p: PlannedTrial, run: TrialRun, started_at: float) -> Record:
        from orchestrator.run.driver.recording import throughput_record

        return throughput_record(p, run, topology=ctx.plan.topology, backend=ctx.backend, measure=ctx.spec.measure,
                                 started_at=started_at)


ITEM = ThroughputItem


def describe(record: Record) -> str:
    """An ok record in one line, for the progress display: '312.4 samples/s (cv 1.2%)'."""
    t = record.throughput
    return f"{t.samples_per_s:,.1f} samples/s (cv {t.cv or 0.0:.1%})" if t is not None else ""
