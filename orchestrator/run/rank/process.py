"""What every rank process does for itself, whichever program it runs (orch's rank entry, run.rank.main, or a
script's, run.rank.script): its start-up clock, the watch on its launcher, and the CPU masks it really ran on.

Imported at the start of a rank process, before torch: the standard library only.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.constants import LAUNCHER_PID_ENV_VAR
from orchestrator.core.measured.rank_end import EXIT_ORPHANED

ERROR_CHARS = 600   # of a rank's error kept in its progress file, the trial's reason (the log has all of it)


def exit_when_orphaned(poll_s: float = 0.5) -> None:
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


def size_torch_threads(threads: int) -> None:
    """torch's intra-op pool sized to the rank's cores (OMP_NUM_THREADS is set already), and one inter-op
    thread: inter-op parallelism would add threads beyond one per core. Before any kernel runs."""
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:   # the pool exists already (torch was used in this process): it keeps its size
        pass
