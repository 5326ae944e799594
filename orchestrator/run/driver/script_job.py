"""The driver's half of a script's trial (the rank's is run.rank.script): the job's script section for a trial,
the rank's command line, and why a script's rank that timed out in start-up did.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.measured.records import Kind
from orchestrator.run.job import ScriptSettings

if TYPE_CHECKING:
    from orchestrator.core.planning.trial import Trial
    from orchestrator.io.sweepfile import Sweep
    from orchestrator.run.job import RankProgress

# Stages a script's start-up passes before the script runs (run.rank.process.StartupClock's laps, named by
# run.rank.script).
BEFORE_SCRIPT = ("interpreter", "import_torch", "orch_store")


def script_settings(sweep: Sweep, trial: Trial, *, seed: int, kind: Kind) -> ScriptSettings:
    """The script section of a trial's rank job: the arguments filled in for the trial (core.planning.script)."""
    from orchestrator.core.planning.lr import scaled_lr
    from orchestrator.core.planning.script import environment, fill_args, trial_values

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
    """The command of a script's rank (after the pinning prefix): run.rank.script, which runs the script."""
    return [sys.executable, "-m", "orchestrator.run.rank.script", str(job_file)]


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
