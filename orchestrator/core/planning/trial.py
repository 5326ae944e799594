"""One grid point of a sweep: ranks × threads per rank × local batch (the unit every table, record and plan
speaks of)."""

from __future__ import annotations

from typing import NamedTuple


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
