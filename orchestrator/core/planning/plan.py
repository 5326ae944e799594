"""The plan: every grid point with its verdict, placement and memory budget, plus the convergence runs.

`orch plan` prints it; `orch sweep` executes exactly it. Pure: the caller passes in what only the edges
know (the workload's memory estimate, whether oneCCL's bindings are installed):

>>> from orchestrator.core.planning.spec import parse_spec
>>> from orchestrator.core.machine.topology import topology_from_data
>>> box, _ = topology_from_data({"name": "box", "sockets": 2, "cores_per_socket": 4, "memory_gib": 16})
>>> spec, _ = parse_spec({"name": "s", "workload": {"name": "classifier"},
...                       "grid": {"ranks": [1, 2], "threads_per_rank": [4, 8], "local_batch": [16]}})
>>> plan = make_plan(spec, box, rank_memory_mib=lambda batch: 1000.0, ccl_available=False)
>>> [(p.trial.key, p.feasible) for p in plan.trials]
[('r1-t4-b16', True), ('r2-t4-b16', True), ('r1-t8-b16', False), ('r2-t8-b16', False)]
>>> plan.backend.chosen, [r.cpus for r in plan.trials[1].placement.ranks]
('gloo', [(0, 1, 2, 3), (4, 5, 6, 7)])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator.core.machine.isa import PrecisionChoice
from orchestrator.core.machine.placement import Placement, place, rank_share_mib
from orchestrator.core.machine.topology import Topology
from orchestrator.core.planning.constraints import Reason, Rules, check
from orchestrator.core.planning.facts import WorkloadFacts
from orchestrator.core.planning.grid import expand
from orchestrator.core.planning.spec import ConstraintsSpec, SweepSpec
from orchestrator.core.planning.trial import Trial
from orchestrator.errors import InputError

CCL_MODULE = "oneccl_bindings_for_pytorch"
# Limits on the size of a plan, so that an absurd grid is refused at once rather than planned for minutes:
# planning costs about 0.1 ms per grid point and 0.3 µs per rank placed (each rank's memory budget; CPU lists
# are only listed on demand).
MAX_GRID_POINTS = 50_000
MAX_PLACED_RANKS = 20_000_000


class PlanTooLarge(InputError):
    """The grid is beyond what orch plans at once; the message gives the numbers and the limit."""


@dataclass(frozen=True, slots=True)
class PlannedTrial:
    trial: Trial
    reasons: tuple[Reason, ...]
    placement: Placement | None
    rank_memory_mib: float                  # what one rank is expected to need of its own (private memory)
    memory_budget_mib: tuple[float, ...]    # per rank: the watchdog's limit on it (empty when infeasible)
    library_mib: float = 0.0                # the libraries, which each node holds once beside its ranks

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
    precision: PrecisionChoice | None = None   # what the ranks train in, and why (None: the workload has no choice)
    memory_known: bool = True   # False: no memory figure for the workload yet, so no point was checked against it
    facts: WorkloadFacts | None = None   # the workload's figures the plan was made with, and their sources
    by_trial: dict[Trial, PlannedTrial] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_trial", {p.trial: p for p in self.trials})  # cell() is called per cell

    @property
    def feasible(self) -> tuple[PlannedTrial, ...]:
        return tuple(t for t in self.trials if t.feasible)

    def cell(self, ranks: int, threads: int, local_batch: int) -> PlannedTrial:
        return self.by_trial[Trial(ranks, threads, local_batch)]

    @property
    def ccl_workers(self) -> int:
        return ccl_workers(self.backend, self.spec.constraints)

    @property
    def errors(self) -> tuple[str, ...]:
        """Why a sweep of this plan would be refused: a backend or a precision that cannot run here."""
        return tuple(e for e in (self.backend.error, self.precision.error if self.precision else None) if e)


def ccl_workers(backend: Backend, constraints: ConstraintsSpec) -> int:
    """Cores per rank reserved for oneCCL's progress threads: none unless the ranks really use ccl."""
    return constraints.ccl_workers if backend.chosen == "ccl" else 0


def choose_backend(requested: str, ccl_available: bool, *, script: bool = False) -> Backend:
    """The torch.distributed backend the ranks use. A script chooses its own in its init_process_group (with no
    backend, torch picks gloo on CPU), so for a script `auto` means gloo, and ccl is run only when asked for.

    >>> choose_backend("auto", True, script=True).note
    'gloo (a script chooses its own backend: auto means gloo; set backend: ccl for a script that joins with ccl)'
    """
    if requested == "gloo":
        return Backend("gloo", "gloo", "gloo (requested)", None)
    if script and requested == "auto":
        return Backend("auto", "gloo", "gloo (a script chooses its own backend: auto means gloo; set backend: ccl "
                                       "for a script that joins with ccl)", None)
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


