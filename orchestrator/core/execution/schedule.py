"""Which trials may run at the same time, and where: the rules of a concurrent sweep.

Every running trial holds a *region*, a set of (node, CPU) pairs that no other trial may touch while it
runs. The region depends on what the trial measures:

- a timing trial (GEMM peak, all-reduce calibration, throughput) measures time, and a neighbour on the
  same memory bus or network link changes it. Its region follows `measure.isolation`:
  `node` (default) every CPU of every node it uses; `socket` every CPU of the sockets its ranks use;
  `none` only the physical cores its ranks use;
- a convergence run measures epochs, which do not depend on its neighbours: it holds only its own cores
  and packs onto whatever cores are free.

A timing trial keeps its planned layout, because the layout is what it measures. It may only move to a
node of the same shape (memory, sockets, cores, threads per core; CPU numbering may differ), onto the CPUs
at the same positions, so that trials planned on the same node can run side by side on a cluster. A
convergence run is placed afresh on the free cores, by the same rules as any placement (a rank inside one
socket, one thread per core).

Pure: the driver keeps the regions of the running trials and asks `admit_timing` / `admit_packed`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import get_args

from orchestrator.core.machine.placement import NodeLayout, Placement, place, rank_share_mib
from orchestrator.core.machine.topology import Node, Socket, Topology
from orchestrator.core.planning.spec import Isolation

ISOLATION_LEVELS: tuple[Isolation, ...] = get_args(Isolation)
Region = frozenset[tuple[int, int]]   # (node index, CPU id)


@dataclass(frozen=True, slots=True)
class Admission:
    """Where an admitted trial runs, what it holds, and its ranks' memory budgets (MiB)."""

    placement: Placement
    region: Region
    memory_budget_mib: tuple[float, ...]


def _core_cpus(node: Node, cpus: tuple[int, ...]) -> set[int]:
    """Every hardware thread of the cores that hold `cpus`: one thread per core means a sibling is taken too."""
    wanted = set(cpus)
    return {cpu for s in node.sockets for c in s.cores if wanted & set(c.cpus) for cpu in c.cpus}


def layout_region(node: Node, layout: NodeLayout, isolation: Isolation) -> set[int]:
    """The CPUs of `node` that a trial with this layout on it holds, under `isolation`.

    >>> from orchestrator.core.machine.topology import Core, NumaNode
    >>> sockets = (Socket(0, (Core((0, 2)), Core((1, 3)))), Socket(1, (Core((4, 6)), Core((5, 7)))))
    >>> node = Node("n", sockets, (NumaNode(0, (0, 1, 2, 3), 1024.0), NumaNode(1, (4, 5, 6, 7), 1024.0)), 2048.0)
    >>> layout = ((0, (0,), (0,), ()),)        # one rank on socket 0, CPU 0
    >>> [sorted(layout_region(node, layout, level)) for level in ISOLATION_LEVELS]
    [[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3], [0, 2]]
    """
    if isolation == "node":
        return {cpu for s in node.sockets for cpu in s.cpus(True)}
    if isolation == "socket":
        used = {socket for socket, _numa, _cpus, _workers in layout}
        return {cpu for s in node.sockets if s.index in used for cpu in s.cpus(True)}
    return _core_cpus(node, tuple(cpu for _s, _n, cpus, workers in layout for cpu in (*cpus, *workers)))


def _shape(node: Node) -> tuple[float, tuple[tuple[int, ...], ...]]:
    """What makes two nodes interchangeable for a measurement: memory, sockets, cores and threads per core.
    CPU numbering may differ (several Ray nodes emulated on one machine are numbered apart)."""
    return node.memory_mib, tuple(tuple(len(c.cpus) for c in s.cores) for s in node.sockets)


def _alike(topology: Topology, node_index: int) -> Iterator[int]:
    """The node itself, then every other node of the same shape, group by group (a group is one shape)."""
    yield node_index
    shape = _shape(topology.nodes[node_index])
    for group in topology.groups:
        if _shape(group.node) == shape:
            yield from (i for i in group.indices if i != node_index)


def _moved(layout: NodeLayout, source: Node, target: Node) -> NodeLayout:
    """`layout` on `target`: each CPU replaced by the one at the same socket, core and thread position."""
    if source.sockets == target.sockets:
        return layout
    cpu_map = {a: b for s, t in zip(source.sockets, target.sockets) for c, d in zip(s.cores, t.cores)
               for a, b in zip(c.cpus, d.cpus)}
    socket_map = {s.index: t.index for s, t in zip(source.sockets, target.sockets)}
    moved = []
    for socket, _numa, cpus, workers in layout:
        new_cpus, new_workers = tuple(cpu_map[c] for c in cpus), tuple(cpu_map[c] for c in workers)
        moved.append((socket_map[socket], target.numa_of_cpus(new_cpus + new_workers), new_cpus, new_workers))
    return tuple(moved)


