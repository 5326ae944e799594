"""Run one trial's ranks on Ray: start one pinned process per rank, supervise, and release everything
however it ends.

A sweep holds its nodes through a `NodePool`: one launcher actor per node for the whole sweep (which starts
and watches every rank process on that node) and one reservation of the CPUs it may use, so that Ray's
accounting matches our pinning. Which cores each trial gets inside it is the sweep's rule
(orchestrator.core.schedule). A trial run on its own (a benchmark) reserves and releases its own. The
first rank to fail stops the others; the trial's status names the root cause, not the echo of it in the
other ranks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from orchestrator.core.rank_end import RankStatus, first_bad, root_cause
from orchestrator.core.records import Status
from orchestrator.run.cluster import Cluster
from orchestrator.run.job import RankJob
from orchestrator.run.launcher import NodeLaunchers, Outcome, rank_environment

RESERVE_TIMEOUT_S = 120.0
GRACE_AFTER_FAILURE_S = 2.0   # let the other ranks report their own end before stopping them
CLEANUP_CALL_TIMEOUT_S = 10.0  # a launcher that cannot clean up in this long is killed with its actor
STATUS_CALL_TIMEOUT_S = 2.0   # a status ask that takes longer shows "no status" rather than stall the loop
WAIT_POLL_S = 0.5             # how long the supervision loop waits for a rank's end before its other work
# How often the driver asks rank 0 for its phase, for the progress display. Each ask is an actor call on
# the machine being measured: at 0.5 s it cost ~3% of a 2-thread rank's throughput on a 2-core machine
# (benchmarks/bench_orch_vs_direct.py); at 2 s it is lost in the noise.
STATUS_POLL_S = 2.0


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


@dataclass(slots=True)
class TrialRun:
    status: str                      # a record status (core.records.Status)
    reason: str | None
    outcomes: list[Outcome | None]
    ready_s: float | None = None     # reservation → every rank built its model
    wall_s: float = 0.0
    failing_rank: int | None = None
    node_ids: list[str] = field(default_factory=list)
    interrupted: bool = False        # stopped by the driver (Ctrl-C): not a result, the trial is run again


class NodePool:
    """A sweep's hold on its Ray nodes: one `NodeLaunchers` actor per node, started on first use and kept for
    the whole sweep, and one reservation (a placement group, one bundle per node, pinned to it by the
    `ray.io/node-id` label) of the CPUs the sweep may use, so that Ray schedules nothing else on them while
    it runs. Which trial uses which cores inside the reservation is the sweep's own rule
    (orchestrator.core.schedule); reserving per trial instead cost about 1 s per trial (Ray frees a removed
    group's CPUs for the next one only after a delay). Thread-safe: trials start from several threads."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self._actors: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._pg: Any = None

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

    def launchers(self, node: int) -> Any:
        """The node's launcher actor (a Ray actor handle: its methods are called with .remote())."""
        with self._lock:
            if node not in self._actors:
                actor: Any = ray.remote(NodeLaunchers)
                cpus = max(1, len(self.cluster.nodes[node].cpus))
                self._actors[node] = actor.options(
                    num_cpus=0, max_concurrency=2 * cpus + 8,   # a supervising thread per rank, plus calls
                    scheduling_strategy=NodeAffinitySchedulingStrategy(self.cluster.nodes[node].node_id, soft=False),
                ).remote()
            return self._actors[node]

    def close(self) -> None:
        for actor in self._actors.values():
            ray.kill(actor)   # its rank processes notice their launcher is gone and exit
        self._actors.clear()
        if self._pg is not None:
            remove_placement_group(self._pg)
            self._pg = None


@dataclass(frozen=True, slots=True)
class _Rank:
    """One rank of a trial, as its node's launcher actor knows it."""

    actor: Any
    key: str

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.actor, method).remote(self.key, *args, **kwargs)


def run_ranks(cluster: Cluster, ranks: list[RankSpec], job: RankJob, *, workdir: str, step_timeout_s: float,
              timeout_s: float, ccl_workers: int = 0,
              on_status: Callable[[dict[str, Any] | None], None] | None = None,
              stop: threading.Event | None = None, pool: NodePool | None = None) -> TrialRun:
    """Run the ranks to their end. `stop`, when set (from another thread: the sweep's Ctrl-C), stops them
    and returns a run marked interrupted. `pool`: the sweep's nodes and reservation; without one, the trial
    reserves its own CPUs and starts its own launchers, and releases both at its end. `ccl_workers`: the
    cores per rank the plan reserved for oneCCL; a rank placed with worker cores must hold that many (the
    calibration's ranks hold none: their worker shares the rank's core, see `_environments`)."""
    wrong = [r.rank for r in ranks if r.ccl_cpus and len(r.ccl_cpus) != ccl_workers]
    if wrong:
        raise ValueError(f"ranks {wrong} do not hold the {ccl_workers} oneCCL worker core(s) per rank planned")
    started = time.time()
    stop = stop or threading.Event()
    own = pool is None
    pool = pool or NodePool(cluster)
    handles: list[_Rank] = []
    try:
        if own:
            cpus: dict[int, float] = {}
            for r in ranks:
                cpus[r.node] = cpus.get(r.node, 0.0) + len(r.all_cpus)
            problem = pool.reserve(cpus, stop)
            if problem is not None:
                return TrialRun(Status.FAILED, problem, [None] * len(ranks), wall_s=time.time() - started,
                                interrupted=stop.is_set())
        # A rank's key on its node is its work folder (NodeLaunchers.start makes it there).
        handles = [_Rank(pool.launchers(r.node), f"{workdir}/rank{r.rank}") for r in ranks]
        infos = ray.get([h.actor.node_info.remote() for h in handles])
        port = ray.get(handles[0].actor.free_port.remote())
        ray.get([h.call("start", job, env, r.all_cpus, list(r.numa_nodes))
                 for h, r, env in zip(handles, ranks, _environments(ranks, infos[0]["ip"], port, job.backend))])
        return _supervise(handles, ranks, started, started + timeout_s, step_timeout_s, on_status,
                          [info["node_id"] for info in infos], stop)
    finally:
        for handle in handles:
            try:
                ray.get(handle.call("cleanup"), timeout=CLEANUP_CALL_TIMEOUT_S)
            except Exception:  # an actor that already died has nothing left to clean
                pass
        if own:
            pool.close()


