"""A script's rank: the user's training script run as it is, one process per rank, through the same launcher
as orch's own ranks (pinned before it starts, the same thread and allocator settings, torchrun's variables).

    python -m orchestrator.run.rank.script JOB_FILE      (the launcher's command: run.driver.script_job.script_command)

The process sets up what orch's own rank entry point (run.rank.main) does, then runs the script as
`python SCRIPT ARGS` would (`__main__`, its folder first on sys.path, sys.argv), with the reporter
(`orch.script`, run.rank.script_reporter) behind the script's `orch.script.step()` calls:

- the orphan watch, and every thread's stack on SIGUSR1 (the watchdog's hang report);
- torch imported and its thread pools sized before the script starts (OMP_NUM_THREADS is already set);
- the trial's rendezvous store hosted by rank 0, bound to MASTER_ADDR only (torch's own env:// store binds
  every interface), and TORCHELASTIC_USE_AGENT_STORE=True so that the script's `init_process_group()` joins
  it as torchrun's workers join their agent's store; orch's reporter keeps its barriers there too;
- the grid's values as ORCH_LOCAL_BATCH, ORCH_THREADS, ... (core.planning.script);
- the script's end read as the trial's: an exception's last line, a non-zero exit, or an end without the
  steps the trial needs becomes the progress file's `error`, the trial's reason.

Its driver's half is run.driver.script_job.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import traceback
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.run.job import Phase, ProgressWriter, RankJob, ScriptSettings
from orchestrator.run.rank.process import StartupClock, exit_when_orphaned, process_started_at, size_torch_threads
from orchestrator.run.rank.script_reporter import fail

if TYPE_CHECKING:
    from torch.distributed import Store

SPAWNED_FILE = "spawned.json"


def spawned_error(job: RankJob) -> str | None:
    """What a process the script started reported (orch.script.spawned), if one did."""
    try:
        error = json.loads((Path(job.progress_path).parent / SPAWNED_FILE).read_text())["error"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(error)


def host_store(job: RankJob) -> Store:
    """The trial's rendezvous store: rank 0 serves it on MASTER_ADDR only (as run.rank.session does for orch's
    own ranks), every rank holds a client of it. The script's env:// rendezvous joins it as a client
    (TORCHELASTIC_USE_AGENT_STORE), and the reporter's barriers use it."""
    from orchestrator.run.rank.session import rendezvous_store

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
    clock = StartupClock(process_started_at())
    clock.lap("interpreter")
    exit_when_orphaned()
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
    size_torch_threads(job.threads)   # as orch's own ranks
    clock.lap("import_torch")
    store = host_store(job)
    clock.lap("orch_store")

    import orch.script
    from orchestrator.run.rank.script_reporter import ScriptReporter

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
