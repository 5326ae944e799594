"""Convergence runs: per planned global batch and seed, training to the spec's target metric on the cheapest
feasible layout with that global batch (run.rank.protocol.train_to_target). They pack onto free cores rather
than keep whole nodes (core.execution.schedule.admit_convergence)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.core.execution.eta import convergence_s
from orchestrator.core.execution.schedule import Admission, Region, admit_convergence
from orchestrator.core.measured.records import Kind, Record, convergence_key
from orchestrator.core.planning.plan import ConvergenceRun, PlannedTrial
from orchestrator.core.planning.trial import Trial
from orchestrator.run.driver.kinds.base import SweepContext, WorkItem
from orchestrator.run.job import ConvergenceSettings, ConvergenceTask, RankJob

if TYPE_CHECKING:
    from orchestrator.core.planning.spec import ConvergenceSpec
    from orchestrator.run.driver.trial import TrialRun


class ConvergenceItem(WorkItem):
    KIND = Kind.CONVERGENCE
    ORDER = 3
    trains = True
    holds_while_waiting = False   # it packs onto whatever is free: it waits without holding a region

    def __init__(self, run: ConvergenceRun):
        super().__init__(convergence_key(run.global_batch, run.seed), run.layout)
        self.global_batch, self.seed = run.global_batch, run.seed

    @classmethod
    def plan_items(cls, ctx: SweepContext) -> list[WorkItem]:
        return [cls(run) for run in ctx.plan.convergence] if ctx.convergence else []

    def label(self, ctx: SweepContext, p: PlannedTrial) -> str:
        t = p.trial
        return (f"{self.key} (global batch {self.global_batch}, seed {self.seed}, on {t.ranks}×{t.threads_per_rank}"
                f"{ctx.where(p)})")

    def job(self, ctx: SweepContext, p: PlannedTrial) -> RankJob:
        return ctx.job(ConvergenceTask(settings=ConvergenceSettings.of(_section(ctx), self.global_batch, self.seed)), p,
                       seed=self.seed)

    def timeout_s(self, ctx: SweepContext) -> float:
        return float(_section(ctx).timeout_s)

    def estimated_s(self, ctx: SweepContext, step_s: Callable[[Trial], float], startup_s: float) -> float:
        t, conv = self.planned.trial, ctx.spec.convergence
        return convergence_s(step_s(t), ctx.sweep.facts.samples.value or 0, t.global_batch,
                             conv.max_epochs if conv else 0.0, startup_s)

    def admit(self, ctx: SweepContext, taken: Region) -> Admission | None:
        p, cons = self.planned, ctx.spec.constraints
        return admit_convergence(ctx.plan.topology, self.placement(), p.memory_budget_mib, p.trial.ranks,
                                 p.trial.threads_per_rank, taken, hyperthreads=cons.hyperthreads,
                                 ccl_workers=ctx.workers, rank_memory_mib=p.rank_memory_mib,
                                 memory_headroom=cons.memory_headroom, library_mib=p.library_mib)

    def record(self, ctx: SweepContext, p: PlannedTrial, run: TrialRun, started_at: float) -> Record:
        from orchestrator.run.driver.recording import convergence_record

        return convergence_record(self.key, p, self.seed, run, topology=ctx.plan.topology, backend=ctx.backend,
                                  spec_convergence=_section(ctx), started_at=started_at)


ITEM = ConvergenceItem


def describe(record: Record) -> str:
    """An ok record in one line, for the progress display: 'accuracy ≥ 0.9 at 2.25 epochs'."""
    c = record.convergence
    if c is None:
        return ""
    if c.converged:
        return f"{c.metric} ≥ {c.target:g} at {c.epochs_to_target:.2f} epochs"
    return f"did not reach {c.metric} {c.target:g} in {c.epochs_run:.2f} epochs"


def _section(ctx: SweepContext) -> ConvergenceSpec:
    """The spec's convergence section (a convergence run is planned only with one)."""
    if ctx.spec.convergence is None:
        raise ValueError("a convergence run was planned but the spec has no convergence section")
    return ctx.spec.convergence
