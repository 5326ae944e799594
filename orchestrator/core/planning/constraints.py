"""Which grid points a machine can host, and why not, stated with the numbers.

Every rule that applies is reported, not just the first, so a user sees at once whether adding memory,
nodes or sockets would help:

>>> from orchestrator.core.machine.topology import topology_from_data
>>> box, _ = topology_from_data({"name": "box", "sockets": 2, "cores_per_socket": 4, "memory_gib": 16})
>>> [r.code for r in check(Trial(1, 8, 16), box, Rules(rank_memory_mib=1000))]
['spans_sockets']
>>> for reason in check(Trial(4, 4, 16), box, Rules(rank_memory_mib=5000)):
...     print(reason.message)
4 ranks × 4 cores = 16 > 8 physical cores (hyperthreads not counted) on 1 node(s)
4 ranks × 5,000 MiB exceed memory: the node(s) hold 2 rank(s) within 0.9 × their memory

Memory is each rank's private memory plus the libraries, which the ranks of a node share: a node holds them
once (`Rules.library_mib`), whatever its number of ranks.

>>> check(Trial(4, 1, 16), box, Rules(rank_memory_mib=3600)), check(Trial(3, 1, 16), box, Rules(rank_memory_mib=3600,
...                                                                  library_mib=400))
((), ())
>>> print(check(Trial(4, 1, 16), box, Rules(rank_memory_mib=3600, library_mib=400))[0].message)
4 ranks × 3,600 MiB + 400 MiB of libraries once per node exceed memory: the node(s) hold 3 rank(s) within 0.9 ×...
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.core.machine.placement import group_capacity, memory_slots
from orchestrator.core.machine.topology import Topology
from orchestrator.core.planning.trial import Trial

SPANS_SOCKETS = "spans_sockets"
CORES = "cores"
PACKING = "packing"
MEMORY = "memory"
BACKEND = "backend"
PRECISION = "precision"
DATASET = "dataset"


@dataclass(frozen=True, slots=True)
class Reason:
    code: str
    message: str        # with this grid point's own numbers
    summary: str = ""   # the same rule without the point's numbers, so a table needs one footnote per rule

    @property
    def note(self) -> str:
        return self.summary or self.message

    def to_dict(self) -> dict[str, str]:
        """As a record's `reasons` entry and `orch plan --json` write it."""
        return {"code": self.code, "message": self.message, "summary": self.note}


@dataclass(frozen=True, kw_only=True, slots=True)
class Rules:
    """The constraint settings one check needs (from the spec's constraints and backend)."""

    hyperthreads: bool = False
    ccl_workers: int = 0              # cores per rank reserved for oneCCL (0 unless backend is ccl)
    memory_headroom: float = 0.9
    rank_memory_mib: float = 0.0      # what one rank needs of its own (its private memory)
    library_mib: float = 0.0          # the libraries' pages, which a node holds once for all its ranks
    memory_budget_mib: float | None = None  # explicit per-rank limit, if any
    backend_error: str | None = None  # why the requested backend cannot be used, if it cannot
    precision_error: str | None = None  # why the requested precision is refused on this machine, if it is
    samples_per_epoch: int | None = None  # the training samples of one epoch, where known at plan time

    @property
    def reserved_rank_mib(self) -> float:
        """Memory set aside per rank when packing ranks into nodes: the estimate, or the explicit budget
        when that is larger (the watchdog lets a rank's private memory grow up to its budget)."""
        return max(self.rank_memory_mib, self.memory_budget_mib or 0.0)

    def libraries_text(self) -> str:
        """' + 400 MiB of libraries once per node', or nothing where none are counted."""
        return f" + {self.library_mib:,.0f} MiB of libraries once per node" if self.library_mib > 0 else ""


def _core_word(hyperthreads: bool) -> str:
    return "hardware threads" if hyperthreads else "physical cores (hyperthreads not counted)"


