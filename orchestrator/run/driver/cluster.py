"""Connect to Ray and learn the machines: each node's topology is detected on that node itself.

With no address, an embedded local Ray is started: dashboard off, bound to loopback, no usage stats.
With an address (or RAY_ADDRESS), the sweep joins that cluster and uses its alive nodes.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, replace
from typing import Any, TypedDict

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from orchestrator.core.json.schema import InvalidInput, Problem
from orchestrator.core.machine.topology import Topology
from orchestrator.run.driver.reaper import reaped_on_driver_death

# Describing a node imports orch there and reads /sys: seconds normally; a node that takes longer is broken.
DISCOVER_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class RayNode:
    node_id: str
    ip: str
    hostname: str
    cpus: tuple[int, ...]        # CPUs the node's processes may use
    ccl_installed: bool
    topology: Topology           # detected there, one node
    ray_cpus: float = 0.0        # the node's Ray "CPU" resource (logical; may differ from len(cpus))


@dataclass(frozen=True, slots=True)
class Cluster:
    nodes: tuple[RayNode, ...]   # in topology order: the head node first


def connect(address: str | None) -> bool:
    """Start or join Ray; True when this call started or joined it (and so the caller must shut it down).

    An already-initialized Ray in this process (a test suite's shared instance, a notebook) is used as is.
    """
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    address = address or os.environ.get("RAY_ADDRESS")
    # Ray's own INFO/WARNING chatter (token setup, worker start) would tear through the progress display.
    common: dict[str, Any] = dict(log_to_driver=False, logging_level="ERROR", configure_logging=True)
    if address:
        _check_reachable(address)
        try:
            ray.init(address=address, **common)
        except ConnectionError as err:   # no GCS there, or not yet: a wrong address is the user's to fix
            raise InvalidInput(f"--address {address}", [Problem(
                "address", f"no Ray cluster answers there ({err}); start one with `ray start --head` "
                           f"or check the host and port that command printed")]) from None
    else:
        # Loopback-only serving is arranged by the caller before Ray is imported (RAY_LOOPBACK_ENV_VAR).
        # "local": a new instance even when another one on this machine (another user's `ray start`, a test's
        # cluster) is recorded in /tmp/ray/ray_current_cluster, which ray.init() would otherwise join.
        with reaped_on_driver_death():   # a SIGKILLed driver must not leave Ray's agents or ranks behind
            ray.init(address="local", include_dashboard=False, num_cpus=len(os.sched_getaffinity(0)), **common)
    return True


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail at once when the address is not one Ray can join (ray.init would raise from deep inside) or nothing
    listens at HOST:PORT (ray.init would retry for many minutes, printing warnings). 'auto', 'local' and ray://
    addresses are left to Ray."""
    host, sep, port = address.rpartition(":")
    if address in ("auto", "local") or "://" in address:
        return
    if not sep or not host or not port.isdigit():
        # Ray would raise a ValueError from deep inside ray.init: say what it takes instead
        raise InvalidInput(f"--address {address}", [Problem(
            "address", "not an address of a Ray cluster: give HOST:PORT (as `ray start --head` or `orch cluster up` "
                       "prints it, e.g. 10.77.0.1:6379), 'auto' (the cluster this machine joined) or ray://HOST:PORT")])
    err = _connect_error(address, timeout_s)
    if err is not None:
        raise InvalidInput(f"--address {address}", [Problem(
            "address", f"nothing answers at {host}:{port} ({err.strerror or err}): is Ray's head started there "
                       f"(`ray start --head --port {port}`)?")])


def _connect_error(address: str, timeout_s: float) -> OSError | None:
    """None when something accepts a TCP connection at HOST:PORT (an IPv6 host in brackets), else why not."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        return err
    return None


def head_answers(timeout_s: float = 2.0) -> bool:
    """Whether Ray's head (its GCS) still accepts a connection. A call that needs the head (removing a
    placement group) waits 60 s for a head that is gone before Ray ends the process: when a batch scheduler
    signals every process of a job at once, Ray dies under the sweep, and its clean-up must not wait for it."""
    return _connect_error(ray.get_runtime_context().gcs_address, timeout_s) is None


def wait_for_nodes(min_nodes: int, timeout_s: float, poll_s: float = 1.0) -> int:
    """Block until Ray has at least `min_nodes` alive nodes; their number. A job script starts Ray on every
    node and the sweep at once, and nodes join over seconds: planning earlier would see only some of them."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = sum(1 for n in ray.nodes() if n.get("Alive"))
        if alive >= min_nodes:
            return alive
        if time.monotonic() >= deadline:
            raise InvalidInput("--min-nodes", [Problem(
                "min_nodes", f"the Ray cluster has {alive} alive node(s) after {timeout_s:g} s, fewer than "
                             f"--min-nodes {min_nodes}: did `ray start` fail on some node? (its log is in the "
                             f"node's Ray temp dir, logs/raylet.err)")])
        time.sleep(poll_s)


