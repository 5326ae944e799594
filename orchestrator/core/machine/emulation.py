"""A cluster emulated on one machine, as a plan: which network namespaces, addresses, cores, links and shapers
`orch cluster up` makes, in what order, and how each is undone. Pure: `orchestrator.io.netns` runs the commands,
`orchestrator.run.driver.emulated` starts the Ray nodes and measures the links.

The shape (Mininet's, with the kernel's own parts)::

    namespace orch-NAME-sw:  bridge br0 ── n0 ── n1 ── … (the switch side of each node's veth)
    namespace orch-NAME-n0:  orch0 10.77.0.1/24 (the head), cores 0..C-1, a Ray head
    namespace orch-NAME-n1:  orch0 10.77.0.2/24, cores C..2C-1, a Ray worker
    …

Nothing is made in the host's namespace: the bridge lives in a namespace of its own, so every address, link
and qdisc is inside a namespace orch made, and deleting the namespaces removes all of them. Each node's link is
a full-duplex port of `rate`: a token bucket (tbf) on both ends of its veth, so a node sends and receives at
most `rate` (the switch-side shaper is the port's egress towards the node). A latency, where the kernel has
netem, is half on each end: one-way node-to-node latency is the stated one.

>>> plan = plan_cluster(ClusterRequest(nodes=2, cores_per_node=1, rate_bits_per_s=1e9),
...                     [(0,), (1,)])
>>> [(n.namespace, n.address, n.cpus) for n in plan.nodes]
[('orch-c-n0', '10.77.0.1', (0,)), ('orch-c-n1', '10.77.0.2', (1,))]
>>> plan.head_address
'10.77.0.1:6379'
>>> " ".join(tbf_args(1e9))
'tbf rate 1000000000bit burst 125000 latency 50ms'
"""

from __future__ import annotations

import enum
import ipaddress
import math
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import InputError

NAMESPACE_PREFIX = "orch-"
SWITCH = "sw"
BRIDGE = "br0"
NODE_IFNAME = "orch0"           # the node's end of its veth, inside its own namespace
DEFAULT_NAME = "c"
DEFAULT_SUBNET = "10.77.0.0/24"
DEFAULT_RAY_PORT = 6379
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]{0,7}")
MAX_NODES = 64
# tc's own units of rate, in bits per second (tc reads "mbit" as 10^6 bits/s; its "mbps" means bytes, so bytes
# are refused here rather than risk the factor 8).
# The token bucket: a burst of 1 ms at the rate (at least 64 KiB: a veth passes 64 KiB GSO segments whole, and a
# smaller bucket drops them) and a queue of 50 ms beyond it, so a bulk transfer sees the rate, not drops.
BURST_S = 1e-3
MIN_BURST_BYTES = 64 * 1024
QUEUE_LATENCY_MS = 50


