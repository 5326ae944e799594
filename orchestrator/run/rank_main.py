"""Entry point of one rank process: `python -m orchestrator.run.rank_main JOB_FILE`.

The launcher starts it with its CPU list already applied (numactl or taskset) and with OMP_NUM_THREADS,
the OpenMP affinity variables and RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT in its environment,
so every thread the process creates is born inside its cores. It writes progress to the progress file and
its result to the result file; a non-zero exit status (with the traceback in its log) means failure.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import signal
import socket
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.constants import LAUNCHER_PID_ENV_VAR
from orchestrator.core.rank_end import EXIT_ORPHANED
from orchestrator.core.records import Kind
from orchestrator.io.files import write_atomic

if TYPE_CHECKING:
    from orchestrator.run.job import ProgressWriter, RankJob


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
    in all: cheap enough to keep on in every run."""

    def __init__(self, started_at: float | None):
        self.started_at = started_at
        self.ready_at: float | None = None
        self.laps_s: dict[str, float] = {}
        self._last = started_at

    def lap(self, phase: str) -> None:
        now = time.time()
        if self._last is not None:   # without a process start time the first phase is unknown: left out
            self.laps_s[phase] = round(self.laps_s.get(phase, 0.0) + now - self._last, 4)
        self._last = now

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
    status = ProgressWriter(job.progress_path)
    status.update(phase=Phase.BUILDING, force=True)

    import torch

    torch.set_num_threads(job.threads)
    try:
        torch.set_num_interop_threads(1)  # inter-op parallelism would add threads beyond one per core
    except RuntimeError:
        pass
    clock.lap("import_torch")
    started = time.perf_counter()
    sections: dict[str, Any]
    if job.kind == Kind.PEAK:
        sections = {"peak": _peak(job, status, clock)}
    elif job.kind == Kind.ALLREDUCE:
        sections = {"allreduce": _allreduce(job, status, clock)}
    else:
        sections = _train(job, status, clock)
    if job.kind != Kind.PEAK:   # the peak's barriers are gloo's whatever the trial's backend
        from orchestrator.run.comm import communication_report

        sections["communication"] = communication_report(job.backend)
    result = RankResult(rank=int(os.environ.get("RANK", 0)), pid=os.getpid(), threads=torch.get_num_threads(),
                        affinity=observed_affinity(), run_s=time.perf_counter() - started,
                        ready_at=clock.ready_at, started_at=clock.started_at, startup_breakdown_s=clock.laps_s,
                        **sections)
    write_atomic(job.result_path, result.to_json())
    status.update(phase=Phase.DONE, force=True)
    return 0


def _rendezvous_store(timeout: timedelta):
    """torch.distributed's TCPStore, with rank 0's listening socket bound to MASTER_ADDR only (torch's own
    binds every interface; on one machine MASTER_ADDR is loopback, so nothing listens beyond it)."""
    import torch.distributed as dist

    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    world = int(os.environ["WORLD_SIZE"])
    if int(os.environ["RANK"]) != 0:
        return dist.TCPStore(addr, port, world, False, timeout=timeout)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addr, port))
    listener.listen(max(128, world))
    return dist.TCPStore(addr, port, world, True, timeout=timeout, master_listen_fd=listener.detach())


def _peak(job: RankJob, status: ProgressWriter, clock: StartupClock) -> dict[str, Any]:
    """The GEMM on every rank of the layout at once, pinned as in the trial, synchronized by barriers. Each
    matmul is a step of the progress file: a slow CPU's peak is progress, not a hang."""
    import torch.distributed as dist

    from orchestrator.run.job import Phase
    from orchestrator.run.protocol import gemm_peak

    def heartbeat() -> None:
        status.step(phase=Phase.TIMING)

    if int(os.environ.get("WORLD_SIZE", 1)) == 1:
        clock.ready("import_protocol")
        return gemm_peak(job.threads, job.peak_precision, on_matmul=heartbeat)
    clock.lap("import_protocol")
    timeout = timedelta(seconds=job.init_timeout_s)
    # gloo for the barriers whatever the trial's backend: they carry no data, and gloo is always there
    dist.init_process_group("gloo", store=_rendezvous_store(timeout), rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout)
    clock.ready("rendezvous")   # every rank has joined the group: all of them are ready to multiply
    try:
        def barrier() -> None:
            dist.barrier()

        return gemm_peak(job.threads, job.peak_precision, barrier=barrier, on_matmul=heartbeat)
    finally:
        dist.destroy_process_group()


