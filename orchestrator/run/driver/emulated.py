"""An emulated cluster brought up and down: the plan (`orchestrator.core.machine.emulation`) made with `ip` and `tc`
(`orchestrator.io.netns`), a real Ray node started in each namespace, pinned to its cores, each link measured by
a bulk transfer, and everything removed again. `orch cluster` is a thin layer over this.

One owner: the process that brings a cluster up records everything in the cluster's state file before it makes
it, marks each namespace with itself (`OwnerMark`), and removes it all on the way out (its end, Ctrl-C,
SIGTERM). After a SIGKILL, `down` removes what the file lists, and any namespace named like the cluster's that no
file lists; a cluster whose owner lives (or that was detached) it leaves, unless asked by name or for all.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from orchestrator.constants import EMBEDDED_RAY_ENV
from orchestrator.core.machine.emulation import (
    BRIDGE,
    NODE_IFNAME,
    ClusterPlan,
    ClusterRequest,
    CommandEnd,
    LinkMeasure,
    Owner,
    OwnerMark,
    OwnerState,
    cluster_of,
    kept_by_down,
    link_words,
    owner_of,
    plan_cluster,
    shapers,
    transfer_bytes,
    transfer_pairs,
)
from orchestrator.errors import RunFailed
from orchestrator.io import netns
from orchestrator.io.detect import detect_local

log = logging.getLogger(__name__)

RAY_START_TIMEOUT_S = 180.0       # one `ray start` on a loaded 2-vCPU machine took 18-27 s
OBJECT_STORE_BYTES = 200 * 2**20  # orch moves small objects only; Ray's default takes 30% of memory per node
TEMP_ROOT = Path("/tmp")          # short: Ray's socket paths under a node's temp dir must stay under 108 bytes


class ClusterError(RunFailed):
    """The cluster could not be brought up (said in words; what was made is removed)."""


@dataclass(frozen=True, slots=True)
class Running:
    """A cluster that is up: its plan, its state file, what the links measured and whether latency applied."""

    plan: ClusterPlan
    state: netns.ClusterState
    measured: tuple[LinkMeasure, ...]
    latency_applied: bool

    def driver_env(self) -> dict[str, str]:
        return ray_auth_env(self.state.token)


def ray_auth_env(token: str) -> dict[str, str]:
    """What joins this cluster's Ray: its own token (token authentication, as the SLURM recipe does)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "RAY_USAGE_STATS_ENABLED": "0"}


def usable_cores() -> list[tuple[int, ...]]:
    """This process's usable physical cores, socket by socket, each with its hardware threads."""
    node = detect_local().nodes[0]
    allowed = os.sched_getaffinity(0)
    return [cpus for socket in node.sockets for core in socket.cores
            if (cpus := tuple(c for c in core.cpus if c in allowed))]


def ray_command() -> str:
    """The `ray` of this interpreter's environment."""
    path = Path(sys.executable).parent / "ray"
    if not path.exists():
        raise ClusterError(f"no `ray` beside {sys.executable}: install orch's environment (scripts/setup.sh)")
    return str(path)


def up(request: ClusterRequest, *, detached: bool = False) -> Running:
    """Make the namespaces, links and shapers, start Ray in each, measure each link. On any failure what was made
    is removed and ClusterError says why."""
    plan = plan_cluster(request, usable_cores())
    state = _claim(request.name, detached)
    try:
        latency_applied = _make_network(plan, state)
        _start_ray(plan, state)
        measured = tuple(measure_links(plan))
        state.measured = [asdict(m) for m in measured]
        state.save()
        return Running(plan, state, measured, latency_applied)
    except BaseException:
        remove(state)
        raise


def _claim(name: str, detached: bool) -> netns.ClusterState:
    """The state file of a new cluster `name`; leftovers of a gone owner of the same name are removed first, and a
    cluster of that name with a live, detached or unknown owner is refused."""
    for old in survey(name):
        if old.owner.state is not OwnerState.GONE:
            raise ClusterError(f"cluster {name!r} is up already ({old.owner.words()}): `orch cluster down --name "
                               f"{name}` first, or choose another --name")
        log.warning("cluster %r: removing what an earlier run left (%s)", name, old.owner.words())
        _remove_found(old)
    pid, started = netns.owner_identity()
    state = netns.ClusterState(name, pid, started, token=secrets.token_hex(32), detached=detached,
                               temp_dir=str(TEMP_ROOT / f"orch-cluster-{name}"))
    state.save()
    return state


