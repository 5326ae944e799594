"""What every trial kind gives the sweep runner (`WorkItem`), and what the items need of the sweep (`SweepContext`).

A kind module (see orchestrator.run.driver.kinds) holds the driver's half of its kind: its work item (which trials it
plans, the job its ranks run, where it may run, its record). The rank's half is in run.rank. Ray and the
recording (which reaches Ray through run.driver.trial) are imported where they are used, so that planning a sweep's
items and its estimate (core.execution.eta) starts no Ray.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from orchestrator.core.execution.schedule import Admission, Region, admit_timing
from orchestrator.core.json.schema import to_plain
from orchestrator.core.machine.placement import Placement
from orchestrator.core.measured.records import Kind, Record
from orchestrator.core.planning.plan import Plan, PlannedTrial
from orchestrator.core.planning.trial import Trial
from orchestrator.run.job import RankJob, Task, init_timeout_s

if TYPE_CHECKING:
    from orchestrator.core.planning.spec import SweepSpec
    from orchestrator.io.sweepfile import Sweep
    from orchestrator.run.driver.trial import TrialRun


@dataclass(frozen=True, slots=True)
class SweepContext:
    """The sweep as its work items see it: the spec (with the plan's precision chosen), the plan, the backend
    and oneCCL workers the plan chose, and how many Ray nodes run it."""

    sweep: Sweep
    plan: Plan
    nodes: int                 # Ray nodes in the cluster
    convergence: bool = True   # convergence runs were asked for (orch sweep --no-convergence: not)

    @property
    def spec(self) -> SweepSpec:
        return self.sweep.spec

    @property
    def backend(self) -> str:
        return self.plan.backend.chosen

    @property
    def workers(self) -> int:
        return self.plan.ccl_workers

    @property
    def precision(self) -> str:
        """What the ranks train in: the plan's choice (fp32 for a workload without a precision parameter)."""
        return self.plan.precision.chosen if self.plan.precision is not None else "fp32"

    def job(self, task: Task, p: PlannedTrial, *, seed: int = 0) -> RankJob:
        """The job of a trial doing `task` on `p`, with the sweep's workload and its time limits."""
        m = self.spec.measure
        job = RankJob(task=task, workload=self.spec.workload.name, params=to_plain(self.sweep.params),
                      backend=self.backend, local_batch=p.trial.local_batch, threads=p.trial.threads_per_rank,
                      seed=seed, init_timeout_s=init_timeout_s(m.step_timeout_s, m.startup_timeout_s))
        if self.spec.workload.script is not None and task.kind in (Kind.THROUGHPUT, Kind.CONVERGENCE):
            from orchestrator.run.driver.script_job import script_settings

            job = replace(job, script=script_settings(self.sweep, p.trial, seed=seed, kind=Kind(task.kind)))
        return job

    def where(self, p: PlannedTrial) -> str:
        """' on node(s) 0, 1' for a label, on a cluster of more than one node."""
        if p.placement is None or self.nodes <= 1:
            return ""
        return f" on node(s) {', '.join(str(n) for n, _ in p.placement.per_node)}"


class WorkItem(ABC):
    """One trial the sweep runs: its key (in the results), the planned trial it runs on, and how to run,
    place, label and record it. One subclass per kind, in that kind's module."""

    KIND: ClassVar[Kind]
    ORDER: ClassVar[int]       # kinds are admitted in this order (the peaks first: later kinds use them)
    trains: ClassVar[bool] = False   # its cost is training steps: its estimate needs the workload's FLOPs

    def __init__(self, key: str, planned: PlannedTrial):
        self.key, self.planned = key, planned

    @classmethod
    @abstractmethod
    def plan_items(cls, ctx: SweepContext) -> list[WorkItem]:
        """Every trial of this kind the sweep runs, in order."""

    @abstractmethod
    def label(self, ctx: SweepContext, p: PlannedTrial) -> str:
        """What the progress display says of the trial, running on `p` (its admitted placement)."""

    @abstractmethod
    def job(self, ctx: SweepContext, p: PlannedTrial) -> RankJob:
        """What each of its ranks is asked to do."""

    @abstractmethod
    def estimated_s(self, ctx: SweepContext, step_s: Callable[[Trial], float], startup_s: float) -> float:
        """What it should take, for the sweep's time estimate (core.execution.eta); `step_s(trial)` is a training step's
        estimated seconds, to be called only by kinds that `trains`, and `startup_s` a training rank's start-up
        (its model built: the probe's where it timed one); other kinds start in `eta.STARTUP_S`."""

    @abstractmethod
    def record(self, ctx: SweepContext, p: PlannedTrial, run: TrialRun, started_at: float) -> Record:
        """Its record, from the run (run.driver.recording)."""

    def timeout_s(self, ctx: SweepContext) -> float:
        """Its wall-clock limit."""
        return float(ctx.spec.measure.timeout_s)

    def admit(self, ctx: SweepContext, taken: Region) -> Admission | None:
        """Where it can run now, given the regions held by running (and earlier waiting) trials: a timing
        trial keeps its nodes (or sockets) to itself (core.execution.schedule)."""
        return admit_timing(ctx.plan.topology, self.placement(), self.planned.memory_budget_mib,
                            ctx.spec.measure.isolation, taken)

    # A waiting timing trial keeps its planned region from later trials, so that small ones cannot starve it.
    holds_while_waiting: ClassVar[bool] = True

    def placement(self) -> Placement:
        """The planned placement (only feasible trials become work items: they all have one)."""
        if self.planned.placement is None:
            raise ValueError(f"{self.key} is infeasible: it has no placement to run on")
        return self.planned.placement

    def admitted(self, admission: Admission) -> PlannedTrial:
        """The planned trial as it will really run: on the admitted placement, with the admitted budgets."""
        return replace(self.planned, placement=admission.placement, memory_budget_mib=admission.memory_budget_mib)
