"""The rank side of a probe (its driver is run.driver.probe; its output is a cached `core.planning.probe.ProbeResult`,
not a trial record, so it has no work item): one rank of the workload at a small local batch, built as a throughput
trial builds it, holding as many batches as a throughput trial holds before timing, then a few training steps. It
reports its own peak private memory and its libraries' pages (run.procmem), the median time of its steps after the
first, the FLOPs of one more step as orch's FLOP counter counts them (run.rank.flops), its gradients' bytes and its
train split's length."""

from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core.planning.probe import PROBE_STEPS, held_batches
from orchestrator.core.profile.flop_count import FLOPS_RULE
from orchestrator.run.job import ProbeTask
from orchestrator.run.procmem import read_memory
from orchestrator.run.reports import ProbeReport

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob, RankOutput
    from orchestrator.run.rank.process import StartupClock
    from orchestrator.run.rank.session import Session

FLOPS_ERROR_CHARS = 300   # of the counter's exception, for the probe's source text (the log has all of it)




def own_peak_private_mib(proc: Path = Path("/proc/self")) -> tuple[float | None, float]:
    """This process's peak private memory and its file-backed pages (its libraries), MiB (run.procmem: the same
    definition as the launcher's watch of every rank): the kernel's high-water mark of the resident set less the
    file-backed pages mapped now. Neither moves with other torch processes on the machine, which share the
    libraries' pages and would move a unique set size by their size. (None, 0) where /proc cannot tell."""
    read = read_memory(proc)
    if read is None:
        return None, 0.0
    return read.peak_private_mib, read.file_mib


def _count_flops(step: Any, batch: tuple[Any, ...]) -> tuple[float | None, str | None]:
    """FLOPs of one training step by orch's counter (run.rank.flops: torch's FlopCounterMode, convolutions over the
    taps inside the input; matmuls and attention as torch counts them), or None with why it could not count
    (an op it cannot follow)."""
    from orchestrator.run.rank.flops import count_flops

    flops, error = count_flops(lambda: step(batch))
    return flops, error[:FLOPS_ERROR_CHARS] if error is not None else None


def _held(job: RankJob, trainer: Any) -> list[tuple[Any, ...]]:
    """The batches a throughput trial of this job would hold (at least one), from the first epochs."""
    from orch.workload import WorkloadError

    steps = job.task_as(ProbeTask).steps
    wanted = max(1, held_batches(steps.data, steps.warmup, steps.timed))
    epochs = itertools.chain.from_iterable(trainer.batches(epoch) for epoch in range(wanted))
    batches = list(itertools.islice(epochs, wanted))
    if not batches:
        raise WorkloadError(f"the train split yields no batch of {job.local_batch} samples for one rank")
    return batches


def probe(job: RankJob, session: Session, progress: ProgressWriter) -> ProbeReport:
    from orchestrator.run.job import Phase
    from orchestrator.run.rank.protocol import gradient_sizes, make_step

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
    peak, libraries = own_peak_private_mib()   # before counting: the counter's own bookkeeping is not the rank's
    flops, error = _count_flops(step, batches[0])
    progress.step()
    grads = gradient_sizes(session.module)
    return ProbeReport(local_batch=job.local_batch, steps=PROBE_STEPS, held_batches=len(batches),
                       rank_peak_private_mib=peak, library_mib=libraries, flops_per_step=flops, flops_error=error,
                       flops_rule=FLOPS_RULE if flops is not None else None,
                       samples_per_epoch=trainer.samples_per_epoch(), gradient_bytes=grads["gradient_bytes"],
                       gradient_dtype=grads["gradient_dtype"],
                       step_s=statistics.median(steady_s) if steady_s else None)


def run_rank(job: RankJob, progress: ProgressWriter, clock: StartupClock) -> RankOutput:
    from orchestrator.run.rank.session import train

    return train(job, progress, clock, lambda session: probe(job, session, progress))
