"""The probe: what a workload needs for planning, measured where it does not declare it (`orch probe`, and
`orch sweep` before it plans).

One rank of the sweep's workload, in the precision the plan chose, on this machine, without Ray: started by
the launcher the sweep's ranks use (`RankLauncher`: pinned before the interpreter starts, watched for memory
against its budget, for start-up and for progress), at each local batch of `core.planning.probe.PROBE_BATCHES` in a
process of its own, because a process's high-water mark never falls. The rank (run.rank.probe) holds the
batches a throughput trial holds, runs a few training steps and reports its peak, the FLOPs of one step and its
train split's length. The peak fitted is the rank's own private memory (run.procmem, as the launcher watches
every rank): the kernel's high-water mark of its resident set less its file-backed pages, which does not move
with other torch processes on the machine. Its file-backed pages (the libraries: torch's, a few hundred MiB)
are kept apart, for the planner to count once per node. The launcher's watch, which reads the same counters
every 0.2 s and can miss a shorter peak, is kept beside it. `core.planning.probe.probe_result` fits the memory model and
states the sources. The result is cached (`io.probe_cache`) and kept in the results folder of a sweep that
plans with it.

Its cores: the physical cores of this machine's first socket that this process may use (a rank never has
more), so the probe's threads are the most a rank can have. Its memory budget: `constraints.memory_budget_mib`
when the sweep sets one, else this machine's memory × `constraints.memory_headroom`: what the node allows one
rank. A probe that fails (a factory that raises, a forward with no scalar loss, out of memory, a timeout) is
bad input for the sweep: `ProbeFailed`, with the rank's one-line error.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orch.workload import ddp_gradient_copies, ddp_options_of
from orchestrator.core.json.schema import to_plain
from orchestrator.core.machine.topology import Topology
from orchestrator.core.measured.rank_end import RankStatus
from orchestrator.core.measured.records import utc_timestamp
from orchestrator.core.planning.probe import PROBE_BATCHES, PROBE_STEPS, ProbePoint, ProbeResult, probe_result
from orchestrator.errors import InputError
from orchestrator.io.files import WORK_ROOT as RANKS_ROOT
from orchestrator.io.isa import from_flags
from orchestrator.io.probe_cache import probe_key_fields
from orchestrator.run.driver.launcher import (
    Outcome,
    RankLauncher,
    RankLimits,
    kept_names,
    passes_to_ranks,
    rank_environment,
    reserve_rendezvous,
)
from orchestrator.run.job import ProbeTask, RankJob, Steps, init_timeout_s
from orchestrator.run.reports import ProbeReport

if TYPE_CHECKING:
    from orchestrator.core.planning.spec import ConstraintsSpec
    from orchestrator.io.sweepfile import Sweep

log = logging.getLogger(__name__)

# The probe's rank folders: under the ranks' private work folder (io.files), which the launcher checks.
WORK_ROOT = RANKS_ROOT / "probe"
# What the driver's environment must not pass to the rank: rank_environment sets the pinning and the world.
_RANK_SET = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "KMP_AFFINITY", "RANK",
             "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}


class ProbeFailed(InputError):
    """The probe's rank did not finish: the message says at which batch, how it ended and the rank's error."""


@dataclass(frozen=True, slots=True)
class ProbeSetup:
    """Where and under which limits the probe's rank runs."""

    cpus: tuple[int, ...]
    numa_nodes: tuple[int, ...]
    budget_mib: float
    budget_note: str        # where the budget comes from

    @staticmethod
    def here(local: Topology, constraints: ConstraintsSpec) -> ProbeSetup:
        """This machine (`local`, detected): its first socket's physical cores, its memory × headroom (or the
        sweep's explicit per-rank budget)."""
        node = local.nodes[0]
        cpus = node.sockets[0].cpus(False)
        if constraints.memory_budget_mib is not None:
            budget, note = constraints.memory_budget_mib, "constraints.memory_budget_mib"
        else:
            budget = node.memory_mib * constraints.memory_headroom
            note = f"this machine's {node.memory_mib:,.0f} MiB × memory_headroom {constraints.memory_headroom:g}"
        return ProbeSetup(tuple(cpus), node.numa_of_cpus(tuple(cpus)), budget, note)


