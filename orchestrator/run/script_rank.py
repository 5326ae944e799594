"""A script's rank: the user's training script run as it is, one process per rank, through the same launcher
as orch's own ranks (pinned before it starts, the same thread and allocator settings, torchrun's variables).

    python -m orchestrator.run.script_rank JOB_FILE      (the launcher's command for a script: `script_command`)

The process sets up what orch's own rank entry point (run.rank_main) does, then runs the script as
`python SCRIPT ARGS` would (`__main__`, its folder first on sys.path, sys.argv), with the reporter
(`orch.script`, run.script_reporter) behind the script's `orch.script.step()` calls:

- the orphan watch, and every thread's stack on SIGUSR1 (the watchdog's hang report);
- torch imported and its thread pools sized before the script starts (OMP_NUM_THREADS is already set);
- the trial's rendezvous store hosted by rank 0, bound to MASTER_ADDR only (torch's own env:// store binds
  every interface), and TORCHELASTIC_USE_AGENT_STORE=True so that the script's `init_process_group()` joins
  it as torchrun's workers join their agent's store; orch's reporter keeps its barriers there too;
- the grid's values as ORCH_LOCAL_BATCH, ORCH_THREADS, ... (core.script);
- the script's end read as the trial's: an exception's last line, a non-zero exit, or an end without the
  steps the trial needs becomes the progress file's `error`, the trial's reason.

Driver side: `script_settings` (the job's script section for a trial) and `startup_timeout_reason`.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import traceback
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core.records import Kind
from orchestrator.run.job import Phase, ProgressWriter, RankJob, ScriptSettings

if TYPE_CHECKING:
    from orchestrator.core.grid import Trial
    from orchestrator.io.sweepfile import Sweep
    from orchestrator.run.job import RankProgress

ERROR_CHARS = 600            # of a reason kept in the progress file (the log has all of it)
SPAWNED_FILE = "spawned.json"
# Stages a script's start-up passes before the script runs (rank_main.StartupClock's laps).
BEFORE_SCRIPT = ("interpreter", "import_torch", "orch_store")


# --- driver side ----------------------------------------------------------------------------------------------

def script_settings(sweep: Sweep, trial: Trial, *, seed: int, kind: Kind) -> ScriptSettings:
    """The script section of a trial's rank job: the arguments filled in for the trial (core.script)."""
    from orchestrator.core.lr import scaled_lr
    from orchestrator.core.script import environment, fill_args, trial_values

    w, conv = sweep.spec.workload, sweep.spec.convergence
    lr = (scaled_lr(rule=conv.lr_rule, base_lr=conv.base_lr, base_batch=conv.base_batch,
                    global_batch=trial.global_batch) if conv is not None else None)
    values = trial_values(ranks=trial.ranks, threads=trial.threads_per_rank, local_batch=trial.local_batch,
                          seed=seed, lr=lr, max_epochs=conv.max_epochs if conv is not None else None)
    settings = ScriptSettings(path=str(w.script), args=fill_args(w.arg_texts, values), sha256=str(w.script_sha256),
                              sources=w.script_sources,
                              cwd=str(sweep.path.resolve().parent), env=environment(values),
                              flops_per_sample=w.flops_per_sample, lr=lr)
    if kind == Kind.CONVERGENCE and conv is not None:
        settings = replace(settings, metric=conv.metric, target=conv.target, max_epochs=conv.max_epochs)
    return settings


def script_command(job_file: Path) -> list[str]:
    """The command of a script's rank (after the pinning prefix): this module, which runs the script."""
    return [sys.executable, "-m", "orchestrator.run.script_rank", str(job_file)]


def startup_timeout_reason(timeout_s: float, progress: RankProgress | None, pid: int) -> str:
    """Why a script's rank timed out in start-up: before the script ran, or a script that never stepped; with
    the size of its process tree (a script that started workers of its own shows them)."""
    if progress is None or progress.stage in BEFORE_SCRIPT:
        where = "before its first progress report" if progress is None else f"after {progress.stage}"
        return (f"not ready after {timeout_s:g} s of start-up ({where}), before the script started "
                "(measure.startup_timeout_s)")
    processes = _tree_size(pid)
    started = (f"; its process tree holds {processes} processes (did it start workers of its own?)"
               if processes > 1 else "")
    return (f"the script did not call orch.script.step() within {timeout_s:g} s of its start "
            f"(measure.startup_timeout_s): a script without the reporter's line, or one stuck before its first "
            f"step{started}")


