"""Core assignment: properties checked over the whole grid of every hand-made topology, plus worked examples."""

from __future__ import annotations

from itertools import combinations

import pytest

from orchestrator.core.machine.placement import Placement, node_capacity, place, socket_slots, spread
from orchestrator.core.machine.topology import Topology
from orchestrator.core.planning.grid import powers_of_two_up_to

from hand_topologies import (
    ALL,
    GIB,
    cluster_4x2s28c,
    detailed,
    emulated_2s1c,
    heterogeneous,
    xeon_2s28c,
    xeon_2s28c_smt,
    xeon_2s28c_snc,
)


def fewest_nodes(capacities: list[int], ranks: int) -> int:
    """Brute force: the smallest number of nodes whose capacities together hold `ranks`."""
    for k in range(1, len(capacities) + 1):
        if any(sum(c) >= ranks for c in combinations(capacities, k)):
            return k
    raise AssertionError("infeasible")


def assert_placement_ok(topology: Topology, placement: Placement, ranks: int, threads: int, *, ht: bool,
                        workers: int, mem: float, headroom: float, capacities: list[int],
                        slots_by_node: list[list[int]]) -> None:
    """`capacities` (ranks per node) and `slots_by_node` (ranks per socket) are computed once per grid row."""
    where = (ranks, threads, workers, mem)
    per_rank = threads + workers
    assert [r.rank for r in placement.ranks] == list(range(ranks)), where

    used = sorted({r.node for r in placement.ranks})
    assert placement.nodes_used == len(used), where
    assert len(used) == fewest_nodes(capacities, ranks), where

    # rank numbering contiguous per node, in node order; local_rank counts from 0 on each node
    nodes_in_rank_order = [r.node for r in placement.ranks]
    assert nodes_in_rank_order == sorted(nodes_in_rank_order), where
    for node_index in used:
        on_node = [r for r in placement.ranks if r.node == node_index]
        assert [r.local_rank for r in on_node] == list(range(len(on_node))), where
        assert placement.ranks_on_node(node_index) == len(on_node)

    # ranks spread over the nodes used as evenly as their capacities allow
    counts = {i: placement.ranks_on_node(i) for i in used}
    for a in used:
        for b in used:
            assert counts[a] <= counts[b] + 1 or counts[b] == capacities[b], (where, counts)

    for node_index in used:
        node = topology.nodes[node_index]
        usable_by_socket = {s.index: set(s.cpus(ht)) for s in node.sockets}
        cpu_numa = {cpu: n.index for n in node.numa_nodes for cpu in n.cpus}
        sibling_core = {cpu: core for s in node.sockets for core in s.cores for cpu in core.cpus}
        on_node = [r for r in placement.ranks if r.node == node_index]
        taken: list[int] = []
        for r in on_node:
            assert len(r.cpus) == threads and len(r.ccl_cpus) == workers, where
            assert not set(r.cpus) & set(r.ccl_cpus), where
            # compute and oneCCL worker CPUs all inside the rank's own socket on its own node
            assert set(r.cpus) | set(r.ccl_cpus) <= usable_by_socket[r.socket], where
            assert r.numa_nodes == tuple(sorted({cpu_numa[c] for c in r.cpus + r.ccl_cpus})), where
            taken += r.cpus + r.ccl_cpus
        assert len(taken) == len(set(taken)), f"a CPU is used twice: {where}"
        if not ht:  # only the first hardware thread of each core
            assert all(sibling_core[c].cpus[0] == c for c in taken), where
        elif per_rank % node.threads_per_core == 0:  # siblings stay with one rank
            for r in on_node:
                mine = set(r.cpus) | set(r.ccl_cpus)
                assert all(set(sibling_core[c].cpus) <= mine for c in mine), where
        # ranks of one node spread over its sockets as evenly as the sockets allow
        slots = dict(zip((s.index for s in node.sockets), slots_by_node[node_index]))
        per_socket = {s: sum(1 for r in on_node if r.socket == s) for s in slots}
        for a in slots:
            for b in slots:
                assert per_socket[a] <= per_socket[b] + 1 or per_socket[b] == slots[b], (where, per_socket)


def grid_of(topology: Topology, ht: bool) -> tuple[list[int], list[int]]:
    cores = topology.usable_cores(ht)
    per_socket = max(len(s.cpus(ht)) for n in topology.nodes for s in n.sockets)
    ranks = sorted(set(powers_of_two_up_to(cores)) | {3, 5, 6, 7, 9})
    threads = sorted(set(powers_of_two_up_to(per_socket)) | {3, 6, 7, 14})
    return ranks, threads


@pytest.mark.parametrize("name, build, ht", ALL, ids=[a[0] for a in ALL])
def test_placement_properties_over_the_whole_grid(name, build, ht):
    topology = build()
    ranks_axis, threads_axis = grid_of(topology, ht)
    checked = 0
    for workers in (0, 1):
        for mem in (0.0, 40 * GIB):
            for threads in threads_axis:
                per_rank = threads + workers
                capacities = [node_capacity(n, per_rank, ht, mem, 0.9) for n in topology.nodes]
                slots_by_node = [socket_slots(n, per_rank, ht) for n in topology.nodes]
                for ranks in ranks_axis:
                    # None exactly when check() rejects the point: see test_constraints
                    placement = place(topology, ranks, threads, hyperthreads=ht, ccl_workers=workers,
                                      rank_memory_mib=mem, memory_headroom=0.9)
                    if placement is None:
                        continue
                    assert_placement_ok(topology, placement, ranks, threads, ht=ht, workers=workers, mem=mem,
                                        headroom=0.9, capacities=capacities, slots_by_node=slots_by_node)
                    checked += 1
    assert checked > 0  # the grid really exercised placement