def _base_env() -> dict[str, str]:
    keep = kept_names()   # a rank's environment as a sweep's ranks get it: no secrets (launcher.passes_to_ranks)
    return {k: v for k, v in os.environ.items()
            if k not in _RANK_SET and not k.startswith("RAY_") and passes_to_ranks(k, keep)}


def _job(sweep: Sweep, backend: str, local_batch: int, threads: int) -> RankJob:
    m = sweep.spec.measure
    name = sweep.spec.workload.name or ""   # set on every loaded sweep (io.sweepfile)
    steps = replace(Steps.of(m), repeats=1)   # the probe times one window
    job = RankJob(task=ProbeTask(steps=steps), workload=name, params=to_plain(sweep.params), backend=backend,
                  local_batch=local_batch, threads=threads,
                  init_timeout_s=init_timeout_s(m.step_timeout_s, m.startup_timeout_s))
    if sweep.spec.workload.script is None:
        return job
    # A training script is probed as it runs in a trial: itself, as one rank, its arguments filled for a 1-rank
    # trial at this local batch, ended by its reporter after PROBE_STEPS timed steps (orch.script).
    from orchestrator.core.measured.records import Kind
    from orchestrator.core.planning.trial import Trial
    from orchestrator.run.driver.script_job import script_settings

    settings = script_settings(sweep, Trial(1, threads, local_batch), seed=0, kind=Kind.THROUGHPUT)
    return replace(job, task=ProbeTask(steps=replace(steps, warmup=1, timed=PROBE_STEPS)), script=settings)


def _run_rank(sweep: Sweep, backend: str, local_batch: int, setup: ProbeSetup, workdir: Path) -> Outcome:
    """One probe process, started and watched to its end; stopped if the caller is interrupted."""
    m = sweep.spec.measure
    cpus = list(setup.cpus)
    launcher = RankLauncher(str(workdir))
    rendezvous = reserve_rendezvous("127.0.0.1")   # held until the rank holds it (launcher.start closes it here)
    env = rank_environment(_base_env(), cpus=cpus, ccl_cpus_on_node=cpus[-1:], backend=backend, rank=0,
                           local_rank=0, world_size=1, local_world_size=1, master_addr="127.0.0.1",
                           master_port=rendezvous.getsockname()[1])
    launcher.start(_job(sweep, backend, local_batch, len(cpus)), env, cpus, list(setup.numa_nodes),
                   rendezvous=rendezvous)
    limits = RankLimits(budget_mib=setup.budget_mib, startup_timeout_s=m.startup_timeout_s,
                        step_timeout_s=m.step_timeout_s, deadline=time.time() + m.timeout_s)
    try:
        return launcher.supervise(limits)
    except BaseException:
        launcher.stop("interrupted")
        raise


def _point(sweep: Sweep, outcome: Outcome, local_batch: int, wall_s: float, launched_at: float) -> ProbePoint:
    report = outcome.result.report if outcome.result is not None else None
    if not isinstance(report, ProbeReport):
        raise ProbeFailed(f"the probe of workload {sweep.workload.name} at local batch {local_batch} wrote no "
                          "probe report")
    watched = outcome.peak_private_mib
    own = report.rank_peak_private_mib
    ready_at = outcome.result.ready_at if outcome.result is not None else None
    return ProbePoint(local_batch=local_batch, peak_private_mib=own if own is not None else watched,
                      rank_peak_private_mib=own, watched_peak_private_mib=watched,
                      library_mib=report.library_mib or outcome.shared_mib, flops_per_step=report.flops_per_step,
                      flops_error=report.flops_error, flops_rule=report.flops_rule,
                      samples_per_epoch=report.samples_per_epoch,
                      gradient_bytes=report.gradient_bytes, wall_s=wall_s, step_s=report.step_s,
                      startup_s=ready_at - launched_at if ready_at else None)


def _failure(sweep: Sweep, outcome: Outcome, local_batch: int, setup: ProbeSetup, log_path: Path) -> ProbeFailed:
    what = {RankStatus.OOM: "ran out of memory", RankStatus.TIMEOUT: "timed out"}.get(outcome.status, "failed")
    budget = f" (its budget: {setup.budget_note})" if outcome.status == RankStatus.OOM else ""
    return ProbeFailed(f"the probe of workload {sweep.workload.name} at local batch {local_batch} {what}{budget}: "
                       f"{outcome.reason}; its log: {log_path}")


