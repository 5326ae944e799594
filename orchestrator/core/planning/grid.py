"""Grid expansion: the ranks × threads-per-rank × local-batch points of a sweep."""

from __future__ import annotations

from orchestrator.core.machine.topology import Topology
from orchestrator.core.planning.spec import GridSpec
from orchestrator.core.planning.trial import Trial


def powers_of_two_up_to(limit: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to `limit`, plus `limit` itself when it is not a power of two.

    >>> powers_of_two_up_to(28)
    (1, 2, 4, 8, 16, 28)
    """
    values, v = [], 1
    while v <= limit:
        values.append(v)
        v *= 2
    if limit >= 1 and values[-1] != limit:
        values.append(limit)
    return tuple(values)


def auto_threads(topology: Topology, hyperthreads: bool) -> tuple[int, ...]:
    return powers_of_two_up_to(topology.largest_socket(hyperthreads))


def auto_ranks(topology: Topology, hyperthreads: bool) -> tuple[int, ...]:
    return powers_of_two_up_to(topology.usable_cores(hyperthreads))


def expand(grid: GridSpec, topology: Topology, hyperthreads: bool) -> tuple[tuple[int, ...], tuple[int, ...],
                                                                            tuple[Trial, ...]]:
    """Resolve `auto` axes against the topology; return (ranks, threads, trials) in table order."""
    ranks = auto_ranks(topology, hyperthreads) if grid.ranks == "auto" else tuple(sorted(grid.ranks))
    threads = (auto_threads(topology, hyperthreads) if grid.threads_per_rank == "auto"
               else tuple(sorted(grid.threads_per_rank)))
    trials = tuple(Trial(r, t, b) for b in sorted(grid.local_batch) for t in threads for r in ranks)
    return ranks, threads, trials
