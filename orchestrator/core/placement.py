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

from dataclasses import dataclass

from orchestrator.core.topology import Node, Topology


@dataclass(frozen=True, slots=True)
class RankPlacement:
    rank: int
    local_rank: int
    node: int            # index into Topology.nodes
    socket: int
    numa_nodes: tuple[int, ...]
    cpus: tuple[int, ...]      # compute threads, one per CPU
    ccl_cpus: tuple[int, ...]  # oneCCL worker threads (empty unless the ccl backend is used)


@dataclass(frozen=True, slots=True)
class Placement:
    ranks: tuple[RankPlacement, ...]
    nodes_used: int

    def ranks_on_node(self, node: int) -> int:
        return sum(1 for r in self.ranks if r.node == node)


def socket_slots(node: Node, cores_per_rank: int, hyperthreads: bool) -> list[int]:
    """How many ranks of `cores_per_rank` fit in each socket of `node`."""
    return [len(s.cpus(hyperthreads)) // cores_per_rank for s in node.sockets]


def memory_slots(node: Node, rank_memory_mib: float, memory_headroom: float) -> int:
    """How many ranks of `rank_memory_mib` fit in `node`'s memory × headroom."""
    if rank_memory_mib <= 0:
        return 1 << 30
    return int(node.memory_mib * memory_headroom // rank_memory_mib)


def node_capacity(node: Node, cores_per_rank: int, hyperthreads: bool, rank_memory_mib: float,
                  memory_headroom: float) -> int:
    return min(sum(socket_slots(node, cores_per_rank, hyperthreads)),
               memory_slots(node, rank_memory_mib, memory_headroom))


def spread(count: int, capacities: list[int]) -> list[int] | None:
    """Split `count` items over bins as evenly as capacities allow (water-filling); None if impossible.

    >>> spread(5, [2, 4, 4])
    [2, 2, 1]
    >>> spread(5, [1, 4, 4])
    [1, 2, 2]
    """
    if count > sum(capacities):
        return None
    shares = [0] * len(capacities)
    left = count
    while left:
        open_bins = [i for i, cap in enumerate(capacities) if shares[i] < cap]
        # Give one more to the emptiest open bins first; ties go to the lower index (determinism).
        open_bins.sort(key=lambda i: (shares[i], i))
        for i in open_bins[:left]:
            shares[i] += 1
            left -= 1
            if not left:
                break
    return shares


def place(topology: Topology, ranks: int, threads_per_rank: int, *, hyperthreads: bool = False,
          ccl_workers: int = 0, rank_memory_mib: float = 0.0, memory_headroom: float = 1.0) -> Placement | None:
    """Assign every rank its node, socket and CPUs; None when the ranks cannot be hosted."""
    cores_per_rank = threads_per_rank + ccl_workers
    capacities = [node_capacity(n, cores_per_rank, hyperthreads, rank_memory_mib, memory_headroom)
                  for n in topology.nodes]
    # Fewest nodes: take the biggest nodes first (ties to the lower index) until their capacity covers the
    # ranks; on a heterogeneous cluster taking nodes in file order could use more nodes than needed.
    chosen, total = [], 0
    for i in sorted(range(len(capacities)), key=lambda i: (-capacities[i], i)):
        if total >= ranks:
            break
        chosen.append(i)
        total += capacities[i]
    chosen.sort()  # ranks are numbered in node order
    per_node = spread(ranks, [capacities[i] for i in chosen])
    if per_node is None:
        return None
    placed: list[RankPlacement] = []
    for node_index, count in zip(chosen, per_node):
        node = topology.nodes[node_index]
        per_socket = spread(count, socket_slots(node, cores_per_rank, hyperthreads))
        assert per_socket is not None  # capacity already covers count
        local = 0
        for socket, socket_count in zip(node.sockets, per_socket):
            cpus = socket.cpus(hyperthreads)
            for k in range(socket_count):
                chunk = cpus[k * cores_per_rank:(k + 1) * cores_per_rank]
                compute, workers = chunk[:threads_per_rank], chunk[threads_per_rank:]
                placed.append(RankPlacement(
                    rank=len(placed), local_rank=local, node=node_index, socket=socket.index,
                    numa_nodes=node.numa_of_cpus(chunk), cpus=tuple(compute), ccl_cpus=tuple(workers)))
                local += 1
    return Placement(tuple(placed), sum(1 for c in per_node if c))
