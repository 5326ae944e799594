"""The rank process's side of run/: what runs inside each rank (one process per rank, started by the driver's
launcher, run.driver.launcher). It reads its job and writes its progress and result in the wire format (run.job,
run.reports) and imports nothing of the driver's side (the work items, the launcher, Ray): the launcher names
these modules only on the rank's command line.

- `main`: orch's rank entry (`python -m orchestrator.run.rank.main JOB_FILE`); `script`: a script's rank;
- `process`: what every rank process does for itself (its start-up clock, the watch on its launcher);
- `session`: the rendezvous and the training session the kinds that train share; `protocol`: the timed loops;
- one module per job kind, each with its `run_rank(job, progress, clock) -> RankOutput`, found by the table
  below (imported on use: a rank imports only its own kind's, and its start-up is timed).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.core.measured.records import Kind
from orchestrator.run.job import PROBE, PROFILE, JobKind

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob, RankOutput
    from orchestrator.run.rank.process import StartupClock

    RankEntry = Callable[[RankJob, ProgressWriter, StartupClock], RankOutput]

# The rank's kind table: a job's kind → the module whose `run_rank` does its work. A new kind is a line here, its
# module beside this one, and its driver half in run.driver.kinds.
ENTRIES: dict[JobKind, str] = {
    Kind.PEAK: "peak",
    Kind.ALLREDUCE: "allreduce",
    Kind.THROUGHPUT: "throughput",
    Kind.CONVERGENCE: "convergence",
    PROFILE: "profile",
    PROBE: "probe",
}


def rank_entry(kind: JobKind) -> RankEntry:
    """The `run_rank` of the job kind `kind`."""
    entry: RankEntry = importlib.import_module(f"{__name__}.{ENTRIES[kind]}").run_rank
    return entry
