"""Entry point of one rank process: `python -m orchestrator.run.rank.main JOB_FILE`.

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
import time
from pathlib import Path

from orchestrator.io.files import write_atomic
from orchestrator.run.job import Phase, ProgressWriter, RankJob, RankResult
from orchestrator.run.rank import rank_entry
from orchestrator.run.rank.process import (
    ERROR_CHARS,
    StartupClock,
    exit_when_orphaned,
    observed_affinity,
    process_started_at,
    size_torch_threads,
)


def main(argv: list[str]) -> int:
    clock = StartupClock(process_started_at())
    clock.lap("interpreter")   # numactl, the interpreter's own start, this module's imports
    exit_when_orphaned()
    # The launcher sends SIGUSR1 before killing a rank that stopped making progress: every thread's stack
    # goes to the log, so a hang's record says where it hung.
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    job = RankJob.from_json(Path(argv[1]).read_text())
    progress = ProgressWriter(job.progress_path)
    progress.update(phase=Phase.BUILDING, stage="interpreter", force=True)
    clock.on_lap = lambda stage: progress.update(stage=stage, force=True)

    size_torch_threads(job.threads)
    import torch  # imported by the line above: no cost here

    clock.lap("import_torch")
    started = time.perf_counter()
    try:
        out = rank_entry(job.kind)(job, progress, clock)   # the job's kind names its entry (run.rank's table)
    except Exception as err:
        # The traceback goes to the log; its one line goes to the progress file, so the trial's reason names the
        # cause (a user's factory that raised, a forward with no scalar loss) and not only the exit status.
        progress.update(error=f"{type(err).__name__}: {err}"[:ERROR_CHARS], force=True)
        raise
    result = RankResult(rank=int(os.environ.get("RANK", 0)), pid=os.getpid(), threads=torch.get_num_threads(),
                        affinity=observed_affinity(), run_s=time.perf_counter() - started,
                        ready_at=clock.ready_at, started_at=clock.started_at, startup_breakdown_s=clock.laps_s,
                        kind=job.kind, report=out.report, communication=out.communication,
                        build_s=out.build_s, applied=out.applied)
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