def check(trial: Trial, topology: Topology, rules: Rules) -> tuple[Reason, ...]:
    """All reasons `trial` cannot run on `topology`; empty when it can."""
    reasons: list[Reason] = []
    ht = rules.hyperthreads
    need = trial.threads_per_rank + rules.ccl_workers
    need_text = (f"{trial.threads_per_rank} threads + {rules.ccl_workers} oneCCL worker core(s) = {need} cores"
                 if rules.ccl_workers else f"{trial.threads_per_rank} threads")
    # Every count below goes over node groups (alike nodes once, times their number), never over each node.
    groups = topology.groups
    per_socket = topology.largest_socket(ht)
    total = topology.usable_cores(ht)
    n_nodes = len(topology.nodes)

    if need > per_socket:
        reasons.append(Reason(SPANS_SOCKETS, f"a rank would span sockets: {need_text} > {per_socket} "
                                             f"{_core_word(ht)} per socket"))
    if trial.ranks * need > total:
        reasons.append(Reason(CORES, f"{trial.ranks} ranks × {need} cores = {trial.ranks * need} > {total} "
                                     f"{_core_word(ht)} on {n_nodes} node(s)",
                              f"ranks × cores per rank > {total} {_core_word(ht)} on {n_nodes} node(s)"))
    if not reasons:
        slots = sum(g.count * sum(size // need for size in g.socket_sizes(ht)) for g in groups)
        if slots < trial.ranks:
            sizes = sorted({size for g in groups for size in g.socket_sizes(ht)})
            reasons.append(Reason(PACKING, (
                f"ranks cannot be packed inside sockets: a socket of {'/'.join(map(str, sizes))} cores holds "
                f"{'/'.join(str(sz // need) for sz in sizes)} rank(s) of {need} cores, {slots} in all, "
                f"fewer than {trial.ranks} ranks")))

    memory_reason = _memory_reason(trial, topology, rules, need, cores_ok=not reasons)
    if memory_reason:
        reasons.append(memory_reason)
    dataset_reason = _dataset_reason(trial, rules.samples_per_epoch)
    if dataset_reason:
        reasons.append(dataset_reason)
    if rules.backend_error:
        reasons.append(Reason(BACKEND, rules.backend_error))
    if rules.precision_error:
        reasons.append(Reason(PRECISION, rules.precision_error))
    return tuple(reasons)


def _memory_reason(trial: Trial, topology: Topology, rules: Rules, need: int, cores_ok: bool) -> Reason | None:
    mem = rules.rank_memory_mib
    budget = rules.memory_budget_mib
    if budget is not None and mem > budget:
        return Reason(MEMORY, f"a rank needs ~{mem:,.0f} MiB at local batch {trial.local_batch}, more than "
                              f"memory_budget_mib {budget:,.0f}")
    per_rank, libraries = rules.reserved_rank_mib, rules.library_mib
    if per_rank <= 0:
        return None
    head = rules.memory_headroom
    groups = topology.groups
    biggest = max(g.node.memory_mib for g in groups)
    if per_rank + libraries > biggest * head:
        return Reason(MEMORY, f"one rank needs {per_rank:,.0f} MiB{rules.libraries_text()} > {biggest:,.0f} MiB "
                              f"node memory × headroom {head:g} = {biggest * head:,.0f} MiB")
    mem_slots = sum(g.count * memory_slots(g.node, per_rank, head, libraries) for g in groups)
    if mem_slots < trial.ranks:
        return Reason(MEMORY, f"{trial.ranks} ranks × {per_rank:,.0f} MiB{rules.libraries_text()} exceed memory: "
                              f"the node(s) hold {mem_slots} rank(s) within {head:g} × their memory")
    if cores_ok:
        both = sum(g.count * group_capacity(g, need, rules.hyperthreads, per_rank, head, libraries) for g in groups)
        if both < trial.ranks:
            return Reason(MEMORY, f"cores and memory together hold only {both} rank(s) of {need} cores and "
                                  f"{per_rank:,.0f} MiB{rules.libraries_text()}, fewer than {trial.ranks}")
    return None


def _dataset_reason(trial: Trial, samples: int | None) -> Reason | None:
    """A point whose ranks would not get one full batch each from an epoch (the data are split evenly and the
    tail dropped, as torch's DistributedSampler does): it has no step to run.

    >>> _dataset_reason(Trial(4, 1, 64), 200).message
    '200 training samples ÷ 4 ranks = 50 per rank < local batch 64: not one batch per rank'
    """
    if samples is None or samples // trial.ranks >= trial.local_batch:
        return None
    return Reason(DATASET, f"{samples:,} training samples ÷ {trial.ranks} ranks = {samples // trial.ranks:,} per rank "
                           f"< local batch {trial.local_batch}: not one batch per rank",
                  f"the dataset ({samples:,} samples) holds less than one batch per rank")
