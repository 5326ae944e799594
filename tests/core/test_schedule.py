"""Which trials may run at once, and where (orchestrator.core.execution.schedule): regions by isolation level, timing
trials moved only to identical free nodes, convergence runs packed onto free cores within memory shares."""

from __future__ import annotations

import pytest

from orchestrator.core.execution.schedule import (
    admit_convergence,
    admit_packed,
    admit_timing,
    layout_region,
    memory_share_mib,
)
from orchestrator.core.machine.placement import place

from hand_topologies import GIB, cluster_4x2s28c, detailed, emulated_2s1c, one_socket_2c, xeon_2s28c_smt

PACK = dict(hyperthreads=False, ccl_workers=0, rank_memory_mib=1000.0, memory_headroom=0.9)


def _cpus(admission) -> list[tuple[int, tuple[int, ...]]]:
    return [(r.node, r.cpus) for r in admission.placement.ranks]


def test_node_isolation_holds_every_cpu_of_the_nodes_used_smt_siblings_included():
    topology = cluster_4x2s28c()
    planned = place(topology, 2, 4)  # both ranks on node 0, one per socket
    admission = admit_timing(topology, planned, (1.0, 1.0), "node", frozenset())
    assert admission is not None and admission.placement == planned
    assert admission.region == {(0, cpu) for cpu in range(112)}


def test_socket_isolation_holds_the_sockets_used_and_none_only_the_cores():
    topology = xeon_2s28c_smt()     # socket 0: cores 0-27 with siblings 56-83
    planned = place(topology, 1, 2)
    socket = admit_timing(topology, planned, (1.0,), "socket", frozenset())
    core = admit_timing(topology, planned, (1.0,), "none", frozenset())
    assert socket is not None and core is not None
    assert {cpu for _, cpu in socket.region} == set(range(28)) | set(range(56, 84))
    assert {cpu for _, cpu in core.region} == {0, 1, 56, 57}   # one thread per core: the siblings too


def test_a_busy_node_moves_the_trial_to_an_identical_free_node_with_the_same_layout():
    topology = cluster_4x2s28c()
    planned = place(topology, 2, 28)
    first = admit_timing(topology, planned, (1.0, 1.0), "node", frozenset())
    second = admit_timing(topology, planned, (1.0, 1.0), "node", first.region)
    assert [n for n, _ in second.placement.per_node] == [1]
    assert second.placement.per_node[0][1] == planned.per_node[0][1]   # same sockets, same CPU ids
    assert not first.region & second.region
    third = admit_timing(topology, planned, (1.0, 1.0), "node", first.region | second.region)
    assert [n for n, _ in third.placement.per_node] == [2]


def test_a_two_node_trial_needs_two_free_nodes():
    topology = cluster_4x2s28c()
    planned = place(topology, 4, 28)     # two ranks per node on nodes 0 and 1
    taken = admit_timing(topology, place(topology, 1, 1), (1.0,), "node", frozenset()).region   # node 0
    moved = admit_timing(topology, planned, (1.0,) * 4, "node", taken)
    assert [n for n, _ in moved.placement.per_node] == [1, 2]
    taken |= {(n, c) for n in (1, 2) for c in range(112)}
    assert admit_timing(topology, planned, (1.0,) * 4, "node", taken) is None   # only node 3 is free


def test_no_timing_trial_runs_beside_another_on_a_single_node_under_node_isolation():
    topology = one_socket_2c()
    first = admit_timing(topology, place(topology, 1, 1), (1.0,), "node", frozenset())
    assert admit_timing(topology, place(topology, 1, 1), (1.0,), "node", first.region) is None
    # With no isolation, only the same cores collide: the planned CPU 0 is taken, and a timing trial keeps
    # its planned layout (it does not move to CPU 1 on the same node).
    alone = admit_timing(topology, place(topology, 1, 1), (1.0,), "none", frozenset())
    assert admit_timing(topology, place(topology, 1, 1), (1.0,), "none", alone.region) is None


def test_socket_isolation_lets_a_trial_on_the_other_socket_run():
    topology = emulated_2s1c()
    on_socket0 = admit_timing(topology, place(topology, 1, 1), (1.0,), "socket", frozenset())
    both = place(topology, 2, 1)   # one rank per socket: needs socket 0 too
    assert admit_timing(topology, both, (1.0, 1.0), "socket", on_socket0.region) is None


