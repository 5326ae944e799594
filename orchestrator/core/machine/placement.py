"""Where each rank's cores go.

Rules, in order of precedence:
- a rank sits wholly inside one socket (its compute cores and its oneCCL worker cores);
- no CPU is used twice;
- compact across nodes: the fewest nodes that can hold the ranks (inter-node links are the slow ones),
  with ranks spread evenly over the nodes used;
- inside a node, ranks spread evenly over sockets, so that each socket's memory bandwidth is shared
  by as few ranks as possible; inside a socket, ranks take consecutive cores from the first one;
- rank numbers run node by node, socket by socket, so that local ranks are contiguous.

Everything is deterministic: the same topology and trial give the same placement.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from itertools import islice, repeat

from orchestrator.core.machine.topology import Node, NodeGroup, Topology


@dataclass(frozen=True, slots=True)
class RankPlacement:
    rank: int
    local_rank: int
    node: int            # index into Topology.nodes
    socket: int
    numa_nodes: tuple[int, ...]
    cpus: tuple[int, ...]      # compute threads, one per CPU
    ccl_cpus: tuple[int, ...]  # oneCCL worker threads (empty unless the ccl backend is used)


# One node's share of a placement: (socket, NUMA nodes, compute CPUs, worker CPUs) per rank, in local order.
NodeLayout = tuple[tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where every rank goes, kept per node: `ranks` (one entry per rank, with its CPU list) is built on
    first use, so a plan that only needs the verdicts and node counts never lists a 4,096-rank trial's CPUs.
    """

    per_node: tuple[tuple[int, NodeLayout], ...]   # (node index, its ranks' layout), in node order
    _ranks: tuple[RankPlacement, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def nodes_used(self) -> int:
        return sum(1 for _, layout in self.per_node if layout)

    @property
    def ranks(self) -> tuple[RankPlacement, ...]:
        if self._ranks is None:
            placed: list[RankPlacement] = []
            for node_index, layout in self.per_node:
                first = len(placed)  # positional arguments: this loop runs once per rank
                placed.extend(RankPlacement(first + local, local, node_index, socket, numa, compute, workers)
                              for local, (socket, numa, compute, workers) in enumerate(layout))
            object.__setattr__(self, "_ranks", tuple(placed))
        return self._ranks  # type: ignore[return-value]  # set just above

    def ranks_on_node(self, node: int) -> int:
        return sum(len(layout) for index, layout in self.per_node if index == node)


def socket_slots(node: Node, cores_per_rank: int, hyperthreads: bool) -> list[int]:
    """How many ranks of `cores_per_rank` fit in each socket of `node`."""
    return [len(s.cpus(hyperthreads)) // cores_per_rank for s in node.sockets]


def memory_slots(node: Node, rank_memory_mib: float, memory_headroom: float, library_mib: float = 0.0) -> int:
    """How many ranks of `rank_memory_mib` (each one's private memory) fit in `node`'s memory × headroom, beside
    the `library_mib` of libraries that the node holds once for all of them (their pages are shared).

    >>> from orchestrator.core.machine.topology import topology_from_data
    >>> box, _ = topology_from_data({"name": "box", "sockets": 1, "cores_per_socket": 56, "memory_gib": 32})
    >>> memory_slots(box.nodes[0], 400, 0.9, library_mib=350), memory_slots(box.nodes[0], 400 + 350, 0.9)
    (72, 39)
    """
    usable = node.memory_mib * memory_headroom - library_mib
    if usable < 0:
        return 0
    if rank_memory_mib <= 0:
        return 1 << 30
    return int(usable // rank_memory_mib)


def rank_share_mib(node_memory_mib: float, memory_headroom: float, library_mib: float, ranks: float) -> float:
    """One rank's budget of private memory on a node shared by `ranks` ranks (a fraction, for a share by cores):
    the node's memory × headroom less the libraries it holds once, split evenly.

    >>> round(rank_share_mib(192 * 1024, 0.9, 350.0, 56), 1)   # a 192 GiB node of 56 ranks
    3153.5
    """
    return (node_memory_mib * memory_headroom - library_mib) / ranks

def node_capacity(node: Node, cores_per_rank: int, hyperthreads: bool, rank_memory_mib: float,
                  memory_headroom: float, library_mib: float = 0.0) -> int:
    return min(sum(socket_slots(node, cores_per_rank, hyperthreads)),
               memory_slots(node, rank_memory_mib, memory_headroom, library_mib))


def group_capacity(group: NodeGroup, cores_per_rank: int, hyperthreads: bool, rank_memory_mib: float,
                   memory_headroom: float, library_mib: float = 0.0) -> int:
    """`node_capacity` of each node of `group` (they are alike), without walking its CPUs again."""
    cores = sum(size // cores_per_rank for size in group.socket_sizes(hyperthreads))
    return min(cores, memory_slots(group.node, rank_memory_mib, memory_headroom, library_mib))


def spread(count: int, capacities: list[int]) -> list[int] | None:
    """Split `count` items over bins as evenly as capacities allow (water-filling); None if impossible.

    Equivalent to handing out one item per round to every bin not yet full, lowest index first: find the
    last full round `level` by bisection, then give one more to the first bins that still have room.

    >>> spread(5, [2, 4, 4])
    [2, 2, 1]
    >>> spread(5, [1, 4, 4])
    [1, 2, 2]
    """
    if count > sum(capacities):
        return None
    low, high = 0, max(capacities, default=0)
    while low < high:  # the largest level with sum(min(cap, level)) <= count
        mid = (low + high + 1) // 2
        if sum(min(cap, mid) for cap in capacities) <= count:
            low = mid
        else:
            high = mid - 1
    shares = [min(cap, low) for cap in capacities]
    left = count - sum(shares)
    for i, cap in enumerate(capacities):
        if not left:
            break
        if cap > low:
            shares[i] += 1
            left -= 1
    return shares


def fewest_nodes(groups: tuple[NodeGroup, ...], capacities: list[int], ranks: int) -> list[tuple[int, int]] | None:
    """(node index, group index) of the fewest nodes that hold `ranks`, in node order; None if all cannot.

    The biggest nodes first, ties to the lower index: on a heterogeneous cluster, taking nodes in file order
    could use more nodes than needed. Only the nodes taken are listed, so 10,000 alike nodes cost nothing."""
    if sum(cap * g.count for g, cap in zip(groups, capacities, strict=True)) < ranks:
        return None
    chosen: list[tuple[int, int]] = []
    left = ranks
    for cap in sorted({c for c in capacities if c > 0}, reverse=True):
        if left <= 0:
            break
        same = [k for k, c in enumerate(capacities) if c == cap]
        members = heapq.merge(*[zip(groups[k].indices, repeat(k)) for k in same])
        taken = list(islice(members, -(-left // cap)))
        chosen += taken
        left -= cap * len(taken)
    return sorted(chosen)


def _node_layout(group: NodeGroup, count: int, threads_per_rank: int, cores_per_rank: int,
                 hyperthreads: bool) -> NodeLayout:
    """(socket, NUMA nodes, compute CPUs, worker CPUs) of each of `count` ranks on one node of `group`:
    ranks spread evenly over the sockets, consecutive cores inside a socket."""
    socket_cpus = group.cpus(hyperthreads)
    per_socket = spread(count, [len(c) // cores_per_rank for c in socket_cpus])
    if per_socket is None:
        raise ValueError(f"{count} ranks of {cores_per_rank} cores do not fit node {group.node.name}")
    template = []
    for socket, cpus, socket_count in zip(group.node.sockets, socket_cpus, per_socket, strict=True):
        for k in range(socket_count):
            chunk = cpus[k * cores_per_rank:(k + 1) * cores_per_rank]
            template.append((socket.index, group.numa_of_cpus(chunk), chunk[:threads_per_rank],
                             chunk[threads_per_rank:]))
    return tuple(template)


def place(topology: Topology, ranks: int, threads_per_rank: int, *, hyperthreads: bool = False,
          ccl_workers: int = 0, rank_memory_mib: float = 0.0, memory_headroom: float = 1.0,
          library_mib: float = 0.0) -> Placement | None:
    """Assign every rank its node, socket and CPUs; None when the ranks cannot be hosted. `rank_memory_mib`:
    each rank's private memory; `library_mib`: the libraries a node holds once for its ranks.

    Costs time in the ranks placed and the node shapes, not in the size of the cluster."""
    cores_per_rank = threads_per_rank + ccl_workers
    groups = topology.groups
    capacities = [group_capacity(g, cores_per_rank, hyperthreads, rank_memory_mib, memory_headroom, library_mib)
                  for g in groups]
    chosen = fewest_nodes(groups, capacities, ranks)
    per_node = spread(ranks, [capacities[k] for _, k in chosen]) if chosen is not None else None
    if chosen is None or per_node is None:
        return None
    layouts: dict[tuple[int, int], NodeLayout] = {}
    shares = []
    for (node_index, k), count in zip(chosen, per_node, strict=True):
        if (k, count) not in layouts:  # alike nodes with the same share get the same layout
            layouts[(k, count)] = _node_layout(groups[k], count, threads_per_rank, cores_per_rank, hyperthreads)
        if count:
            shares.append((node_index, layouts[(k, count)]))
    return Placement(tuple(shares))