def _make_network(plan: ClusterPlan, state: netns.ClusterState) -> bool:
    """Namespaces, the bridge, a veth per node and the shapers; whether the latency could be applied."""
    state.link, state.head_address = link_words(plan.request, latency_applied=False), plan.head_address
    state.nodes = [{"index": n.index, "namespace": n.namespace, "address": n.address, "cpus": list(n.cpus)}
                   for n in plan.nodes]
    for namespace in (plan.switch_namespace, *(n.namespace for n in plan.nodes)):
        state.namespaces.append(namespace)
        state.save()
        netns.add_namespace(namespace, state.mark())
    netns.add_bridge(plan.switch_namespace, BRIDGE)
    for node in plan.nodes:
        state.links.append(f"{plan.switch_namespace}:{node.switch_ifname}={node.namespace}:{NODE_IFNAME}")
        state.save()
        netns.add_node_link(plan.switch_namespace, BRIDGE, node.switch_ifname, node.namespace, NODE_IFNAME,
                            node.address, node.prefix_len)
    with_netem = plan.request.latency_s > 0 and netns.netem_available(plan.head.namespace, NODE_IFNAME)
    if plan.request.latency_s > 0 and not with_netem:
        log.warning("this kernel has no netem (CONFIG_NET_SCH_NETEM): the latency of %g ms is not applied; the "
                    "rate is", plan.request.latency_s * 1e3)
    for shaper in shapers(plan, with_netem):
        for qdisc in shaper.qdiscs:
            state.qdiscs.append(f"{shaper.namespace}:{shaper.device}: {' '.join(qdisc)}")
            state.save()
            netns.add_qdisc(shaper.namespace, shaper.device, qdisc)
    state.link = link_words(plan.request, latency_applied=with_netem)
    state.save()
    return with_netem


def _ray_start_argv(plan: ClusterPlan, index: int, temp_dir: Path) -> list[str]:
    node = plan.nodes[index]
    role = (["--head", f"--port={plan.request.ray_port}", "--include-dashboard=false"] if node.is_head
            else [f"--address={plan.head_address}"])
    cpus = ",".join(map(str, node.cpus))
    return netns.in_namespace(node.namespace, [
        "taskset", "-c", cpus, ray_command(), "start", *role, f"--node-ip-address={node.address}",
        f"--num-cpus={len(node.cpus)}", f"--temp-dir={temp_dir / f'n{index}'}", "--disable-usage-stats",
        f"--object-store-memory={OBJECT_STORE_BYTES}", f"--labels=orch-emulated-node=n{index}"])


def _ray_env(token: str) -> dict[str, str]:
    """A Ray node's environment: this one without another cluster's address, with the embedded Ray's quiet
    settings (it shares the cores it measures) and the cluster's token."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    return {**env, **EMBEDDED_RAY_ENV, **ray_auth_env(token)}


def _start_ray(plan: ClusterPlan, state: netns.ClusterState) -> None:
    """The head first, then every worker at once; each `ray start` returns once its node runs."""
    temp_dir = Path(state.temp_dir)
    temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = _ray_env(state.token)
    _wait_started([_popen(_ray_start_argv(plan, 0, temp_dir), env, state)], plan, [0])
    workers = [_popen(_ray_start_argv(plan, i, temp_dir), env, state) for i in range(1, len(plan.nodes))]
    _wait_started(workers, plan, list(range(1, len(plan.nodes))))


def _popen(argv: list[str], env: dict[str, str], state: netns.ClusterState) -> subprocess.Popen[str]:
    # A session of its own: Ctrl-C in the terminal reaches the owner, which stops the nodes in order.
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    state.processes.append(proc.pid)
    state.save()
    return proc


def _wait_started(procs: Sequence[subprocess.Popen[str]], plan: ClusterPlan, indices: Sequence[int]) -> None:
    for proc, index in zip(procs, indices):
        try:
            output, _ = proc.communicate(timeout=RAY_START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise ClusterError(f"`ray start` of node {index} did not return in {RAY_START_TIMEOUT_S:g} s") from None
        if proc.returncode != 0:
            tail = "\n".join(output.strip().splitlines()[-8:])
            raise ClusterError(f"`ray start` of node {index} ({plan.nodes[index].namespace}) failed "
                               f"({proc.returncode}):\n{tail}")


def measure_links(plan: ClusterPlan) -> Iterator[LinkMeasure]:
    """One bulk transfer per link and direction (each node to the next), about a second each at the rate."""
    nbytes = transfer_bytes(plan.request.rate_bits_per_s)
    for sender, receiver in transfer_pairs(len(plan.nodes)):
        a, b = plan.nodes[sender], plan.nodes[receiver]
        seconds = netns.bulk_transfer(a.namespace, b.namespace, b.address, nbytes)
        yield LinkMeasure(sender, receiver, nbytes, seconds)


@dataclass(frozen=True, slots=True)
class Found:
    """One emulated cluster on this machine: its state file in this folder (if any), its namespaces that exist
    now, and its owner as the file and the namespaces' marks say."""

    name: str
    state: netns.ClusterState | None
    namespaces: tuple[str, ...]     # those that exist, whether a state file lists them or not
    owner: Owner


