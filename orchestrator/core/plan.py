"""The plan: every grid point with its verdict, placement and memory budget, plus the convergence runs.

`orch plan` prints it; `orch sweep` executes exactly it. Pure: the caller passes in what only the edges
know (the workload's memory estimate, whether oneCCL's bindings are installed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.core.constraints import Reason, Rules, check
from orchestrator.core.grid import Trial, expand
from orchestrator.core.placement import Placement, place
from orchestrator.core.spec import ConstraintsSpec, SweepSpec
from orchestrator.core.topology import Topology

CCL_MODULE = "oneccl_bindings_for_pytorch"


@dataclass(frozen=True, slots=True)
class PlannedTrial:
    trial: Trial
    reasons: tuple[Reason, ...]
    placement: Placement | None
    rank_memory_mib: float                  # what one rank is expected to need
    memory_budget_mib: tuple[float, ...]    # per rank: the watchdog's limit (empty when infeasible)

    @property
    def feasible(self) -> bool:
        return not self.reasons


@dataclass(frozen=True, slots=True)
class ConvergenceRun:
    """One seed of one global batch, run on the cheapest feasible layout with that global batch."""

    global_batch: int
    seed: int
    layout: PlannedTrial

    @property
    def key(self) -> str:
        return f"g{self.global_batch}-s{self.seed}"


@dataclass(frozen=True, slots=True)
class Backend:
    requested: str
    chosen: str          # ccl or gloo
    note: str            # why, for the user
    error: str | None    # set when the requested backend cannot be used


@dataclass(frozen=True, slots=True)
class Plan:
    spec: SweepSpec
    topology: Topology
    backend: Backend
    ranks: tuple[int, ...]
    threads: tuple[int, ...]
    local_batches: tuple[int, ...]
    trials: tuple[PlannedTrial, ...]
    convergence: tuple[ConvergenceRun, ...]

    @property
    def feasible(self) -> tuple[PlannedTrial, ...]:
        return tuple(t for t in self.trials if t.feasible)

    def cell(self, ranks: int, threads: int, local_batch: int) -> PlannedTrial:
        return next(t for t in self.trials if t.trial == Trial(ranks, threads, local_batch))

    @property
    def ccl_workers(self) -> int:
        return ccl_workers(self.backend, self.spec.constraints)


def ccl_workers(backend: Backend, constraints: ConstraintsSpec) -> int:
    """Cores per rank reserved for oneCCL's progress threads: none unless the ranks really use ccl."""
    return constraints.ccl_workers if backend.chosen == "ccl" else 0


def choose_backend(requested: str, ccl_available: bool) -> Backend:
    if requested == "gloo":
        return Backend("gloo", "gloo", "gloo (requested)", None)
    if ccl_available:
        return Backend(requested, "ccl", f"ccl ({CCL_MODULE} is installed)", None)
    if requested == "ccl":
        return Backend("ccl", "ccl", "ccl requested but unavailable",
                       f"backend ccl requested but {CCL_MODULE} is not installed; install oneCCL's "
                       f"bindings or set backend: auto (falls back to gloo)")
    return Backend("auto", "gloo", f"gloo ({CCL_MODULE} is not installed, so auto fell back to gloo)", None)


def cheapest(candidates: list[PlannedTrial]) -> PlannedTrial:
    """The cheapest layout in `Trial.cost` order: fewest cores, then fewest ranks, then fewest threads."""
    return min(candidates, key=lambda p: p.trial.cost)


def make_plan(spec: SweepSpec, topology: Topology, *, rank_memory_mib: Callable[[int], float],
              ccl_available: bool) -> Plan:
    """Decide every grid point. `rank_memory_mib(local_batch)` is the workload's estimate."""
    cons = spec.constraints
    backend = choose_backend(spec.backend, ccl_available)
    ranks, threads, grid = expand(spec.grid, topology, cons.hyperthreads)
    workers = ccl_workers(backend, cons)
    planned = []
    for trial in grid:
        need_mib = cons.rank_memory_mib if cons.rank_memory_mib is not None else rank_memory_mib(trial.local_batch)
        rules = Rules(hyperthreads=cons.hyperthreads, ccl_workers=workers, memory_headroom=cons.memory_headroom,
                      rank_memory_mib=need_mib, memory_budget_mib=cons.memory_budget_mib,
                      backend_error=backend.error)
        reasons = check(trial, topology, rules)
        placement: Placement | None = None
        budgets: tuple[float, ...] = ()
        if not reasons:
            placement = place(topology, trial.ranks, trial.threads_per_rank, hyperthreads=cons.hyperthreads,
                              ccl_workers=workers, rank_memory_mib=rules.reserved_rank_mib,
                              memory_headroom=cons.memory_headroom)
            assert placement is not None, f"check() passed but place() failed for {trial}"
            budgets = tuple(
                cons.memory_budget_mib if cons.memory_budget_mib is not None else
                topology.nodes[r.node].memory_mib * cons.memory_headroom / placement.ranks_on_node(r.node)
                for r in placement.ranks)
        planned.append(PlannedTrial(trial, reasons, placement, need_mib, budgets))

    runs: list[ConvergenceRun] = []
    if spec.convergence is not None:
        feasible = [p for p in planned if p.feasible]
        for global_batch in sorted({p.trial.global_batch for p in feasible}):
            layout = cheapest([p for p in feasible if p.trial.global_batch == global_batch])
            runs += [ConvergenceRun(global_batch, seed, layout) for seed in spec.convergence.seeds]
    return Plan(spec, topology, backend, ranks, threads, tuple(sorted(spec.grid.local_batch)), tuple(planned),
                tuple(runs))
