"""Your training script, unchanged but for the reporter's lines: orch times it by the same rules as its own
workloads (docs/own-script.md).

    import orch.script

    for epoch in range(args.epochs):
        for images, labels in loader:
            optimizer.zero_grad()
            loss_fn(model(images), labels).backward()
            optimizer.step()
            orch.script.step(samples=len(images))          # once per training step
        orch.script.metric("accuracy", evaluate(model), epoch=epoch + 1)   # once per evaluation

Under `orch sweep`, `step` is the rank's heartbeat and its clock: warm-up steps are excluded, the timed window
opens and closes at the same step on every rank (a barrier), and a throughput trial ends the script inside
`step` once its timed steps are done; a convergence trial ends it at the step after rank 0 reports the target
(or the epoch cap). Outside orch (`python train.py`, `torchrun train.py`) every call does nothing, so the
script runs as before.

Importing this module imports nothing but the standard library (no torch): it is safe at the top of any script.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Protocol

from orchestrator.errors import RunFailed

__all__ = ["ScriptError", "active", "flops", "metric", "model", "step"]

# Set by orch in a script's rank process (orchestrator.run.rank.script), inherited by the processes it starts.
RANK_PID_ENV = "ORCH_SCRIPT_RANK_PID"     # the rank's own process id
SPAWNED_ENV = "ORCH_SCRIPT_SPAWNED"       # where a started process that reports says so


class ScriptError(RunFailed):
    """The reporter was used in a way orch cannot time honestly; the message says what to change."""


class Reporter(Protocol):
    """What orch puts behind these functions in a rank process (orchestrator.run.rank.script_reporter)."""

    def step(self, samples: int | None) -> None: ...
    def metric(self, name: str, value: float, epoch: float) -> None: ...
    def flops(self, per_sample: float) -> None: ...
    def model(self, module: object) -> None: ...


_reporter: Reporter | None = None


def active() -> bool:
    """Whether this process is a rank of an orch trial (the calls below report to it)."""
    return _reporter is not None and os.environ.get(RANK_PID_ENV) == str(os.getpid())


def step(samples: int | None = None) -> None:
    """One training step is done (call it after the optimizer's step). `samples`: this rank's samples in the
    step, checked against the trial's local batch (a throughput trial times full batches only)."""
    reporter = _here()
    if reporter is not None:
        reporter.step(samples)


def metric(name: str, value: float, *, epoch: float) -> None:
    """An evaluation's result, `epoch` epochs into training (a fraction for evaluations within an epoch).
    Rank 0's reports decide a convergence trial; calling it on every rank is fine too."""
    reporter = _here()
    if reporter is not None:
        reporter.metric(name, value, epoch)


def flops(per_sample: float) -> None:
    """Training FLOPs per sample (forward and backward), for the hardware-efficiency table; a sweep file's
    `workload.flops_per_sample` takes precedence."""
    reporter = _here()
    if reporter is not None:
        reporter.flops(per_sample)


def model(module: object) -> None:
    """Optional: the model you train (DDP-wrapped or not). orch reads its gradient bytes and DDP's buckets after
    the timed steps, for `orch predict`'s communication model; it never touches the model while timing."""
    reporter = _here()
    if reporter is not None:
        reporter.model(module)


def _here() -> Reporter | None:
    """The rank's reporter; None outside orch. A process the rank started (torch.multiprocessing.spawn, its own
    training workers) must not report: orch already runs one process per rank."""
    rank_pid = os.environ.get(RANK_PID_ENV)
    if rank_pid is None:
        return None
    if rank_pid != str(os.getpid()):
        raise ScriptError(spawned(int(rank_pid)))
    return _reporter


def spawned(rank_pid: int) -> str:
    """The reason of a trial whose script started its own training processes, left where the rank will find it
    (the first one found is kept); returned for the exception that ends the started process."""
    message = (f"the script started its own training processes: process {os.getpid()} called orch.script, the "
               f"rank is process {rank_pid}. orch starts one process per rank itself (RANK, LOCAL_RANK and "
               "WORLD_SIZE are set): train in the script's own process instead of spawning workers "
               "(torch.multiprocessing.spawn)")
    path = os.environ.get(SPAWNED_ENV)
    if path and not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "w") as out:
            json.dump({"error": message}, out)
        os.replace(tmp, path)
    return message


def _activate(reporter: Reporter) -> None:
    """orch's rank process (orchestrator.run.rank.script) hands the calls above to its reporter."""
    global _reporter
    _reporter = reporter