def _init_process_group(job: RankJob) -> None:
    import torch.distributed as dist

    if job.backend == "ccl":
        import oneccl_bindings_for_pytorch  # noqa: F401  (registers the ccl backend with torch.distributed)
    timeout = timedelta(seconds=job.init_timeout_s)
    dist.init_process_group(job.backend, store=_rendezvous_store(timeout), rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout)


def _allreduce(job: RankJob, status: ProgressWriter, clock: StartupClock) -> dict[str, Any]:
    """The all-reduce calibration: message sizes × repeats, timed on every rank."""
    import torch.distributed as dist

    from orchestrator.run.job import Phase
    from orchestrator.run.protocol import allreduce_timing

    clock.lap("import_protocol")
    _init_process_group(job)
    clock.lap("rendezvous")
    try:
        dist.barrier()
        clock.ready("barrier")
        status.update(phase=Phase.TIMING, force=True)
        out = allreduce_timing(job.message_bytes, job.peak_precision, on_block=lambda: status.step())
        dist.barrier()  # leave together (see _train)
        return out
    finally:
        dist.destroy_process_group()


def _train(job: RankJob, status: ProgressWriter, clock: StartupClock) -> dict[str, Any]:
    """Build the model in a process group and run the job's protocol: the result's training sections."""
    import torch.distributed as dist

    import workloads
    from orchestrator.run import ddp, protocol
    from orchestrator.run.job import JobKind
    from workloads.base import RankContext, ddp_options_of

    clock.lap("import_protocol")
    _init_process_group(job)
    clock.lap("rendezvous")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        workload = workloads.get(job.workload)
        params, problems = workloads.parse_params(workload, job.params)
        if problems:
            raise ValueError("; ".join(map(str, problems)))
        for module_name in workload.rank_modules:
            importlib.import_module(module_name)
        lr = None
        if job.kind == Kind.CONVERGENCE:
            from orchestrator.core.lr import learning_rate_at

            lr = learning_rate_at(job.convergence_section(), epoch=0.0)
        clock.lap("import_workload")
        built = time.perf_counter()
        trainer = workload.build(params, RankContext(rank=rank, world_size=world, local_batch=job.local_batch,
                                                     seed=job.seed, threads=job.threads, lr=lr))
        clock.lap("build")
        options = ddp_options_of(params)
        module = trainer.module
        if world > 1:
            module = protocol.wrap_ddp(module, options)
            clock.lap("ddp")
        out = {"build_s": time.perf_counter() - built,
               "applied": {**trainer.applied(), **ddp.applied(options, world_size=world)}}
        dist.barrier()  # start-up ends when every rank has its model
        clock.ready("barrier")
        if job.kind == Kind.THROUGHPUT:
            report = protocol.measure_throughput(job, trainer, module, status)
            out["throughput"] = {**report, **ddp.wire_sizes(report, options if world > 1 else None)}
        elif job.kind == JobKind.PROFILE:
            from orchestrator.run.profiling import profile_rank

            out["profile"] = profile_rank(job, trainer, module, status)
        else:
            out["convergence"] = protocol.train_to_target(job, trainer, module, status)
        dist.barrier()  # leave together: a rank tearing down gloo while its peer still talks to it aborts
        return out
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: gloo's and c10d's threads can abort ("terminate called without an active
    # exception") while static destructors run, after the result is already on disk.
    os._exit(code)
