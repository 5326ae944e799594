"""Rank-side pieces every kind's `run_rank` shares (run.rank's table): torch.distributed's rendezvous, and a
training session (the workload built in a process group, wrapped in DDP) for the kinds that train.

Runs inside the rank process: torch is imported on use, after run.rank.main has sized its thread pools.
"""

from __future__ import annotations

import importlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch.distributed import Store

    from orch.workload import DdpOptions, Trainer
    from orchestrator.core.json.jsonobject import JsonObject
    from orchestrator.core.measured.records import CommunicationSection
    from orchestrator.run.job import ProgressWriter, RankJob, RankOutput
    from orchestrator.run.rank.process import StartupClock


@dataclass(frozen=True, slots=True)
class Session:
    """A built training session: the workload's trainer, the module it steps (DDP-wrapped on more than one
    rank), its DDP options and the world size."""

    trainer: Trainer
    module: torch.nn.Module
    options: DdpOptions
    world: int


def rendezvous_store(timeout: timedelta, *, count_workers: bool = True) -> Store:
    """torch.distributed's TCPStore, with rank 0's listening socket bound to MASTER_ADDR only (torch's own
    binds every interface; on one machine MASTER_ADDR is loopback, so nothing listens beyond it). In a trial,
    rank 0's launcher reserved that socket when it chose the port, and passes it in (RENDEZVOUS_FD_ENV_VAR):
    the port was never free for another trial to take. Started by hand (tests), rank 0 binds it itself.
    `count_workers=False`: the store does not wait for every rank to connect (a script's ranks join it through
    torch's env:// rendezvous, each when it gets there)."""
    import torch.distributed as dist

    from orchestrator.constants import RENDEZVOUS_FD_ENV_VAR

    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    world = int(os.environ["WORLD_SIZE"]) if count_workers else None
    if int(os.environ["RANK"]) != 0:
        return dist.TCPStore(addr, port, world, False, timeout=timeout)
    reserved = os.environ.get(RENDEZVOUS_FD_ENV_VAR)
    if reserved:
        return dist.TCPStore(addr, port, world, True, timeout=timeout, wait_for_workers=count_workers,
                             master_listen_fd=int(reserved))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addr, port))
    listener.listen(max(128, int(os.environ["WORLD_SIZE"])))
    return dist.TCPStore(addr, port, world, True, timeout=timeout, wait_for_workers=count_workers,
                         master_listen_fd=listener.detach())


def init_process_group(job: RankJob, backend: str | None = None) -> None:
    """Join the job's process group, on its backend unless `backend` names another."""
    import torch.distributed as dist

    backend = backend or job.backend
    if backend == "ccl":
        import oneccl_bindings_for_pytorch  # noqa: F401  (registers the ccl backend with torch.distributed)
    timeout = timedelta(seconds=job.init_timeout_s)
    dist.init_process_group(backend, store=rendezvous_store(timeout), rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout)


def communication(job: RankJob) -> CommunicationSection:
    """The result's communication section: backend, version, CCL settings (run.comm)."""
    from orchestrator.core.measured.records import CommunicationSection
    from orchestrator.run.comm import communication_report

    return CommunicationSection.from_json(communication_report(job.backend))


def train(job: RankJob, progress: ProgressWriter, clock: StartupClock,
          steps: Callable[[Session], JsonObject], lr: float | None = None) -> RankOutput:
    """Build the workload in a process group and run `steps` on it (the kind's protocol, returning its report):
    the report with the result's training sections, its communication section included."""
    import torch.distributed as dist

    from orch.workload import RankContext, ddp_options_of
    from orchestrator.io.workload_finder import find_workload, parse_params
    from orchestrator.run.job import RankOutput
    from orchestrator.run.rank import ddp, protocol

    clock.lap("import_protocol")
    init_process_group(job)
    clock.lap("rendezvous")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        if job.workload is None:
            raise ValueError(f"a {job.kind} job names no workload: only a script's trial has none")
        workload = find_workload(job.workload).workload
        params, problems = parse_params(workload, job.params)
        if problems:
            raise ValueError("; ".join(map(str, problems)))
        for module_name in workload.rank_modules:
            importlib.import_module(module_name)
        clock.lap("import_workload")
        built = time.perf_counter()
        trainer = workload.build(params, RankContext(rank=rank, world_size=world, local_batch=job.local_batch,
                                                     seed=job.seed, threads=job.threads, lr=lr))
        clock.lap("build")
        options = ddp_options_of(params)
        module = trainer.module
        if world > 1:
            module = protocol.wrap_ddp(module, options, noise_scale=job.kind == "convergence")
            clock.lap("ddp")
        build_s = time.perf_counter() - built
        applied = {**trainer.applied(), **ddp.applied(options, world_size=world)}
        dist.barrier()  # start-up ends when every rank has its model
        clock.ready("barrier")
        report = steps(Session(trainer, module, options, world))
        dist.barrier()  # leave together: a rank tearing down gloo while its peer still talks to it aborts
    finally:
        dist.destroy_process_group()
    return RankOutput(report=report, communication=communication(job), build_s=build_s, applied=applied)