def survey(name: str | None = None) -> list[Found]:
    """Every emulated cluster (or the one named) that has a state file here or a namespace on this machine."""
    states = {s.name: s for s in netns.saved_states() if name is None or s.name == name}
    existing: dict[str, list[str]] = {}
    for namespace in netns.cluster_namespaces(name):
        existing.setdefault(cluster_of(namespace) or "", []).append(namespace)
    found = []
    for cluster in sorted(set(states) | set(existing)):
        state, namespaces = states.get(cluster), tuple(existing.get(cluster, ()))
        marks = [m for ns in namespaces if (m := netns.owner_mark(ns)) is not None]
        claims = [_judged(m) for m in ([state.mark()] if state else []) + marks]
        found.append(Found(cluster, state, namespaces, owner_of(claims)))
    return found


def _judged(mark: OwnerMark) -> Owner:
    if mark.detached:
        return Owner(OwnerState.DETACHED, mark.pid)
    alive = netns.process_alive(mark.pid, mark.started)
    return Owner(OwnerState.ALIVE if alive else OwnerState.GONE, mark.pid)


@dataclass(frozen=True, slots=True)
class Teardown:
    """What `down` removed and what it left alone, each in words."""

    removed: tuple[str, ...]
    kept: tuple[str, ...]


def down(*, name: str | None = None, every: bool = False) -> Teardown:
    """Remove the emulated clusters whose owner is gone (a killed `up`'s leftovers, namespaces no state file lists
    and no live owner marked); with `name`, that cluster whatever its owner; with `every`, all of them. A
    cluster left alone is said, with its owner."""
    removed: list[str] = []
    kept: list[str] = []
    for found in survey(name):
        reason = kept_by_down(found.name, found.owner, by_name=name is not None, every=every)
        if reason is None:
            removed += _remove_found(found)
        else:
            kept.append(reason)
    return Teardown(tuple(removed), tuple(kept))


def remove(state: netns.ClusterState) -> list[str]:
    """Remove one cluster as its state lists it: its nodes' processes, namespaces, temp dir and state file. What
    was removed, in words."""
    existing = set(netns.namespaces())
    return _remove(state, [ns for ns in reversed(state.namespaces) if ns in existing])


def _remove_found(found: Found) -> list[str]:
    listed = list(reversed(found.state.namespaces)) if found.state else []
    return _remove(found.state, [ns for ns in listed if ns in found.namespaces]
                   + [ns for ns in found.namespaces if ns not in listed])


def _remove(state: netns.ClusterState | None, namespaces: list[str]) -> list[str]:
    """The processes in each namespace stopped (all of them first), then the namespaces deleted, then the state's
    temp dir and file."""
    removed = []
    for namespace in namespaces:
        if (count := netns.stop_processes(namespace)) > 0:
            removed.append(f"{count} process(es) in {namespace}")
    for namespace in namespaces:
        netns.delete_namespace(namespace)
        unlisted = state is None or namespace not in state.namespaces
        removed.append(f"namespace {namespace}" + (" (listed in no state file)" if unlisted else ""))
    if state is not None:
        if state.temp_dir and Path(state.temp_dir).is_dir():
            shutil.rmtree(state.temp_dir, ignore_errors=True)
            removed.append(f"temp dir {state.temp_dir}")
        state.path.unlink(missing_ok=True)
    return removed


@contextmanager
def torn_down_on_signals(running: Running) -> Iterator[None]:
    """Inside: SIGTERM and SIGHUP end the owner as Ctrl-C does (KeyboardInterrupt); on the way out, whatever the
    reason, the cluster is removed."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        remove(running.state)


def run_in_head(running: Running | netns.ClusterState, argv: Sequence[str]) -> CommandEnd:
    """Run a command in the head's namespace with the cluster's token, to its end; how it ended. SIGTERM to the
    owner is passed on to it (orch sweep stops as on Ctrl-C); Ctrl-C reaches it from the terminal."""
    state = running.state if isinstance(running, Running) else running
    head = state.nodes[0]["namespace"]
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **ray_auth_env(state.token)}
    proc = subprocess.Popen(netns.in_namespace(head, list(argv)), env=env)
    forwarded: list[int] = []

    def forward(signum: int, frame: object) -> None:
        forwarded.append(signum)
        proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGHUP)}
    old_int = signal.signal(signal.SIGINT, lambda signum, frame: None)   # the terminal sent it to both
    try:
        while True:
            try:
                return CommandEnd(proc.wait(), tuple(forwarded))
            except InterruptedError:
                continue
    finally:
        signal.signal(signal.SIGINT, old_int)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_for_signal() -> None:
    """Block until Ctrl-C, SIGTERM or SIGHUP (each a KeyboardInterrupt inside `torn_down_on_signals`)."""
    while True:
        time.sleep(3600)