@pytest.mark.parametrize("name, build, ht", ALL, ids=[a[0] for a in ALL])
def test_placement_is_deterministic(name, build, ht):
    one, other = build(), build()   # equal inputs, separately built
    ranks_axis, threads_axis = grid_of(one, ht)
    points = [(r, t, 1 if t in (3, 7) else 0) for r in ranks_axis for t in threads_axis]
    first = [place(one, r, t, hyperthreads=ht, ccl_workers=w) for r, t, w in points]
    second = [place(other, r, t, hyperthreads=ht, ccl_workers=w) for r, t, w in points]
    assert first == second
    assert any(p is not None for p in first)


# --- worked examples ---------------------------------------------------------------------------------------

def test_two_ranks_go_to_two_sockets_consecutive_cores():
    placement = place(xeon_2s28c(), 2, 14)
    assert [(r.socket, r.cpus) for r in placement.ranks] == [(0, tuple(range(14))), (1, tuple(range(28, 42)))]
    assert [r.numa_nodes for r in placement.ranks] == [(0,), (1,)]


def test_three_ranks_fill_socket_zero_first_on_ties():
    placement = place(xeon_2s28c(), 3, 7)
    assert [(r.socket, r.cpus[0]) for r in placement.ranks] == [(0, 0), (0, 7), (1, 28)]


def test_emulated_two_socket_machine_pins_one_rank_per_cpu():
    placement = place(emulated_2s1c(), 2, 1)
    assert [(r.socket, r.cpus, r.numa_nodes) for r in placement.ranks] == [(0, (0,), (0,)), (1, (1,), (1,))]
    assert place(emulated_2s1c(), 1, 2) is None


def test_hyperthreads_take_whole_cores_with_their_siblings():
    placement = place(xeon_2s28c_smt(), 2, 4, hyperthreads=True)
    assert [r.cpus for r in placement.ranks] == [(0, 56, 1, 57), (28, 84, 29, 85)]
    assert place(xeon_2s28c_smt(), 2, 4).ranks[0].cpus == (0, 1, 2, 3)


def test_ccl_workers_follow_the_compute_cores_in_the_same_socket():
    placement = place(xeon_2s28c(), 4, 13, ccl_workers=1)
    assert [(r.socket, r.cpus[0], r.ccl_cpus) for r in placement.ranks] == [
        (0, 0, (13,)), (0, 14, (27,)), (1, 28, (41,)), (1, 42, (55,))]


def test_sub_numa_clustering_numa_nodes_per_rank():
    placement = place(xeon_2s28c_snc(), 4, 14)
    assert [r.numa_nodes for r in placement.ranks] == [(0,), (1,), (2,), (3,)]
    placement = place(xeon_2s28c_snc(), 2, 28)
    assert [r.numa_nodes for r in placement.ranks] == [(0, 1), (2, 3)]
    # 4 ranks × 8 cores: two per socket, the second straddles the NUMA boundary at core 14
    placement = place(xeon_2s28c_snc(), 4, 8)
    assert [r.numa_nodes for r in placement.ranks] == [(0,), (0, 1), (2,), (2, 3)]


def test_cluster_uses_fewest_nodes_and_spreads_evenly():
    placement = place(cluster_4x2s28c(), 3, 28)          # 2 per node: needs two nodes
    assert placement.nodes_used == 2
    assert [(r.rank, r.local_rank, r.node, r.socket) for r in placement.ranks] == [
        (0, 0, 0, 0), (1, 1, 0, 1), (2, 0, 1, 0)]
    placement = place(cluster_4x2s28c(), 8, 1)           # fits one node
    assert placement.nodes_used == 1


def test_memory_pushes_ranks_onto_more_nodes():
    placement = place(cluster_4x2s28c(), 8, 1, rank_memory_mib=80 * GIB, memory_headroom=0.9)
    assert placement.nodes_used == 4                     # 2 ranks of 80 GiB fit a 192 GiB node at 0.9
    assert [placement.ranks_on_node(i) for i in range(4)] == [2, 2, 2, 2]


def test_heterogeneous_cluster_uses_the_node_that_fits_rather_than_file_order():
    # node 0 ('small') holds one 2-core rank, node 1 ('smt') eight: four ranks need one node, not two
    placement = place(heterogeneous(), 4, 2)
    assert placement.nodes_used == 1
    assert {r.node for r in placement.ranks} == {1}
    assert [r.local_rank for r in placement.ranks] == [0, 1, 2, 3]


def test_heterogeneous_cluster_numbering_stays_in_node_order():
    topology = detailed([{"name": "a", "memory_mib": GIB, "sockets": [[0, 1]]},
                         {"name": "b", "memory_mib": GIB, "sockets": [[0, 1, 2, 3]]},
                         {"name": "c", "memory_mib": GIB, "sockets": [[0, 1, 2, 3, 4, 5]]}])
    placement = place(topology, 5, 2)   # c (3) + b (2): two nodes, numbered b before c
    assert [(r.rank, r.node, r.local_rank) for r in placement.ranks] == [
        (0, 1, 0), (1, 1, 1), (2, 2, 0), (3, 2, 1), (4, 2, 2)]


@pytest.mark.parametrize("count, capacities, expected", [
    (5, [2, 4, 4], [2, 2, 1]),   # ties go to the lower index
    (5, [1, 4, 4], [1, 2, 2]),
    (3, [4, 4], [2, 1]),
    (7, [1, 10, 10], [1, 3, 3]),
    (0, [3], [0]),
    (9, [2, 2], None),
])
def test_spread(count, capacities, expected):
    assert spread(count, capacities) == expected
