"""Run one trial's ranks on Ray: start one pinned process per rank, supervise them (run.driver.supervision, over
`RayRanks`), and release everything however it ends.

A sweep holds its nodes through a `NodePool`: one launcher actor per node for the whole sweep (which starts
and watches every rank process on that node) and one reservation of the CPUs it may use, so that Ray's
accounting matches our pinning. Which cores each trial gets inside it is the sweep's rule
(orchestrator.core.execution.schedule). A trial run on its own (a benchmark) reserves and releases its own. The
first rank to fail stops the others; the trial's status names the root cause, not the echo of it in the
other ranks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import ray
from ray import ObjectRef
from ray.actor import ActorHandle
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from orchestrator.core.measured.rank_end import RankStatus
from orchestrator.core.measured.records import Status
from orchestrator.errors import RunFailed
from orchestrator.run.driver.cluster import Cluster, head_answers
from orchestrator.run.driver.launcher import (
    NodeInfo,
    NodeLaunchers,
    Outcome,
    RankLimits,
    kept_names,
    passes_to_ranks,
    rank_environment,
)
from orchestrator.run.driver.supervision import Limits, TrialRun, supervise
from orchestrator.run.job import RankJob, RankProgress

RESERVE_TIMEOUT_S = 120.0
CLEANUP_CALL_TIMEOUT_S = 10.0  # a launcher that cannot clean up in this long is killed with its actor
STATUS_CALL_TIMEOUT_S = 2.0   # a progress ask that takes longer shows "no status" rather than stall the loop
RESERVE_POLL_S = 0.5          # how long a wait for the reservation lasts before `stop` is looked at again


@dataclass(frozen=True, slots=True)
class RankSpec:
    rank: int
    local_rank: int
    node: int                       # index into Cluster.nodes
    cpus: tuple[int, ...]
    ccl_cpus: tuple[int, ...]
    numa_nodes: tuple[int, ...]
    budget_mib: float

    @property
    def all_cpus(self) -> list[int]:
        """Compute cores and oneCCL worker cores: what the rank is pinned to and what Ray reserves for it."""
        return [*self.cpus, *self.ccl_cpus]


class RankNotStarted(RunFailed):
    """A rank of a trial could not be started: the message names the rank, its node and the cause."""


def _cause(err: Exception) -> str:
    """The first line of what went wrong in a remote call: the launcher's own exception where Ray carries it."""
    cause = getattr(err, "cause", None) or err
    text = next((line.strip() for line in str(cause).splitlines() if line.strip()), "")
    return f"{type(cause).__name__}: {text[:300]}"


class NodePool:
    """A sweep's hold on its Ray nodes: one `NodeLaunchers` actor per node, started on first use and kept for
    the whole sweep, and one reservation (a placement group, one bundle per node, pinned to it by the
    `ray.io/node-id` label) of the CPUs the sweep may use, so that Ray schedules nothing else on them while
    it runs. Which trial uses which cores inside the reservation is the sweep's own rule
    (orchestrator.core.execution.schedule); reserving per trial instead cost about 1 s per trial (Ray frees a removed
    group's CPUs for the next one only after a delay). Thread-safe: trials start from several threads."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self._actors: dict[int, ActorHandle] = {}
        self._lock = threading.Lock()
        self._pg: PlacementGroup | None = None

    def reserve(self, cpus_per_node: dict[int, float], stop: threading.Event) -> str | None:
        """Reserve CPUs on nodes (index into cluster.nodes); None when held, else why it could not be."""
        nodes = sorted(n for n, cpus in cpus_per_node.items() if cpus > 0)
        self._pg = placement_group([{"CPU": cpus_per_node[n]} for n in nodes], strategy="PACK",
                                   bundle_label_selector=[{"ray.io/node-id": self.cluster.nodes[n].node_id}
                                                          for n in nodes])
        if _reserved(self._pg, stop):
            return None
        if stop.is_set():
            return "interrupted"
        return (f"Ray could not reserve the CPUs within {RESERVE_TIMEOUT_S:g} s (another job holds them, or the "
                "nodes have fewer CPUs than the topology says)")

    def launchers(self, node: int) -> ActorHandle:
        """The node's launcher actor (a Ray actor handle: its methods are called with .remote())."""
        with self._lock:
            if node not in self._actors:
                cpus = max(1, len(self.cluster.nodes[node].cpus))
                self._actors[node] = cast(ActorHandle, ray.remote(NodeLaunchers).options(   # Ray types it loosely
                    num_cpus=0, max_concurrency=2 * cpus + 8,   # a supervising thread per rank, plus calls
                    scheduling_strategy=NodeAffinitySchedulingStrategy(self.cluster.nodes[node].node_id, soft=False),
                ).remote())
            return self._actors[node]

    def close(self) -> None:
        for actor in self._actors.values():
            ray.kill(actor)   # its rank processes notice their launcher is gone and exit
        self._actors.clear()
        if self._pg is not None:
            if head_answers():   # a placement group lives in the head: gone with it, nothing left to remove
                remove_placement_group(self._pg)
            self._pg = None


