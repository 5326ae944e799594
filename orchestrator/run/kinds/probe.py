"""The rank side of a probe (its driver is run.probe; its output is a cached `core.probe.ProbeResult`, not a
trial record, so it has no work item): one rank of the workload at a small local batch, built as a throughput
trial builds it, holding as many batches as a throughput trial holds before timing, then a few training steps.
It reports its own peak unique memory, the median time of its steps after the first, the FLOPs of one more
step as torch's FLOP counter counts them, its gradients' bytes and its train split's length."""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core.jsonobject import JsonObject, optional
from orchestrator.core.probe import PROBE_STEPS, held_batches

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob
    from orchestrator.run.rank_main import StartupClock
    from orchestrator.run.rank_session import Session

FLOPS_ERROR_CHARS = 300   # of the counter's exception, for the probe's source text (the log has all of it)
KIB_PER_MIB = 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeReport(JsonObject):
    """What a probe rank measured (one local batch)."""

    local_batch: int
    steps: int                          # training steps before the peak was read
    held_batches: int                   # distinct batches held in memory through them
    rank_peak_uss_mib: float | None     # as a rank alone on its node (`own_peak_uss_mib`); None without /proc
    library_mib: float = 0.0            # of which the libraries it loaded (torch's), shared by a node's ranks
    flops_per_step: float | None        # torch's FLOP counter on one training step
    flops_error: str | None = optional()
    samples_per_epoch: int | None = None
    gradient_bytes: int = 0
    gradient_dtype: str | None = None
    step_s: float | None = optional()   # the median of the training steps after the first, seconds


REPORT = ProbeReport


def _kib(text: str, name: str) -> int:
    """The kB figure of `name:` in a /proc status-style text (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0


def library_dirs() -> tuple[str, ...]:
    """Where the libraries a rank loads and its driver does not come from: the installed packages' folders
    (torch's libraries, and the ones it loads: oneDNN, OpenMP, CUDA's in a CUDA build, numpy)."""
    paths = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    paths |= {p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))}
    return tuple(sorted(os.path.join(p, "") for p in paths if p))


def _mappings(smaps: str) -> list[tuple[str, int, int]]:
    """(path, resident kB, private kB) of each mapping in a /proc/PID/smaps text."""
    out: list[tuple[str, int, int]] = []
    for line in smaps.splitlines():
        parts = line.split()
        if not parts:
            continue
        if not parts[0].endswith(":"):        # a mapping's header: address perms offset dev inode [path]
            out.append((parts[5] if len(parts) > 5 else "", 0, 0))
        elif out and parts[0] == "Rss:":
            out[-1] = (out[-1][0], out[-1][1] + int(parts[1]), out[-1][2])
        elif out and parts[0] in ("Private_Clean:", "Private_Dirty:"):
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + int(parts[1]))
    return out


def own_peak_uss_mib(proc: Path = Path("/proc/self"),
                     libraries: tuple[str, ...] | None = None) -> tuple[float | None, float]:
    """This process's peak unique memory as if it were the only process on its node to load its libraries, and
    the resident size of those libraries, MiB.

    The peak is the kernel's high-water mark of the resident set (VmHWM: exact, where a launcher sampling USS
    every 0.2 s can miss a peak that lasts one backward pass) less the pages it shares now, except those of the
    libraries under `libraries` (default `library_dirs()`). Those, a few hundred MiB of torch's, are unique to a
    rank alone on its node, and shared by the ranks of a node with several: counted as unique, the figure is
    a rank alone's (the largest) whether or not other torch processes run on the machine at the time of the
    probe, which would otherwise move it by that much. (None, 0) where /proc cannot tell."""
    try:
        status, smaps = (proc / "status").read_text(), (proc / "smaps").read_text()
    except OSError:
        return None, 0.0
    prefixes = library_dirs() if libraries is None else libraries
    other_shared_kib = library_kib = 0
    for path, rss, private in _mappings(smaps):
        if path.startswith(prefixes):
            library_kib += rss
        else:
            other_shared_kib += rss - private
    hwm_kib = _kib(status, "VmHWM")
    return ((hwm_kib - other_shared_kib) / KIB_PER_MIB if hwm_kib else None), library_kib / KIB_PER_MIB


def _count_flops(step: Any, batch: tuple[Any, ...]) -> tuple[float | None, str | None]:
    """FLOPs of one training step by torch's FlopCounterMode (matmuls, convolutions, attention), or None with
    why it could not count (an op it cannot follow)."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        counter = FlopCounterMode(display=False)
        with counter:
            step(batch)
        return float(counter.get_total_flops()), None
    except Exception as err:
        return None, f"{type(err).__name__}: {err}"[:FLOPS_ERROR_CHARS]


def _held(job: RankJob, trainer: Any) -> list[tuple[Any, ...]]:
    """The batches a throughput trial of this job would hold (at least one), from the first epochs."""
    from orch.workload import WorkloadError

    wanted = max(1, held_batches(job.data, job.warmup_steps, job.timed_steps))
    epochs = itertools.chain.from_iterable(trainer.batches(epoch) for epoch in range(wanted))
    batches = list(itertools.islice(epochs, wanted))
    if not batches:
        raise WorkloadError(f"the train split yields no batch of {job.local_batch} samples for one rank")
    return batches


def probe(job: RankJob, session: Session, progress: ProgressWriter) -> ProbeReport:
    from orchestrator.run.job import Phase
    from orchestrator.run.protocol import gradient_sizes, make_step

    trainer = session.trainer
    step = make_step(session.module, trainer.optimizer)
    batches = _held(job, trainer)
    progress.update(phase=Phase.WARMUP, of=PROBE_STEPS, force=True)
    steady_s = []   # the first step creates the optimizer's state and oneDNN's primitives: not a steady step
    for i in range(PROBE_STEPS):
        started = time.perf_counter()
        step(batches[i % len(batches)])
        if i:
            steady_s.append(time.perf_counter() - started)
        progress.step()
    peak, libraries = own_peak_uss_mib()   # before counting: the counter's own bookkeeping is not the rank's
    flops, error = _count_flops(step, batches[0])
    progress.step()
    grads = gradient_sizes(session.module)
    return ProbeReport(local_batch=job.local_batch, steps=PROBE_STEPS, held_batches=len(batches),
                       rank_peak_uss_mib=peak, library_mib=libraries, flops_per_step=flops, flops_error=error,
                       samples_per_epoch=trainer.samples_per_epoch(), gradient_bytes=grads["gradient_bytes"],
                       gradient_dtype=grads["gradient_dtype"],
                       step_s=statistics.median(steady_s) if steady_s else None)


def run_rank(job: RankJob, progress: ProgressWriter, clock: StartupClock) -> dict[str, Any]:
    from orchestrator.run.rank_session import train

    return train(job, progress, clock, lambda session: {"report": probe(job, session, progress)})
