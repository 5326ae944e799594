"""Run one trial's ranks on Ray: reserve their CPUs, start one pinned process per rank, supervise, and
release everything however it ends.

Each trial gets a placement group with one bundle per rank, each bundle pinned to the node the placement
chose (`ray.io/node-id` label selector), so Ray's accounting matches our pinning and two trials never
share cores. One `RankLauncher` actor per bundle starts and watches its rank process. The first rank to
fail stops the others; the trial's status names the root cause, not the echo of it in the other ranks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from orchestrator.run.cluster import Cluster
from orchestrator.run.job import RankJob
from orchestrator.run.launcher import Outcome, RankLauncher, rank_environment

RESERVE_TIMEOUT_S = 120.0
GRACE_AFTER_FAILURE_S = 2.0   # let the other ranks report their own end before stopping them
# How often the driver asks rank 0 for its phase, for the progress display. Each ask is an actor call on
# the machine being measured: at 0.5 s it cost ~3% of a 2-thread rank's throughput on a 2-core machine
# (benchmarks/bench_orch_vs_direct.py); at 2 s it is lost in the noise.
STATUS_POLL_S = 2.0

# Root-cause priority when several ranks end badly: a peer that lost its partner in a collective exits
# with an ordinary error, so a memory stop or a signal is the better explanation.
_PRIORITY = {"oom": 0, "signal": 1, "timeout": 2, "failed": 3, "peer_lost": 4, "stopped": 5, "ok": 6}
# What a rank's log says when it failed only because a peer vanished mid-collective.
_PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


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
    status: str
    reason: str | None
    outcomes: list[Outcome | None]
    ready_s: float | None = None     # reservation → every rank built its model
    wall_s: float = 0.0
    failing_rank: int | None = None
    node_ids: list[str] = field(default_factory=list)


def _cause(outcome: Outcome) -> int:
    # A rank that lost its peer mid-collective often aborts (SIGABRT from gloo's thread) right after the
    # peer died: its log says so, and that outranks the signal it died of.
    if outcome.status == "failed" and any(text in outcome.log_tail for text in _PEER_LOST):
        return _PRIORITY["peer_lost"]
    if outcome.status == "failed" and outcome.exit_code is not None and outcome.exit_code < 0:
        return _PRIORITY["signal"]
    return _PRIORITY[outcome.status]


def run_ranks(cluster: Cluster, ranks: list[RankSpec], job: RankJob, *, workdir: str, step_timeout_s: float,
              timeout_s: float, ccl_workers: int = 0,
              on_status: Callable[[dict | None], None] | None = None) -> TrialRun:
    started = time.time()
    deadline = started + timeout_s
    pg = placement_group([{"CPU": float(len(r.all_cpus))} for r in ranks], strategy="PACK",
                         bundle_label_selector=[{"ray.io/node-id": cluster.nodes[r.node].node_id} for r in ranks])
    launchers = []
    try:
        try:
            ray.get(pg.ready(), timeout=RESERVE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            return TrialRun("failed", f"Ray could not reserve the CPUs within {RESERVE_TIMEOUT_S:g} s (another job "
                                      "holds them, or the nodes have fewer CPUs than the topology says)",
                            [None] * len(ranks), wall_s=time.time() - started)
        actor = ray.remote(RankLauncher)
        for i, r in enumerate(ranks):
            launchers.append(actor.options(
                num_cpus=float(len(r.all_cpus)), max_concurrency=4,
                scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
            ).remote(f"{workdir}/rank{r.rank}"))
        infos = ray.get([launcher.node_info.remote() for launcher in launchers])
        port = ray.get(launchers[0].free_port.remote())
        ccl_by_node: dict[int, list[int]] = {}
        for r in sorted(ranks, key=lambda r: r.local_rank):
            ccl_by_node.setdefault(r.node, []).extend(r.ccl_cpus)
        local_sizes = {n: sum(1 for r in ranks if r.node == n) for n in {r.node for r in ranks}}
        starts = []
        for launcher, r in zip(launchers, ranks):
            env = rank_environment(_worker_env(), cpus=list(r.cpus), ccl_cpus_on_node=ccl_by_node[r.node],
                                   ccl_workers=ccl_workers, rank=r.rank, local_rank=r.local_rank,
                                   world_size=len(ranks), local_world_size=local_sizes[r.node],
                                   master_addr=infos[0]["ip"], master_port=port)
            starts.append(launcher.start.remote(job, env, r.all_cpus, list(r.numa_nodes)))
        ray.get(starts)
        return _supervise(launchers, ranks, started, deadline, step_timeout_s, on_status,
                          [info["node_id"] for info in infos])
    finally:
        for launcher in launchers:
            try:
                ray.get(launcher.cleanup.remote(), timeout=10)
            except Exception:  # an actor that already died has nothing left to clean
                pass
            ray.kill(launcher)
        remove_placement_group(pg)


def _worker_env() -> dict[str, str]:
    import os

    # Inherit the driver's environment (PATH, the venv, proxy settings) minus what would pin or size
    # the rank wrongly; rank_environment sets those.
    drop = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "KMP_AFFINITY", "RANK",
            "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("RAY_")}


def _supervise(launchers, ranks, started, deadline, step_timeout_s, on_status, node_ids) -> TrialRun:
    refs = {launcher.supervise.remote(budget_mib=r.budget_mib, step_timeout_s=step_timeout_s, deadline=deadline): i
            for i, (launcher, r) in enumerate(zip(launchers, ranks))}
    outcomes: list[Outcome | None] = [None] * len(ranks)
    ended: list[int] = []   # rank indices in the order they ended: the first to fail is the likeliest cause
    pending = list(refs)
    failed_at, polled_at = None, 0.0
    while pending:
        done, pending = ray.wait(pending, num_returns=1, timeout=0.5)
        for ref in done:
            i = refs[ref]
            try:
                outcomes[i] = ray.get(ref)
            except ray.exceptions.RayError as err:  # the launcher itself died (node lost, actor killed)
                outcomes[i] = Outcome("failed", f"the rank's launcher died: {type(err).__name__}", None, 0.0, None,
                                      "", None, "", 0)
            ended.append(i)
            if outcomes[i].status != "ok" and failed_at is None:
                failed_at = time.monotonic()
        if failed_at is not None and pending and time.monotonic() - failed_at > GRACE_AFTER_FAILURE_S:
            bad = min((o for o in outcomes if o and o.status != "ok"), key=_cause)
            for ref in pending:
                launchers[refs[ref]].stop.remote(f"stopped because another rank ended: {bad.reason}")
            failed_at = float("inf")  # stop only once
        if on_status is not None and pending and time.monotonic() - polled_at >= STATUS_POLL_S:
            polled_at = time.monotonic()
            try:
                on_status(ray.get(launchers[0].status.remote(), timeout=2))
            except Exception:
                on_status(None)
    wall = time.time() - started
    ready = [o.result.get("ready_at") for o in outcomes if o and o.result and o.result.get("ready_at")]
    ready_s = max(ready) - started if len(ready) == len(outcomes) else None
    bad = [(i, o) for i, o in enumerate(outcomes) if o is None or o.status != "ok"]
    if not bad:
        notes = "; ".join(f"rank {i}: {o.reason}" for i, o in enumerate(outcomes) if o.reason)
        return TrialRun("ok", notes or None, outcomes, ready_s, wall, None, node_ids)
    order = {rank: position for position, rank in enumerate(ended)}
    index, worst = min(bad, key=lambda io: (_cause(io[1]) if io[1] else 9, order.get(io[0], len(order))))
    status = "failed" if worst is None or worst.status == "stopped" else worst.status
    reason = f"rank {index}: {worst.reason if worst else 'no outcome'}"
    return TrialRun(status, reason, outcomes, ready_s, wall, index, node_ids)