def _environments(ranks: list[RankSpec], master_addr: str, port: int, backend: str) -> list[dict[str, str]]:
    """Each rank's environment: its pinning, its place in the world, the rendezvous, and with ccl its
    oneCCL worker cores: the ones reserved for it (ccl_workers), or with ccl_workers 0 one worker on the
    rank's last compute core, shared (oneCCL always starts at least one worker thread)."""
    ccl_by_node: dict[int, list[int]] = {}
    for r in sorted(ranks, key=lambda r: r.local_rank):
        ccl_by_node.setdefault(r.node, []).extend(r.ccl_cpus or r.cpus[-1:])
    local_sizes = {n: sum(1 for r in ranks if r.node == n) for n in {r.node for r in ranks}}
    return [rank_environment(_worker_env(), cpus=list(r.cpus), ccl_cpus_on_node=ccl_by_node[r.node], backend=backend,
                             rank=r.rank, local_rank=r.local_rank, world_size=len(ranks),
                             local_world_size=local_sizes[r.node], master_addr=master_addr, master_port=port)
            for r in ranks]


def _reserved(pg: Any, stop: threading.Event) -> bool:
    """Wait for the placement group, in short slices so that `stop` is seen; False if it never came."""
    waited_until = time.monotonic() + RESERVE_TIMEOUT_S
    while not stop.is_set() and time.monotonic() < waited_until:
        try:
            ray.get(pg.ready(), timeout=WAIT_POLL_S)
            return True
        except ray.exceptions.GetTimeoutError:
            continue
    return False


def _worker_env() -> dict[str, str]:
    import os

    # Inherit the driver's environment (PATH, the venv, proxy settings) minus what would pin or size
    # the rank wrongly; rank_environment sets those.
    drop = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "KMP_AFFINITY", "RANK",
            "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("RAY_")}


def _supervise(handles: list[_Rank], ranks: list[RankSpec], started: float, deadline: float, step_timeout_s: float,
               on_status: Callable[[dict[str, Any] | None], None] | None, node_ids: list[str],
               stop: threading.Event) -> TrialRun:
    """Wait for every rank's end; once one ends badly, give the others a grace period to report their
    own end, then stop them. The trial's status and reason come from the root cause (core.rank_end)."""
    refs = {h.call("supervise", budget_mib=r.budget_mib, step_timeout_s=step_timeout_s, deadline=deadline): i
            for i, (h, r) in enumerate(zip(handles, ranks))}
    outcomes: list[Outcome | None] = [None] * len(ranks)
    ended: list[int] = []   # rank indices in the order they ended: the first to fail is the likeliest cause
    pending = list(refs)
    failed_at, polled_at = None, 0.0
    interrupted = False
    while pending:
        if stop.is_set() and not interrupted:
            interrupted = True
            for ref in pending:
                handles[refs[ref]].call("stop", "interrupted by the user (Ctrl-C)")
        done, pending = ray.wait(pending, num_returns=1, timeout=WAIT_POLL_S)
        for ref in done:
            i = refs[ref]
            outcomes[i] = outcome = _outcome_of(ref)
            ended.append(i)
            if outcome.status != RankStatus.OK and failed_at is None:
                failed_at = time.monotonic()
        if failed_at is not None and pending and time.monotonic() - failed_at > GRACE_AFTER_FAILURE_S:
            bad = first_bad(outcomes)
            for ref in pending:
                handles[refs[ref]].call("stop", f"stopped because another rank ended: {bad.reason if bad else None}")
            failed_at = float("inf")  # stop only once
        if on_status is not None and pending and time.monotonic() - polled_at >= STATUS_POLL_S:
            polled_at = time.monotonic()
            try:
                on_status(ray.get(handles[0].call("status"), timeout=STATUS_CALL_TIMEOUT_S))
            except Exception:  # a display detail must never end the trial
                on_status(None)
    wall = time.time() - started
    if interrupted:
        return TrialRun(Status.FAILED, "interrupted", outcomes, None, wall, None, node_ids, interrupted=True)
    ready = [o.result.ready_at for o in outcomes if o and o.result and o.result.ready_at]
    ready_s = max(ready) - started if len(ready) == len(outcomes) else None
    cause = root_cause(outcomes, ended)
    if cause is None:
        notes = "; ".join(f"rank {i}: {o.reason}" for i, o in enumerate(outcomes) if o and o.reason)
        return TrialRun(Status.OK, notes or None, outcomes, ready_s, wall, None, node_ids)
    index, status, reason = cause
    return TrialRun(status, reason, outcomes, ready_s, wall, index, node_ids)


def _outcome_of(ref: Any) -> Outcome:
    try:
        outcome: Outcome = ray.get(ref)
        return outcome
    except ray.exceptions.RayError as err:  # the launcher itself died (node lost, actor killed)
        return Outcome(RankStatus.FAILED, f"the rank's launcher died: {type(err).__name__}", None, 0.0, None, "",
                       None, "", 0)