def _tree_size(pid: int) -> int:
    import psutil

    try:
        return 1 + len(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return 1


# --- rank side ------------------------------------------------------------------------------------------------

def fail(progress: ProgressWriter, message: str) -> None:
    """End the rank as failed with `message` as its reason (written first: the launcher reads it at the exit)."""
    progress.update(error=message[:ERROR_CHARS], force=True)
    print(f"orch: {message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


def spawned_error(job: RankJob) -> str | None:
    """What a process the script started reported (orch.script.spawned), if one did."""
    try:
        error = json.loads((Path(job.progress_path).parent / SPAWNED_FILE).read_text())["error"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(error)


def host_store(job: RankJob) -> Any:
    """The trial's rendezvous store: rank 0 serves it on MASTER_ADDR only (as run.rank_session does for orch's
    own ranks), every rank holds a client of it. The script's env:// rendezvous joins it as a client
    (TORCHELASTIC_USE_AGENT_STORE), and the reporter's barriers use it."""
    from orchestrator.run.rank_session import rendezvous_store

    return rendezvous_store(timedelta(seconds=job.init_timeout_s), count_workers=False)


def _script_environment(job: RankJob, settings: ScriptSettings) -> None:
    """The script's environment and its argv and path, as `python SCRIPT ARGS` in its folder has them."""
    from orch.script import RANK_PID_ENV, SPAWNED_ENV

    os.environ.update(settings.env)
    os.environ.update({"TORCHELASTIC_USE_AGENT_STORE": "True", RANK_PID_ENV: str(os.getpid()),
                       SPAWNED_ENV: str(Path(job.progress_path).parent / SPAWNED_FILE)})
    sys.argv = [settings.path, *settings.args]
    sys.path[0] = str(Path(settings.path).parent)


def _run(path: str, source: bytes) -> str | None:
    """Run the script as `__main__` from `source`, the bytes whose hash was checked (`_read_checked`): the file
    is not read again, so an edit after the check never runs (runpy.run_path would read it again); None when it
    ended normally, else why it did not (its exception's last line, or its non-zero exit status)."""
    import builtins
    import types

    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(__file__=path, __builtins__=builtins, __loader__=None, __spec__=None,
                                __package__=None, __cached__=None)
    sys.modules["__main__"] = main_module   # as runpy does: pickling and multiprocessing look the module up
    try:
        exec(compile(source, path, "exec"), main_module.__dict__)   # noqa: S102 (the user's script, checked)
    except SystemExit as end:
        if end.code in (None, 0):
            return None
        return end.code if isinstance(end.code, str) else f"the script exited with status {end.code}"
    except BaseException as err:  # the script's own error: its traceback to the log, its last line the reason
        traceback.print_exc()
        return f"{type(err).__name__}: {err}"
    return None


def main(argv: list[str]) -> int:
    from orchestrator.run.rank_main import StartupClock, _exit_when_orphaned, process_started_at

    clock = StartupClock(process_started_at())
    clock.lap("interpreter")
    _exit_when_orphaned()
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    job = RankJob.from_json(Path(argv[1]).read_text())
    settings = job.script
    if settings is None:
        raise ValueError(f"{argv[1]} is not a script's job")
    progress = ProgressWriter(job.progress_path)
    progress.update(phase=Phase.BUILDING, stage="interpreter", force=True)
    clock.on_lap = lambda stage: progress.update(stage=stage, force=True)
    source, problem = _read_checked(settings)
    if problem is not None or source is None:
        fail(progress, problem or f"the script {settings.path} cannot be read on this node")
        return 1
    import torch

    torch.set_num_threads(job.threads)
    try:
        torch.set_num_interop_threads(1)  # as orch's ranks: inter-op parallelism would add threads beyond one per core
    except RuntimeError:
        pass
    clock.lap("import_torch")
    store = host_store(job)
    clock.lap("orch_store")

    import orch.script
    from orchestrator.run.script_reporter import ScriptReporter

    reporter = ScriptReporter(job, progress, clock, store)
    orch.script._activate(reporter)
    _script_environment(job, settings)
    progress.update(stage="script", force=True)   # the script runs: its start-up lasts until its first step
    error = _run(settings.path, source)
    error = spawned_error(job) or error
    if error is not None:
        fail(progress, error)
    reporter.script_ended()   # writes the result, or fails the rank; exits either way
    return 0


def _read_checked(settings: ScriptSettings) -> tuple[bytes | None, str | None]:
    """The script's bytes as they are on this node, read once, and why they are not the ones planned (edited
    since, or another file on this node; its folder's Python files too), or None: these bytes are what runs."""
    import hashlib

    try:
        source = Path(settings.path).read_bytes()
    except OSError as err:
        return None, f"the script {settings.path} cannot be read on this node: {err.strerror or err}"
    sha = hashlib.sha256(source).hexdigest()
    if sha != settings.sha256:
        return None, (f"the script {settings.path} changed since the sweep was planned (SHA-256 {sha[:12]}…, "
                      f"planned {settings.sha256[:12]}…): rerun the sweep to plan the new version")
    if settings.sources is not None:
        from orchestrator.io.files import python_sources_sha256

        here = python_sources_sha256(settings.path)
        if here != settings.sources:
            return None, (f"a Python file in {Path(settings.path).parent} changed since the sweep was planned "
                          f"(sources {here[:12]}…, planned {settings.sources[:12]}…): the script may import it; "
                          "rerun the sweep to plan the new version")
    return source, None


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