def run_probe(sweep: Sweep, backend: str, setup: ProbeSetup,
              on_point: Callable[[ProbePoint], None] | None = None) -> ProbeResult:
    """Probe `sweep` (its precision chosen) on `backend`: every batch of PROBE_BATCHES in a process of its own.
    Raises ProbeFailed with the first failure (its rank's log kept under WORK_ROOT; a success leaves nothing)."""
    fields = probe_key_fields(sweep, backend)
    points = []
    for local_batch in PROBE_BATCHES:
        workdir = WORK_ROOT / f"{sweep.workload.name}-b{local_batch}-{int(time.time() * 1000)}"
        started, launched_at = time.monotonic(), time.time()   # a rank says when it was ready on the wall clock
        outcome = _run_rank(sweep, backend, local_batch, setup, workdir)
        if outcome.status != RankStatus.OK:
            raise _failure(sweep, outcome, local_batch, setup, workdir / "rank.log")
        points.append(_point(sweep, outcome, local_batch, time.monotonic() - started, launched_at))
        shutil.rmtree(workdir, ignore_errors=True)
        if on_point is not None:
            on_point(points[-1])
    copies = ddp_gradient_copies(ddp_options_of(sweep.params)) - 1   # the probe measured the gradients themselves
    result = probe_result(fields, points, threads=len(setup.cpus), measured_at=utc_timestamp(time.time()),
                          ddp_copies=copies, cpu=from_flags().identity)
    if sweep.spec.workload.script is None:
        return result
    # A script's FLOPs are what it reports (orch counts nothing inside it); its epoch size only the sweep file says.
    flops_source = (f"reported by the script (orch.script.flops): {result.flops_per_sample:,.0f} FLOP per sample"
                    if result.flops_per_sample is not None else result.flops_source)
    return replace(result, flops_source=flops_source,
                   samples_source="not known: a script's epoch size is the sweep file's (workload.samples_per_epoch)")


@dataclass(frozen=True, slots=True)
class Probed:
    """A sweep with the probe it plans with (`sweep.probe`), and how it got it."""

    sweep: Sweep                   # the sweep as given, its probe attached (None: none needed, or none possible)
    measured: bool = False         # measured now (else: read from the cache, or not needed)
    cache_path: Path | None = None
    cache_problem: str | None = None   # why the result could not be cached
    skipped: str | None = None     # why no probe ran although a figure is unknown


def probe_for(sweep: Sweep, topology: Topology, ccl_available: bool, *, force: bool = False,
              on_start: Callable[[ProbeSetup, str], None] | None = None,
              on_point: Callable[[ProbePoint], None] | None = None) -> Probed:
    """The sweep with its probe, for planning on `topology`: the cached one, else measured now on this machine
    and cached (with `force`: measured now whatever the cache or the workload's declarations hold). Nothing
    runs where the plan will refuse the sweep anyway (a precision or backend it cannot have). `on_start`
    hears where the probe runs and in which precision before it starts. Raises ProbeFailed."""
    from orchestrator.core.planning.plan import choose_backend
    from orchestrator.io.detect import detect_local
    from orchestrator.io.probe_cache import store_probe

    resolved, precision = sweep.resolve_precision(topology)
    backend = choose_backend(sweep.spec.backend, ccl_available)
    refused = backend.error or (precision.error if precision is not None else None)
    if not force:
        resolved = resolved.with_cached_probe(backend.chosen)
        if not resolved.needs_probe(from_flags().identity) or refused:
            return Probed(sweep.with_probe(resolved.probe), skipped=refused if resolved.facts.unknown() else None)
    elif refused:
        raise ProbeFailed(f"nothing to probe: {refused}")
    setup = ProbeSetup.here(detect_local(), sweep.spec.constraints)
    if on_start is not None:
        on_start(setup, resolved.requested_precision or "the workload's precision")
    result = run_probe(resolved, backend.chosen, setup, on_point)
    path, problem = store_probe(resolved.workload.name, result)
    return Probed(sweep.with_probe(result), measured=True, cache_path=path, cache_problem=problem)