def rate_words(bits_per_s: float) -> str:
    """A rate in the largest unit that keeps it at or above 1.

    >>> rate_words(25e9), rate_words(2e8), rate_words(1.5e9)
    ('25 Gbit/s', '200 Mbit/s', '1.5 Gbit/s')
    """
    for unit, scale in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_s >= scale:
            return f"{bits_per_s / scale:.4g} {unit}"
    return f"{bits_per_s:.4g} bit/s"


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterRequest:
    """What `orch cluster up` is asked for."""

    nodes: int
    """Ray nodes, each a network namespace; the first is the head."""
    cores_per_node: int
    """Physical cores per node (each with its hardware threads), disjoint unless `share_cores`."""
    rate_bits_per_s: float | None = None
    """Each node's link, both ways; None: unshaped (what the veth gives)."""
    latency_s: float = 0.0
    """One-way node-to-node latency, added with netem where the kernel has it."""
    name: str = DEFAULT_NAME
    """The cluster's name: its namespaces are orch-NAME-*, its state file NAME.json."""
    subnet: str = DEFAULT_SUBNET
    """The private IPv4 network of the nodes' addresses (the head takes the first host address)."""
    ray_port: int = DEFAULT_RAY_PORT
    """The head's GCS port."""
    share_cores: bool = False
    """Let nodes share cores when there are too few: for an all-reduce on a slow link, never for throughput."""

    def __post_init__(self) -> None:
        errors = []
        if not 1 <= self.nodes <= MAX_NODES:
            errors.append(f"nodes({self.nodes}) must be 1..{MAX_NODES}")
        if self.cores_per_node < 1:
            errors.append(f"cores_per_node({self.cores_per_node}) must be at least 1")
        if not NAME_PATTERN.fullmatch(self.name):
            errors.append(f"name {self.name!r}: 1 to 8 lowercase letters and digits, starting with a letter (it is "
                          "part of every namespace's name)")
        if self.latency_s < 0 or not math.isfinite(self.latency_s):
            errors.append(f"latency_s({self.latency_s}) must be a finite number ≥ 0")
        if not 1 <= self.ray_port <= 65535:
            errors.append(f"ray_port({self.ray_port}) must be 1..65535")
        errors += _subnet_problems(self.subnet, self.nodes)
        if errors:
            raise InputError("; ".join(errors))


def _subnet_problems(subnet: str, nodes: int) -> list[str]:
    try:
        net = ipaddress.IPv4Network(subnet, strict=True)
    except ValueError as err:
        return [f"subnet {subnet!r}: {err}"]
    problems = []
    if not net.is_private:
        problems.append(f"subnet {subnet}: not a private range (10/8, 172.16/12, 192.168/16): an emulated node "
                        "must never take an address that is someone's on a real network")
    if net.num_addresses - 2 < nodes:
        problems.append(f"subnet {subnet}: {net.num_addresses - 2} host address(es) for {nodes} node(s)")
    return problems


