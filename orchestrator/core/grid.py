"""Grid expansion: the ranks × threads-per-rank × local-batch points of a sweep."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from orchestrator.core.topology import Topology

if TYPE_CHECKING:   # only a type here: spec imports profile.layout, which imports this module's Trial
    from orchestrator.core.spec import GridSpec


class Trial(NamedTuple):
    """One grid point: `ranks` processes of `threads_per_rank` compute threads, `local_batch` each.

    A named tuple, so a record's (ranks, threads_per_rank, local_batch) compares and hashes equal to the
    trial it came from, and trials sort by ranks, then threads, then local batch.

    >>> t = Trial(2, 14, 4)
    >>> t.cores, t.global_batch, t.key, t == (2, 14, 4)
    (28, 8, 'r2-t14-b4', True)
    """

    ranks: int
    threads_per_rank: int
    local_batch: int

    @property
    def global_batch(self) -> int:
        return self.ranks * self.local_batch

    @property
    def cores(self) -> int:
        return self.ranks * self.threads_per_rank

    @property
    def key(self) -> str:
        """Stable identifier used in the results file, e.g. 'r2-t14-b4'."""
        return f"r{self.ranks}-t{self.threads_per_rank}-b{self.local_batch}"

    def layout(self) -> dict[str, int]:
        """The point's fields as records and `orch plan --json` write them."""
        return {"ranks": self.ranks, "threads_per_rank": self.threads_per_rank, "local_batch": self.local_batch,
                "global_batch": self.global_batch}

    @property
    def cost(self) -> tuple[int, int, int]:
        """The order in which layouts count as cheaper: fewest cores, then fewest ranks (least
        communication), then fewest threads. The planner's convergence layout and the tables' fallback
        baseline both pick the minimum of this."""
        return (self.cores, self.ranks, self.threads_per_rank)


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