def test_convergence_runs_pack_onto_the_free_cores_one_thread_per_core():
    topology = one_socket_2c()
    first = admit_packed(topology, 1, 1, frozenset(), **PACK)
    second = admit_packed(topology, 1, 1, first.region, **PACK)
    assert _cpus(first) == [(0, (0,))] and _cpus(second) == [(0, (1,))]
    assert admit_packed(topology, 1, 1, first.region | second.region, **PACK) is None
    assert admit_packed(topology, 2, 1, first.region, **PACK) is None   # two ranks need both cores


def test_packed_ranks_never_take_a_busy_cores_sibling():
    topology = xeon_2s28c_smt()
    taken = frozenset({(0, 0)})  # only the first thread of core 0 is busy
    admission = admit_packed(topology, 1, 2, taken, **{**PACK, "hyperthreads": True})
    assert admission is not None and 56 not in admission.placement.ranks[0].cpus
    assert admission.placement.ranks[0].cpus == (1, 57)


def test_packed_budgets_share_the_node_memory_by_cores():
    topology = one_socket_2c()      # 8 GiB, 2 cores
    admission = admit_packed(topology, 1, 1, frozenset(), **PACK)
    assert admission.memory_budget_mib == (pytest.approx(8 * GIB * 0.9 / 2),)
    assert memory_share_mib(topology.nodes[0], 1, 0.9, False) == pytest.approx(8 * GIB * 0.9 / 2)


def test_a_run_too_big_for_its_share_waits_then_runs_alone_as_planned():
    topology = one_socket_2c()
    big = {**PACK, "rank_memory_mib": 5 * GIB}   # more than half the node's 7.2 GiB usable
    assert admit_packed(topology, 1, 1, frozenset(), **big) is None
    planned = place(topology, 1, 1)
    budgets = (8 * GIB * 0.9,)
    busy = frozenset({(0, 1)})
    assert admit_convergence(topology, planned, budgets, 1, 1, busy, **big) is None   # others run: it waits
    alone = admit_convergence(topology, planned, budgets, 1, 1, frozenset(), **big)
    assert alone is not None and alone.placement == planned and alone.memory_budget_mib == budgets
    assert alone.region == {(0, 0), (0, 1)}    # and nothing packs beside it


def test_packing_spans_nodes_on_a_cluster_and_keeps_untouched_nodes_alike():
    topology = detailed([{"name": f"n{i}", "memory_mib": 8 * GIB, "sockets": [[0, 1]]} for i in range(3)])
    taken = frozenset({(0, 0), (0, 1), (1, 0)})
    admission = admit_packed(topology, 2, 1, taken, **PACK)
    assert _cpus(admission) == [(2, (0,)), (2, (1,))]   # the fewest nodes: both ranks on the free node 2
    admission = admit_packed(topology, 3, 1, taken, **PACK)
    assert sorted(_cpus(admission)) == [(1, (1,)), (2, (0,)), (2, (1,))]


@pytest.mark.parametrize("isolation, expected", [("node", 4), ("socket", 4), ("none", 4)])
def test_sixteen_single_core_timing_trials_fill_a_4_node_cluster_one_per_node(isolation, expected):
    """Timing trials keep their planned CPUs; on 4 alike nodes, 4 copies of one planned trial run at once."""
    topology = cluster_4x2s28c()
    planned = place(topology, 1, 1)
    taken: frozenset = frozenset()
    admitted = 0
    while (a := admit_timing(topology, planned, (1.0,), isolation, taken)) is not None:
        taken |= a.region
        admitted += 1
    assert admitted == expected


def test_layout_region_lists_cpus_of_one_node_only():
    node = cluster_4x2s28c().nodes[0]
    layout = place(cluster_4x2s28c(), 2, 1).per_node[0][1]
    assert layout_region(node, layout, "none") == {0, 56, 28, 84}


def test_a_node_of_the_same_shape_but_other_cpu_numbers_takes_the_layout_at_the_same_positions():
    """Two Ray nodes emulated on one machine are numbered apart (node a: CPU 0-1, node b: CPU 2-3)."""
    topology = detailed([{"name": "a", "memory_mib": 8 * GIB, "sockets": [[0], [1]]},
                         {"name": "b", "memory_mib": 8 * GIB, "sockets": [[2], [3]]},
                         {"name": "c", "memory_mib": 4 * GIB, "sockets": [[0], [1]]}])   # other memory: unlike
    planned = place(topology, 2, 1)
    first = admit_timing(topology, planned, (1.0, 1.0), "node", frozenset())
    second = admit_timing(topology, planned, (1.0, 1.0), "node", first.region)
    assert _cpus(second) == [(1, (2,)), (1, (3,))]
    assert [r.socket for r in second.placement.ranks] == [0, 1]
    assert admit_timing(topology, planned, (1.0, 1.0), "node", first.region | second.region) is None