class NodeInfo(TypedDict):
    """What `_describe_node` reads on its node."""

    hostname: str
    ip: str
    cpus: list[int]
    ccl: bool
    topology: Topology


@ray.remote(num_cpus=0)
def _describe_node() -> NodeInfo:
    from orchestrator.io.backends import ccl_import_problem
    from orchestrator.io.detect import detect_local, usable_cpus

    return {"hostname": socket.gethostname(), "ip": ray.util.get_node_ip_address(),
            "cpus": usable_cpus(), "ccl": ccl_import_problem() is None, "topology": detect_local(probe_isa=True)}


def discover() -> Cluster:
    """Every alive node, described by a task pinned to it. Head node first, then by address."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    alive.sort(key=lambda n: ("node:__internal_head__" not in n.get("Resources", {}), n["NodeManagerAddress"],
                              n["NodeID"]))
    refs = [_describe_node.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
            for n in alive]
    nodes = []
    for n, info in zip(alive, ray.get(refs, timeout=DISCOVER_TIMEOUT_S)):
        nodes.append(RayNode(n["NodeID"], info["ip"], info["hostname"], tuple(info["cpus"]), info["ccl"],
                             info["topology"], float(n.get("Resources", {}).get("CPU", 0.0))))
    return Cluster(tuple(nodes))


def detected_topology(cluster: Cluster) -> Topology:
    """The cluster as one topology; node names made unique (two Ray nodes on one host share a hostname)."""
    nodes = []
    for i, n in enumerate(cluster.nodes):
        node = n.topology.nodes[0]
        name = node.name if sum(1 for m in cluster.nodes if m.hostname == n.hostname) == 1 else f"{node.name}#{i}"
        nodes.append(replace(node, name=name))
    return Topology(tuple(nodes), source=f"detected on {len(nodes)} Ray node(s)")


def with_node_isa(topology: Topology, cluster: Cluster) -> Topology:
    """A topology file used to run: each node's CPU verdict from the Ray node it runs on (probed there), unless
    the file states one. The file describes the layout to emulate; what the CPU computes is the machine's."""
    return topology.with_unstated_isa([ray_node.topology.nodes[0].isa for ray_node in cluster.nodes])


def check_topology_fits(topology: Topology, cluster: Cluster, path: str) -> None:
    """A topology file used to *run* (not just plan) must name CPUs the Ray nodes really have."""
    problems = []
    if len(topology.nodes) > len(cluster.nodes):
        problems.append(Problem("nodes", f"the file describes {len(topology.nodes)} node(s) but Ray has "
                                         f"{len(cluster.nodes)} alive node(s)"))
    for i, (node, ray_node) in enumerate(zip(topology.nodes, cluster.nodes)):
        wanted = {cpu for s in node.sockets for c in s.cores for cpu in c.cpus}
        missing = sorted(wanted - set(ray_node.cpus))
        if missing:
            problems.append(Problem(f"nodes[{i}]", f"names CPU(s) {missing[:8]}{'…' if len(missing) > 8 else ''} "
                                                   f"that Ray node {ray_node.hostname} ({ray_node.ip}) cannot use; "
                                                   f"it has CPUs {list(ray_node.cpus)}"))
    if problems:
        raise InvalidInput(f"topology file {path} does not fit the machines it would run on", problems)
