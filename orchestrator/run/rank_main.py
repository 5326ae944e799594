"""Entry point of one rank process: `python -m orchestrator.run.rank_main JOB_FILE`.

The launcher starts it with its CPU list already applied (numactl or taskset) and with OMP_NUM_THREADS,
the OpenMP affinity variables and RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT in its environment,
so every thread the process creates is born inside its cores. It writes progress to the progress file and
its result to the result file; a non-zero exit status (with the traceback in its log) means failure.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.constants import LAUNCHER_PID_ENV_VAR
from orchestrator.core.rank_end import EXIT_ORPHANED
from orchestrator.io.files import write_atomic

ERROR_CHARS = 600   # of an exception's message kept for the record's reason (the log has all of it)


def _exit_when_orphaned(poll_s: float = 0.5) -> None:
    """If the launcher that started us dies (actor killed, driver killed, node lost), stop at once
    rather than hold our cores and sockets. PR_SET_PDEATHSIG would fire when the launcher's *thread*
    exits, which in a threaded Ray actor is not the same thing, so we watch our parent instead. The
    launcher passes its pid: a launcher that died before we got here must not look like our parent."""
    parent = int(os.environ.get(LAUNCHER_PID_ENV_VAR, os.getppid()))

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def observed_affinity() -> dict[str, list[int]]:
    """CPU masks read from the OS, so a record shows where the work could really run, not what we asked
    for: the union over all threads (OpenMP workers included) and the main thread's own mask (OpenMP
    binds the main thread to the first of the rank's cores, so it alone is narrower)."""
    from orchestrator.run.comm import thread_cpu_masks

    return {"threads": sorted(set().union(*thread_cpu_masks())), "main_thread": sorted(os.sched_getaffinity(0))}


def process_started_at(stat: str | None = None) -> float | None:
    """time.time() when this process was created (the launcher's fork: numactl execs the interpreter in the
    same process), from the start time in /proc/self/stat (clock ticks since boot, 10 ms); None without /proc."""
    try:
        text = stat if stat is not None else Path("/proc/self/stat").read_text()
        start_ticks = int(text.rsplit(")", 1)[1].split()[19])   # field 22; the name (field 2) may hold spaces
        age_s = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time() - age_s


class StartupClock:
    """Where a rank's start-up goes: `lap(phase)` ends a phase now, `ready()` ends the last one. The first
    phase starts at the process's creation, so the laps add up to ready_at - started_at. A few clock reads
    in all: cheap enough to keep on in every run. `on_lap(phase)`, once set, hears of each lap: the rank's
    progress file says which stage of start-up it has reached, for the display and a start-up timeout's
    reason."""

    def __init__(self, started_at: float | None):
        self.started_at = started_at
        self.ready_at: float | None = None
        self.laps_s: dict[str, float] = {}
        self._last = started_at
        self.on_lap: Callable[[str], None] | None = None

    def lap(self, phase: str) -> None:
        now = time.time()
        if self._last is not None:   # without a process start time the first phase is unknown: left out
            self.laps_s[phase] = round(self.laps_s.get(phase, 0.0) + now - self._last, 4)
        self._last = now
        if self.on_lap is not None:
            self.on_lap(phase)

    def ready(self, phase: str) -> None:
        """End `phase`: from now on the rank is stepping (or timing), which is no longer start-up."""
        self.lap(phase)
        self.ready_at = self._last


def main(argv: list[str]) -> int:
    clock = StartupClock(process_started_at())
    clock.lap("interpreter")   # numactl, the interpreter's own start, this module's imports
    _exit_when_orphaned()
    # The launcher sends SIGUSR1 before killing a rank that stopped making progress: every thread's stack
    # goes to the log, so a hang's record says where it hung.
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    from orchestrator.run.job import Phase, ProgressWriter, RankJob, RankResult

    job = RankJob.from_json(Path(argv[1]).read_text())
    progress = ProgressWriter(job.progress_path)
    progress.update(phase=Phase.BUILDING, stage="interpreter", force=True)
    clock.on_lap = lambda stage: progress.update(stage=stage, force=True)

    import torch

    torch.set_num_threads(job.threads)
    try:
        torch.set_num_interop_threads(1)  # inter-op parallelism would add threads beyond one per core
    except RuntimeError:
        pass
    clock.lap("import_torch")
    started = time.perf_counter()
    # The job's kind names its module (orchestrator.run.kinds), whose run_rank does the work: the result's sections.
    from orchestrator.run.kinds import kind_module

    try:
        sections: dict[str, Any] = kind_module(job.kind).run_rank(job, progress, clock)
    except Exception as err:
        # The traceback goes to the log; its one line goes to the progress file, so the trial's reason names the
        # cause (a user's factory that raised, a forward with no scalar loss) and not only the exit status.
        progress.update(error=f"{type(err).__name__}: {err}"[:ERROR_CHARS], force=True)
        raise
    result = RankResult(rank=int(os.environ.get("RANK", 0)), pid=os.getpid(), threads=torch.get_num_threads(),
                        affinity=observed_affinity(), run_s=time.perf_counter() - started,
                        ready_at=clock.ready_at, started_at=clock.started_at, startup_breakdown_s=clock.laps_s,
                        kind=job.kind, **sections)
    write_atomic(job.result_path, result.to_json())
    progress.update(phase=Phase.DONE, force=True)
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: gloo's and c10d's threads can abort ("terminate called without an active
    # exception") while static destructors run, after the result is already on disk.
    os._exit(code)