@dataclass(frozen=True, slots=True)
class _Rank:
    """One rank of a trial, as its node's launcher actor knows it."""

    actor: ActorHandle
    key: str

    def call(self, method: str, *args: object, **kwargs: object) -> ObjectRef:
        ref: ObjectRef = getattr(self.actor, method).remote(self.key, *args, **kwargs)
        return ref


class RayRanks:
    """A trial's ranks on their nodes' launcher actors (`NodePool.launchers`): the `RankHost` of a sweep
    (run.driver.supervision). A rank's key on its node is its work folder (NodeLaunchers.start makes it there)."""

    def __init__(self, pool: NodePool, ranks: list[RankSpec], workdir: str):
        self.ranks = ranks
        self.handles = [_Rank(pool.launchers(r.node), f"{workdir}/rank{r.rank}") for r in ranks]
        self.node_ids: list[str] = []

    def node_infos(self) -> list[NodeInfo]:
        """Where each rank's launcher runs (launcher.node_info)."""
        infos: list[NodeInfo] = ray.get([h.actor.node_info.remote() for h in self.handles])
        self.node_ids = [info["node_id"] or "" for info in infos]   # under Ray, every node has its id
        return infos

    def rendezvous_port(self, master_addr: str) -> int:
        """A port on rank 0's node for torch.distributed's rendezvous, held by rank 0's launcher (listening)
        until rank 0 takes it over: two trials starting at once cannot be given the same one."""
        port: int = ray.get(self.handles[0].call("reserve_rendezvous", master_addr))
        return port

    def start(self, job: RankJob) -> None:
        """Start every rank process, pinned, with its environment (the rendezvous at rank 0's node). RankNotStarted
        names the first rank that could not start, its node and the cause (its sweep file's folder missing on
        that node, a full /tmp, a work folder another user could change, its launcher gone)."""
        try:
            infos = self.node_infos()
            master_addr = infos[0]["ip"]
            port = self.rendezvous_port(master_addr)
        except ray.exceptions.RayError as err:
            raise RankNotStarted(f"the ranks' launchers could not be reached: {_cause(err)}") from None
        envs = _environments(self.ranks, master_addr, port, job.backend, [info.get("ifname") for info in infos])
        started = [h.call("start", job, env, r.all_cpus, list(r.numa_nodes))
                   for h, r, env in zip(self.handles, self.ranks, envs)]
        failed: list[str] = []
        for r, info, ref in zip(self.ranks, infos, started):   # every call waited for: none left running unseen
            try:
                ray.get(ref)
            except ray.exceptions.RayError as err:
                failed.append(f"rank {r.rank} could not start on node {info.get('hostname')} ({info.get('ip')}): "
                              f"{_cause(err)}")
        if failed:
            raise RankNotStarted(failed[0] + (f" (and {len(failed) - 1} more rank(s))" if len(failed) > 1 else ""))

    def supervise(self, index: int, limits: RankLimits) -> ObjectRef:
        return self.handles[index].call("supervise", limits)

    def wait(self, pending: list[ObjectRef], timeout_s: float) -> tuple[list[ObjectRef], list[ObjectRef]]:
        done, left = ray.wait(pending, num_returns=1, timeout=timeout_s)
        return done, left

    def outcome(self, end: ObjectRef) -> Outcome:
        try:
            outcome: Outcome = ray.get(end)
            return outcome
        except ray.exceptions.RayError as err:  # the launcher itself died (node lost, actor killed)
            return Outcome(RankStatus.FAILED, f"the rank's launcher died: {type(err).__name__}", None, 0.0, None, "",
                           None, "", 0)

    def stop(self, index: int, reason: str) -> None:
        self.handles[index].call("stop", reason)

    def progress(self, index: int) -> RankProgress | None:
        progress: RankProgress | None = ray.get(self.handles[index].call("progress"), timeout=STATUS_CALL_TIMEOUT_S)
        return progress

    def cleanup(self) -> None:
        """Kill what is left of each rank and remove its work folder."""
        for handle in self.handles:
            try:
                ray.get(handle.call("cleanup"), timeout=CLEANUP_CALL_TIMEOUT_S)
            except Exception:  # an actor that already died has nothing left to clean
                pass