def admit_timing(topology: Topology, planned: Placement, budgets_mib: tuple[float, ...], isolation: Isolation,
                 taken: Region) -> Admission | None:
    """The planned layout on free nodes of the same shape, first the planned nodes themselves; None when
    no such nodes are free now. Each node of the placement takes the lowest free alike node."""
    chosen: list[tuple[int, NodeLayout]] = []
    region: set[tuple[int, int]] = set()
    for node_index, layout in planned.per_node:
        source = topology.nodes[node_index]
        for target in _alike(topology, node_index):
            if any(target == n for n, _ in chosen):
                continue
            moved = _moved(layout, source, topology.nodes[target])
            cpus = layout_region(topology.nodes[target], moved, isolation)
            if not any((target, c) in taken for c in cpus):
                chosen.append((target, moved))
                region |= {(target, c) for c in cpus}
                break
        else:
            return None
    return Admission(Placement(tuple(sorted(chosen))), frozenset(region), budgets_mib)


def _free_node(node: Node, busy: set[int]) -> Node:
    """`node` with only its wholly free cores (a core with any busy thread is not free)."""
    sockets = tuple(Socket(s.index, tuple(c for c in s.cores if not busy & set(c.cpus))) for s in node.sockets)
    return Node(node.name, sockets, node.numa_nodes, node.memory_mib, node.notes, node.isa)


def memory_share_mib(node: Node, cores: int, memory_headroom: float, hyperthreads: bool,
                     library_mib: float = 0.0) -> float:
    """A rank's budget of private memory when trials share a node: the node's usable memory, less the libraries
    it holds once for every trial's ranks, in proportion to its cores."""
    return rank_share_mib(node.memory_mib, memory_headroom, library_mib,
                          max(1, node.usable_cores(hyperthreads)) / cores)


def admit_packed(topology: Topology, ranks: int, threads_per_rank: int, taken: Region, *, hyperthreads: bool,
                 ccl_workers: int, rank_memory_mib: float, memory_headroom: float,
                 library_mib: float = 0.0) -> Admission | None:
    """`ranks` × `threads_per_rank` placed on the cores nobody holds; None when they do not fit now.

    Each rank's budget is its cores' share of its node's memory (less the libraries, held once), so packed
    trials together never exceed the node's memory × headroom; a run whose ranks need more than that share waits
    for a quieter node."""
    busy: dict[int, set[int]] = {}
    for node_index, cpu in taken:
        busy.setdefault(node_index, set()).add(cpu)
    cores_per_rank = threads_per_rank + ccl_workers
    share = [memory_share_mib(n, cores_per_rank, memory_headroom, hyperthreads, library_mib) for n in topology.nodes]
    # A node whose share is too small for one rank offers no cores. Untouched nodes keep their objects,
    # so alike free nodes still plan as one group.
    nodes = tuple(_free_node(n, {c for s in n.sockets for c in s.cpus(True)}) if share[i] < rank_memory_mib
                  else _free_node(n, busy[i]) if i in busy else n for i, n in enumerate(topology.nodes))
    placement = place(Topology(nodes, topology.source), ranks, threads_per_rank, hyperthreads=hyperthreads,
                      ccl_workers=ccl_workers)
    if placement is None:
        return None
    region: set[tuple[int, int]] = set()
    budgets: list[float] = []
    for node_index, layout in placement.per_node:
        node = topology.nodes[node_index]
        region |= {(node_index, c) for c in layout_region(node, layout, "none")}
        budgets += [share[node_index]] * len(layout)
    return Admission(placement, frozenset(region), tuple(budgets))


def admit_convergence(topology: Topology, planned: Placement, budgets_mib: tuple[float, ...], ranks: int,
                      threads_per_rank: int, taken: Region, *, hyperthreads: bool, ccl_workers: int,
                      rank_memory_mib: float, memory_headroom: float, library_mib: float = 0.0) -> Admission | None:
    """A convergence run packed onto free cores (`admit_packed`); when it cannot pack and nothing else runs,
    it runs as planned (the plan found that layout feasible on an idle cluster), holding whole nodes."""
    packed = admit_packed(topology, ranks, threads_per_rank, taken, hyperthreads=hyperthreads,
                          ccl_workers=ccl_workers, rank_memory_mib=rank_memory_mib, memory_headroom=memory_headroom,
                          library_mib=library_mib)
    if packed is not None or taken:
        return packed
    return admit_timing(topology, planned, budgets_mib, "node", taken)
