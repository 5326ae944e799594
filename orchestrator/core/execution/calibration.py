"""The all-reduce calibration plan: which rank counts over which link classes, placed where.

For `orch predict`, a sweep times `all_reduce` at its start for every rank count of its grid (2 and up)
over each link class the machine has:

- ``socket``: all ranks on consecutive cores of one socket (shared cache and memory controller);
- ``sockets``: ranks spread evenly over the sockets of one node (the inter-socket link);
- ``nodes``: one rank per node (the network).

One compute core per rank: the message travels through the same loopback or network path whatever the
rank's thread count, and calibrating with the fewest cores keeps the plan cheap. Pure.
"""

from __future__ import annotations

from orchestrator.core.machine.placement import Placement, place
from orchestrator.core.machine.topology import Node, Topology
from orchestrator.core.planning.plan import PlannedTrial
from orchestrator.core.planning.trial import Trial
from orchestrator.core.predict.comm import NODES, SOCKET, SOCKETS

# Message sizes: 4 KiB to 64 MiB by factors of 4, which spans DDP's 1 MiB first bucket and 25 MiB buckets.
MESSAGE_BYTES = tuple(4096 * 4**k for k in range(8))
GRADIENT_DTYPE = "fp32"   # DDP all-reduces gradients in the parameters' dtype; autocast keeps those fp32


def calibration_key(link: str, ranks: int, dtype: str = GRADIENT_DTYPE) -> str:
    """
    >>> calibration_key("sockets", 4)
    'allreduce-sockets-n4-fp32'
    """
    return f"allreduce-{link}-n{ranks}-{dtype}"


def _in_one_socket(node_index: int, node: Node, ranks: int, hyperthreads: bool) -> Placement | None:
    socket = max(node.sockets, key=lambda s: (len(s.cpus(hyperthreads)), -s.index))
    cpus = socket.cpus(hyperthreads)
    if ranks > len(cpus):
        return None
    layout = tuple((socket.index, node.numa_of_cpus((cpus[i],)), (cpus[i],), ()) for i in range(ranks))
    return Placement(((node_index, layout),))


def _one_per_node(topology: Topology, ranks: int, hyperthreads: bool) -> Placement | None:
    if ranks > len(topology.nodes):
        return None
    per_node = []
    for i, node in enumerate(topology.nodes[:ranks]):
        socket = node.sockets[0]
        cpu = socket.cpus(hyperthreads)[0]
        per_node.append((i, ((socket.index, node.numa_of_cpus((cpu,)), (cpu,), ()),)))
    return Placement(tuple(per_node))


def calibration_trials(topology: Topology, rank_counts: tuple[int, ...], *, hyperthreads: bool = False,
                       memory_headroom: float = 0.9) -> list[tuple[str, PlannedTrial]]:
    """(link class, planned trial) for each link class × rank count the topology can host, in cost order; the
    trial's key is `calibration_key(link, ranks)`."""
    node0 = topology.nodes[0]
    single = Topology((node0,))
    out: list[tuple[str, PlannedTrial]] = []
    counts = sorted({n for n in rank_counts if n >= 2})
    for link in (SOCKET, SOCKETS, NODES):
        for n in counts:
            if link == SOCKET:
                placement = _in_one_socket(0, node0, n, hyperthreads)
            elif link == SOCKETS:
                placement = place(single, n, 1, hyperthreads=hyperthreads) if len(node0.sockets) > 1 else None
            else:
                placement = _one_per_node(topology, n, hyperthreads)
            if placement is None:
                continue
            budgets = tuple(topology.nodes[r.node].memory_mib * memory_headroom / placement.ranks_on_node(r.node)
                            for r in placement.ranks)
            out.append((link, PlannedTrial(Trial(n, 1, 1), (), placement, 0.0, budgets)))
    return out