def run_ranks(cluster: Cluster, ranks: list[RankSpec], job: RankJob, *, workdir: str, step_timeout_s: float,
              startup_timeout_s: float, timeout_s: float, ccl_workers: int = 0,
              on_status: Callable[[RankProgress | None], None] | None = None,
              stop: threading.Event | None = None, pool: NodePool | None = None) -> TrialRun:
    """Run the ranks to their end. `stop`, when set (from another thread: the sweep's Ctrl-C), stops them
    and returns a run marked interrupted. `pool`: the sweep's nodes and reservation; without one, the trial
    reserves its own CPUs and starts its own launchers, and releases both at its end. `ccl_workers`: the
    cores per rank the plan reserved for oneCCL; a rank placed with worker cores must hold that many (the
    calibration's ranks hold none: their worker shares the rank's core, see `_environments`). `on_status`
    is shown rank 0's progress now and then."""
    wrong = [r.rank for r in ranks if r.ccl_cpus and len(r.ccl_cpus) != ccl_workers]
    if wrong:
        raise ValueError(f"ranks {wrong} do not hold the {ccl_workers} oneCCL worker core(s) per rank planned")
    started = time.time()
    stop = stop or threading.Event()
    own = pool is None
    pool = pool or NodePool(cluster)
    host: RayRanks | None = None
    try:
        if own:
            problem = pool.reserve(trial_cpus(ranks), stop)
            if problem is not None:
                return TrialRun(Status.FAILED, problem, [None] * len(ranks), wall_s=time.time() - started,
                                interrupted=stop.is_set())
        host = RayRanks(pool, ranks, workdir)
        try:
            host.start(job)
        except RankNotStarted as err:   # the trial's failure, not the sweep's: its record names node and cause
            return TrialRun(Status.FAILED, str(err), [None] * len(ranks), wall_s=time.time() - started,
                            interrupted=stop.is_set())
        limits = Limits([r.budget_mib for r in ranks], step_timeout_s, started + timeout_s, startup_timeout_s)
        return supervise(host, limits, started, stop=stop, on_progress=on_status, node_ids=host.node_ids)
    finally:
        if host is not None:
            host.cleanup()
        if own:
            pool.close()


def trial_cpus(ranks: list[RankSpec]) -> dict[int, float]:
    """The CPUs a trial on its own reserves on each node (index into cluster.nodes)."""
    cpus: dict[int, float] = {}
    for r in ranks:
        cpus[r.node] = cpus.get(r.node, 0.0) + len(r.all_cpus)
    return cpus


def _environments(ranks: list[RankSpec], master_addr: str, port: int, backend: str,
                  ifnames: list[str | None] | None = None) -> list[dict[str, str]]:
    """Each rank's environment: its pinning, its place in the world, the rendezvous, the interface its
    collectives bind to (`ifnames`, per rank: the one carrying its Ray node's address), and with ccl its
    oneCCL worker cores: the ones reserved for it (ccl_workers), or with ccl_workers 0 one worker on the
    rank's last compute core, shared (oneCCL always starts at least one worker thread)."""
    ccl_by_node: dict[int, list[int]] = {}
    for r in sorted(ranks, key=lambda r: r.local_rank):
        ccl_by_node.setdefault(r.node, []).extend(r.ccl_cpus or r.cpus[-1:])
    local_sizes = {n: sum(1 for r in ranks if r.node == n) for n in {r.node for r in ranks}}
    return [rank_environment(_worker_env(), cpus=list(r.cpus), ccl_cpus_on_node=ccl_by_node[r.node], backend=backend,
                             rank=r.rank, local_rank=r.local_rank, world_size=len(ranks),
                             local_world_size=local_sizes[r.node], master_addr=master_addr, master_port=port,
                             ifname=ifname)
            for r, ifname in zip(ranks, ifnames or [None] * len(ranks))]


def _reserved(pg: PlacementGroup, stop: threading.Event) -> bool:
    """Wait for the placement group, in short slices so that `stop` is seen; False if it never came."""
    waited_until = time.monotonic() + RESERVE_TIMEOUT_S
    while not stop.is_set() and time.monotonic() < waited_until:
        try:
            ray.get(pg.ready(), timeout=RESERVE_POLL_S)
            return True
        except ray.exceptions.GetTimeoutError:
            continue
    return False


def _worker_env() -> dict[str, str]:
    import os

    # Inherit the driver's environment (PATH, the venv, proxy settings) minus what would pin or size
    # the rank wrongly (rank_environment sets those) and its secrets (`passes_to_ranks`).
    drop = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "KMP_AFFINITY", "RANK",
            "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}
    keep = kept_names()
    return {k: v for k, v in os.environ.items()
            if k not in drop and not k.startswith("RAY_") and passes_to_ranks(k, keep)}