def make_plan(spec: SweepSpec, topology: Topology, *, rank_memory_mib: Callable[[int], float | None],
              ccl_available: bool, precision: PrecisionChoice | None = None, samples_per_epoch: int | None = None,
              facts: WorkloadFacts | None = None, library_mib: float = 0.0) -> Plan:
    """Decide every grid point. `rank_memory_mib(local_batch)` is the workload's estimate of one rank's private
    memory (in the precision chosen), None where nothing is known of it yet (the memory rule then passes every
    point, and the plan says so: `Plan.memory_known`); `library_mib`, the libraries a node holds once beside its
    ranks (their pages are shared: `orchestrator.core.planning.probe`); `precision`, the sweep's precision for this
    topology: a refused one makes every point infeasible; `samples_per_epoch`, where known, makes a point whose
    ranks get less than one batch each infeasible; `facts`, the figures' sources, are kept for the views.

    Raises PlanTooLarge (a ValueError) for a grid beyond MAX_GRID_POINTS or MAX_PLACED_RANKS."""
    cons = spec.constraints
    backend = choose_backend(spec.backend, ccl_available, script=spec.workload.script is not None)
    ranks, threads, grid = expand(spec.grid, topology, cons.hyperthreads)
    if len(grid) > MAX_GRID_POINTS:
        raise PlanTooLarge(f"the grid has {len(ranks)} ranks × {len(threads)} threads × "
                           f"{len(spec.grid.local_batch)} local batch values = {len(grid):,} points, more than orch "
                           f"plans at once ({MAX_GRID_POINTS:,}); split it into several sweeps")
    workers = ccl_workers(backend, cons)
    checked = []
    memory_known = True
    for trial in grid:
        estimate = cons.rank_memory_mib if cons.rank_memory_mib is not None else rank_memory_mib(trial.local_batch)
        memory_known = memory_known and estimate is not None
        need_mib = estimate if estimate is not None else 0.0
        rules = Rules(hyperthreads=cons.hyperthreads, ccl_workers=workers, memory_headroom=cons.memory_headroom,
                      rank_memory_mib=need_mib, library_mib=library_mib, memory_budget_mib=cons.memory_budget_mib,
                      backend_error=backend.error, precision_error=precision.error if precision else None,
                      samples_per_epoch=samples_per_epoch)
        checked.append((trial, check(trial, topology, rules), need_mib, rules.reserved_rank_mib))
    placed_ranks = sum(trial.ranks for trial, reasons, _, _ in checked if not reasons)
    if placed_ranks > MAX_PLACED_RANKS:
        raise PlanTooLarge(f"the grid's feasible points place {placed_ranks:,} ranks in all, more than orch plans "
                           f"at once ({MAX_PLACED_RANKS:,}); use fewer or smaller ranks values")
    planned = tuple(_placed(trial, reasons, (need_mib, reserved_mib, library_mib), topology, cons, workers)
                    for trial, reasons, need_mib, reserved_mib in checked)
    return Plan(spec, topology, backend, ranks, threads, tuple(sorted(spec.grid.local_batch)), planned,
                _convergence_runs(spec, planned), precision, memory_known, facts)


def _placed(trial: Trial, reasons: tuple[Reason, ...], memory_mib: tuple[float, float, float], topology: Topology,
            cons: ConstraintsSpec, workers: int) -> PlannedTrial:
    """The trial placed, with each rank's budget; `memory_mib`: (needed, reserved) per rank, libraries per node."""
    need_mib, reserved_mib, library_mib = memory_mib
    if reasons:
        return PlannedTrial(trial, reasons, None, need_mib, (), library_mib)
    placement = place(topology, trial.ranks, trial.threads_per_rank, hyperthreads=cons.hyperthreads,
                      ccl_workers=workers, rank_memory_mib=reserved_mib,
                      memory_headroom=cons.memory_headroom, library_mib=library_mib)
    if placement is None:
        raise ValueError(f"check() passed but place() failed for {trial}")  # a bug, not bad input
    if cons.memory_budget_mib is not None:
        budgets = (cons.memory_budget_mib,) * trial.ranks
    else:  # each rank's private share of the node's memory × headroom, less the libraries the node holds once
        budgets = tuple(share for node, layout in placement.per_node
                        for share in (rank_share_mib(topology.nodes[node].memory_mib, cons.memory_headroom,
                                                     library_mib, len(layout)),) * len(layout))
    return PlannedTrial(trial, reasons, placement, need_mib, budgets, library_mib)



def _convergence_runs(spec: SweepSpec, planned: tuple[PlannedTrial, ...]) -> tuple[ConvergenceRun, ...]:
    """One run per seed for each global batch, on its cheapest feasible layout."""
    if spec.convergence is None:
        return ()
    by_batch: dict[int, list[PlannedTrial]] = {}
    for p in planned:
        if p.feasible:
            by_batch.setdefault(p.trial.global_batch, []).append(p)
    return tuple(ConvergenceRun(global_batch, seed, cheapest(by_batch[global_batch]))
                 for global_batch in sorted(by_batch) for seed in spec.convergence.seeds)