@dataclass(frozen=True, slots=True)
class NodePlan:
    index: int
    namespace: str
    address: str
    prefix_len: int
    cpus: tuple[int, ...]
    switch_ifname: str        # the switch side of the node's veth, in the switch namespace

    @property
    def is_head(self) -> bool:
        return self.index == 0


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    request: ClusterRequest
    switch_namespace: str
    nodes: tuple[NodePlan, ...]
    shared_cores: bool        # some core serves more than one node (`share_cores` asked, and needed)

    @property
    def head(self) -> NodePlan:
        return self.nodes[0]

    @property
    def head_address(self) -> str:
        return f"{self.head.address}:{self.request.ray_port}"

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace of the cluster, the switch last (the nodes' processes go first at teardown)."""
        return (*(n.namespace for n in self.nodes), self.switch_namespace)


def namespace_prefix(name: str) -> str:
    return f"{NAMESPACE_PREFIX}{name}-"


def is_cluster_namespace(namespace: str, name: str | None = None) -> bool:
    """Whether a namespace is one orch's emulation makes (of cluster `name`, or of any).

    >>> is_cluster_namespace("orch-c-n3"), is_cluster_namespace("orch-c-sw", "c"), is_cluster_namespace("orch-x")
    (True, True, False)
    """
    found = cluster_of(namespace)
    return found is not None and (name is None or found == name)


def cluster_of(namespace: str) -> str | None:
    """The name of the cluster a namespace of orch's emulation belongs to; None for any other namespace.

    >>> cluster_of("orch-ci-n1"), cluster_of("orch-ci-sw"), cluster_of("orch-ci-x"), cluster_of("netns1")
    ('ci', 'ci', None, None)
    """
    match = re.fullmatch(rf"{NAMESPACE_PREFIX}({NAME_PATTERN.pattern})-(?:{SWITCH}|n[0-9]+)", namespace)
    return match[1] if match else None


def plan_cluster(request: ClusterRequest, cores: Sequence[tuple[int, ...]]) -> ClusterPlan:
    """Namespaces, addresses and cores of every node. `cores`: this machine's usable physical cores in placement
    order, each as its CPU ids (hardware threads together). Raises InputError with the numbers when they do
    not suffice and sharing was not asked."""
    need = request.nodes * request.cores_per_node
    if need > len(cores) and not request.share_cores:
        raise InputError(f"nodes({request.nodes}) × cores_per_node({request.cores_per_node}) = {need} > {len(cores)} "
                         "physical core(s) this process may use: fewer nodes or cores per node (or --share-cores, "
                         "for an all-reduce calibration on a slow link only: nodes then compete for cores)")
    if request.cores_per_node > len(cores):
        raise InputError(f"cores_per_node({request.cores_per_node}) > {len(cores)} physical core(s) this process "
                         "may use")
    net = ipaddress.IPv4Network(request.subnet)
    hosts = net.hosts()
    prefix = namespace_prefix(request.name)
    nodes = []
    for i in range(request.nodes):
        mine = [cores[(i * request.cores_per_node + k) % len(cores)] for k in range(request.cores_per_node)]
        nodes.append(NodePlan(i, f"{prefix}n{i}", str(next(hosts)), net.prefixlen,
                              tuple(sorted(cpu for core in mine for cpu in core)), f"n{i}"))
    return ClusterPlan(request, f"{prefix}{SWITCH}", tuple(nodes), need > len(cores))


def tbf_args(rate_bits_per_s: float) -> list[str]:
    """tc's token-bucket qdisc at this rate (after `tc qdisc add dev DEV root` or `parent …`)."""
    burst = max(MIN_BURST_BYTES, math.ceil(rate_bits_per_s / 8 * BURST_S))
    return ["tbf", "rate", f"{round(rate_bits_per_s)}bit", "burst", str(burst), "latency", f"{QUEUE_LATENCY_MS}ms"]


def netem_args(delay_s: float) -> list[str]:
    """tc's netem qdisc delaying every packet by `delay_s` (its child, handle 10:, shapes the rate)."""
    return ["netem", "delay", f"{round(delay_s * 1e6)}us"]


@dataclass(frozen=True, slots=True)
class Shaper:
    """The qdiscs of one end of a node's veth, in the order to add them (each a `tc qdisc add` argument list)."""

    namespace: str
    device: str
    qdiscs: tuple[tuple[str, ...], ...]


def shapers(plan: ClusterPlan, with_netem: bool) -> list[Shaper]:
    """The qdiscs that shape each node's link: both ends of its veth, each a tbf at the rate; with a latency and
    netem (`with_netem`), netem at root delaying by half of it, the tbf its child. Nothing for an unshaped link.

    >>> request = ClusterRequest(nodes=1, cores_per_node=1, rate_bits_per_s=2e8, latency_s=1e-3)
    >>> [" ".join(q) for q in shapers(plan_cluster(request, [(0,)]), with_netem=True)[0].qdiscs]
    ['root handle 1: netem delay 500us', 'parent 1:1 handle 10: tbf rate 200000000bit burst 65536 latency 50ms']
    """
    rate, delay = plan.request.rate_bits_per_s, plan.request.latency_s if with_netem else 0.0
    out = []
    for node in plan.nodes:
        for namespace, device in ((node.namespace, NODE_IFNAME), (plan.switch_namespace, node.switch_ifname)):
            qdiscs: list[tuple[str, ...]] = []
            if delay > 0:
                qdiscs.append(("root", "handle", "1:", *netem_args(delay / 2)))
            if rate is not None:
                parent = ("parent", "1:1", "handle", "10:") if delay > 0 else ("root",)
                qdiscs.append((*parent, *tbf_args(rate)))
            if qdiscs:
                out.append(Shaper(namespace, device, tuple(qdiscs)))
    return out


def link_words(request: ClusterRequest, latency_applied: bool) -> str:
    """The link as stated, in words, with what the kernel could not apply.

    >>> link_words(ClusterRequest(nodes=2, cores_per_node=1, rate_bits_per_s=1e9, latency_s=1e-3), False)
    '1 Gbit/s per node, both ways; latency 1 ms asked but not applied (this kernel has no netem)'
    """
    rate = (f"{rate_words(request.rate_bits_per_s)} per node, both ways" if request.rate_bits_per_s is not None
            else "unshaped (what the veth gives)")
    if request.latency_s <= 0:
        return rate
    latency = f"{request.latency_s * 1e3:g} ms"
    if latency_applied:
        return f"{rate}; latency {latency} one way (netem)"
    return f"{rate}; latency {latency} asked but not applied (this kernel has no netem)"


@dataclass(frozen=True, slots=True)
class LinkMeasure:
    """One bulk transfer between two nodes: what the shaper really gives (a shaper's rate is a promise)."""

    sender: int
    receiver: int
    bytes_moved: int
    seconds: float

    @property
    def bits_per_s(self) -> float:
        return self.bytes_moved * 8 / self.seconds if self.seconds > 0 else 0.0

    def words(self) -> str:
        return f"n{self.sender}→n{self.receiver} {rate_words(self.bits_per_s)}"


def transfer_pairs(nodes: int) -> list[tuple[int, int]]:
    """(sender, receiver) of the bulk transfers that measure every link: each node sends to the next, so every
    link is measured once each way (a transfer crosses the sender's link out and the receiver's in).

    >>> transfer_pairs(3), transfer_pairs(2), transfer_pairs(1)
    ([(0, 1), (1, 2), (2, 0)], [(0, 1), (1, 0)], [])
    """
    return [(i, (i + 1) % nodes) for i in range(nodes)] if nodes > 1 else []


def transfer_bytes(rate_bits_per_s: float | None, seconds: float = 1.0) -> int:
    """Bytes for a bulk transfer of about `seconds` at the shaped rate (256 MiB unshaped), 4 MiB to 1 GiB.

    >>> transfer_bytes(1e9) // 2**20, transfer_bytes(None) // 2**20, transfer_bytes(1e6) // 2**20
    (119, 256, 4)
    """
    wanted = 256 * 2**20 if rate_bits_per_s is None else int(rate_bits_per_s / 8 * seconds)
    return min(max(wanted, 4 * 2**20), 2**30)


# --- owners, and what `orch cluster down` may remove ---------------------------------------------------------

OWNER_MARK_PREFIX = "orch-owner"


@dataclass(frozen=True, slots=True)
class OwnerMark:
    """Who made a namespace, written on the namespace itself (its loopback's alias) as it is made. Namespace names
    are the machine's, state files are per folder (`ORCH_CLUSTER_STATE_DIR`): the mark lets any `orch cluster
    down` tell a live owner's namespace from a leftover, whichever folder holds its state file.

    >>> OwnerMark(4242, 1700000000.25, detached=False).words()
    'orch-owner pid=4242 started=1700000000.25 detached=0'
    >>> OwnerMark.parse("orch-owner pid=4242 started=1700000000.25 detached=1")
    OwnerMark(pid=4242, started=1700000000.25, detached=True)
    >>> OwnerMark.parse("uplink to rack 3") is None
    True
    """

    pid: int
    started: float      # the owner's process creation time (psutil's): a reused pid is not the owner
    detached: bool      # made by `up --detach`: its owner returned on purpose, the cluster is in use

    def words(self) -> str:
        return f"{OWNER_MARK_PREFIX} pid={self.pid} started={self.started!r} detached={int(self.detached)}"

    @staticmethod
    def parse(text: str) -> OwnerMark | None:
        match = re.fullmatch(rf"{OWNER_MARK_PREFIX} pid=([0-9]+) started=([0-9.e+]+) detached=([01])", text.strip())
        return OwnerMark(int(match[1]), float(match[2]), match[3] == "1") if match else None


class OwnerState(enum.Enum):
    ALIVE = "alive"
    DETACHED = "detached"
    GONE = "gone"
    UNKNOWN = "unknown"   # no state file in this folder lists the cluster and no namespace of it carries a mark


@dataclass(frozen=True, slots=True)
class Owner:
    """The process that made a cluster, as its state file or a mark names it, judged alive or not."""

    state: OwnerState
    pid: int | None = None

    def words(self) -> str:
        """
        >>> Owner(OwnerState.ALIVE, 4242).words(), Owner(OwnerState.GONE, 7).words()
        ('its owner, pid 4242, is alive', 'its owner, pid 7, is gone')
        """
        return {
            OwnerState.ALIVE: f"its owner, pid {self.pid}, is alive",
            OwnerState.DETACHED: f"detached (made by `orch cluster up --detach`, pid {self.pid}, which returned)",
            OwnerState.GONE: f"its owner, pid {self.pid}, is gone",
            OwnerState.UNKNOWN: "its owner is unknown: no state file in this folder lists it and its namespaces carry "
                                "no owner mark (made by an older orch, or with another ORCH_CLUSTER_STATE_DIR)",
        }[self.state]


def owner_of(claims: Sequence[Owner]) -> Owner:
    """A cluster's owner from what its state file and its namespaces' marks say: a live owner first, then a
    detached cluster (removing either ends someone's work: a namespace another folder's owner made again under
    the same name, say), then a gone one; with no claim, unknown.

    >>> owner_of([Owner(OwnerState.GONE, 7), Owner(OwnerState.ALIVE, 9)])
    Owner(state=<OwnerState.ALIVE: 'alive'>, pid=9)
    >>> owner_of([]).state
    <OwnerState.UNKNOWN: 'unknown'>
    """
    for state in (OwnerState.ALIVE, OwnerState.DETACHED, OwnerState.GONE):
        for claim in claims:
            if claim.state is state:
                return claim
    return Owner(OwnerState.UNKNOWN)


def kept_by_down(name: str, owner: Owner, *, by_name: bool, every: bool) -> str | None:
    """Why `orch cluster down` leaves cluster `name` alone, in words; None when it removes it. Asked by name, or
    for every cluster (`--all`), it removes any; bare, only one whose owner is gone (leftovers).

    >>> kept_by_down("ci", Owner(OwnerState.GONE, 7), by_name=False, every=False) is None
    True
    >>> kept_by_down("ci", Owner(OwnerState.ALIVE, 4242), by_name=False, every=False)
    'kept cluster ci: its owner, pid 4242, is alive; `orch cluster down --name ci` removes it, `--all` every cluster'
    """
    if by_name or every or owner.state is OwnerState.GONE:
        return None
    return f"kept cluster {name}: {owner.words()}; `orch cluster down --name {name}` removes it, `--all` every cluster"


# --- the end of a command run in the head's namespace ---------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CommandEnd:
    """How a command run in the head's namespace (`up -- CMD`, `exec -- CMD`) ended, and what orch exits with: its
    status, or 128 + N when signal N killed it, as a shell reports it.

    >>> CommandEnd(3).exit_status, CommandEnd(3).words()
    (3, None)
    >>> CommandEnd(-9).exit_status, CommandEnd(-9).words()
    (137, 'the command was killed by SIGKILL (signal 9): exit status 137')
    >>> CommandEnd(-15, forwarded=(15,)).words()
    'the command was killed by SIGTERM (signal 15), which orch got and passed on to it: exit status 143'
    """

    returncode: int                    # as subprocess gives it: -N when signal N ended the command
    forwarded: tuple[int, ...] = ()    # the signals orch got and passed on to the command

    @property
    def exit_status(self) -> int:
        return 128 - self.returncode if self.returncode < 0 else self.returncode

    def words(self) -> str | None:
        if self.returncode >= 0:
            return None
        number = -self.returncode
        try:
            which = f"{signal.Signals(number).name} (signal {number})"
        except ValueError:   # most real-time signals have no name of their own
            which = f"signal {number}"
        passed = ", which orch got and passed on to it" if number in self.forwarded else ""
        return f"the command was killed by {which}{passed}: exit status {self.exit_status}"
