"""Planning at cluster scale: alike nodes are grouped, placement touches only the nodes a trial uses, and
absurd sizes are refused with the numbers. Speed itself is measured in benchmarks/bench_plan.py."""

from __future__ import annotations

import random

import pytest

from orchestrator.core.json.schema import load
from orchestrator.core.machine.placement import place, spread
from orchestrator.core.machine.topology import MAX_CPUS_PER_NODE, MAX_NODES, CompactTopology, topology_from_data
from orchestrator.core.planning.plan import MAX_GRID_POINTS, MAX_PLACED_RANKS, PlanTooLarge, make_plan
from orchestrator.core.planning.spec import parse_spec

from hand_topologies import GIB, cluster_4x2s28c, compact, detailed, heterogeneous_repeated


def spread_by_rounds(count: int, capacities: list[int]) -> list[int] | None:
    """The original water-filling, one item per round to each open bin: the reference for `spread`."""
    if count > sum(capacities):
        return None
    shares, left = [0] * len(capacities), count
    while left:
        open_bins = sorted((i for i, cap in enumerate(capacities) if shares[i] < cap), key=lambda i: (shares[i], i))
        for i in open_bins[:left]:
            shares[i] += 1
            left -= 1
    return shares


def test_spread_matches_round_by_round_water_filling():
    rng = random.Random(11)
    for _ in range(2_000):
        capacities = [rng.choice([0, 1, 2, 3, 7, 28]) for _ in range(rng.randint(1, 9))]
        count = rng.randint(0, sum(capacities) + 2)
        assert spread(count, capacities) == spread_by_rounds(count, capacities), (count, capacities)


def test_a_compact_cluster_is_one_group_and_a_detailed_one_groups_by_shape():
    big = compact(name="n", nodes=10_000, sockets=2, cores_per_socket=56, threads_per_core=2, memory_gib=512)
    assert len(big.nodes) == 10_000 and len(big.groups) == 1 and big.groups[0].count == 10_000
    assert big.usable_cores(False) == 10_000 * 112 and big.usable_cores(True) == 10_000 * 224
    assert big.largest_socket(True) == 112
    mixed = heterogeneous_repeated()
    assert [(g.node.name, g.indices) for g in mixed.groups] == [("s0", (0, 2, 4)), ("b1", (1, 3))]


def test_placement_on_10000_nodes_is_the_placement_on_the_nodes_it_uses():
    shape = dict(sockets=2, cores_per_socket=28, threads_per_core=2, memory_gib=192)
    huge, four = compact(name="n", nodes=10_000, **shape), compact(name="n", nodes=4, **shape)
    for ranks, threads in [(1, 28), (2, 14), (8, 14), (16, 7), (16, 14), (7, 28), (8, 28)]:
        assert place(huge, ranks, threads) == place(four, ranks, threads), (ranks, threads)
    assert place(huge, 16, 28).nodes_used == 8   # 4 nodes hold only 8 ranks of 28 cores
    wide = place(huge, 20_000, 28)
    assert wide.nodes_used == 10_000 and {r.node for r in wide.ranks} == set(range(10_000))
    assert place(huge, 20_001, 28) is None


def test_alike_nodes_in_several_groups_tie_to_the_lower_index():
    topology = heterogeneous_repeated()   # s0 b1 s2 b3 s4: small nodes hold 2 ranks of 2 cores, big ones 4
    assert {r.node for r in place(topology, 4, 2).ranks} == {1}
    assert [r.node for r in place(topology, 6, 2).ranks] == [1, 1, 1, 3, 3, 3]
    # memory caps every node at 1 rank: the first three nodes in file order
    assert [r.node for r in place(topology, 3, 2, rank_memory_mib=9 * GIB, memory_headroom=1.0).ranks] == [0, 1, 2]


def test_table3_on_10000_nodes_plans_like_a_small_cluster():
    spec, problems = parse_spec({"name": "t", "workload": {"name": "classifier"}, "grid": {
        "ranks": [1, 2, 4, 8, 16], "threads_per_rank": [7, 14, 28, 56], "local_batch": [1, 2]}})
    assert problems == []
    huge = compact(name="n", nodes=10_000, sockets=2, cores_per_socket=28, threads_per_core=2, memory_gib=192)
    plan_huge = make_plan(spec, huge, rank_memory_mib=lambda b: 8_192.0 * b, ccl_available=False)
    plan_four = make_plan(spec, cluster_4x2s28c(), rank_memory_mib=lambda b: 8_192.0 * b, ccl_available=False)
    # 4 nodes already hold all of table3 but 16 ranks × 28 threads; identical placements where both fit
    for mine, theirs in zip(plan_huge.trials, plan_four.trials, strict=True):
        if theirs.feasible:
            assert (mine.placement, mine.memory_budget_mib) == (theirs.placement, theirs.memory_budget_mib)
    assert plan_huge.cell(16, 28, 1).feasible and not plan_four.cell(16, 28, 1).feasible
    assert plan_huge.cell(16, 28, 1).placement.nodes_used == 8


def test_memory_budgets_share_each_node_among_its_own_ranks():
    topology = heterogeneous_repeated()
    spec, _ = parse_spec({"name": "t", "workload": {"name": "classifier"},
                          "grid": {"ranks": [6], "threads_per_rank": [2], "local_batch": [1]}})
    cell = make_plan(spec, topology, rank_memory_mib=lambda b: 1.0, ccl_available=False).cell(6, 2, 1)
    assert cell.memory_budget_mib == (16 * GIB * 0.9 / 3,) * 6


# --- absurd sizes are refused, with the numbers -------------------------------------------------------------

def test_a_million_nodes_is_refused():
    _, problems = load(CompactTopology, {"nodes": 10**6, "sockets": 2, "cores_per_socket": 28, "memory_gib": 192})
    assert [str(p) for p in problems] == [f"nodes: must be <= {MAX_NODES}, got 1000000"]


def test_more_cpus_per_node_than_linux_allows_is_refused():
    _, problems = load(CompactTopology, {"sockets": 4, "cores_per_socket": 2048, "threads_per_core": 2,
                                         "memory_gib": 192})
    assert [p.message for p in problems] == [
        f"sockets(4) × cores_per_socket(2048) × threads_per_core(2) = 16,384 CPUs per node > "
        f"{MAX_CPUS_PER_NODE:,}, the most Linux supports (NR_CPUS)"]


def test_a_detailed_file_with_too_many_nodes_is_refused_before_reading_them():
    node = {"memory_mib": 1024, "sockets": [[0]]}
    topology, problems = topology_from_data({"nodes": [node] * (MAX_NODES + 1)})
    assert topology is None
    assert [str(p) for p in problems] == [f"nodes: lists {MAX_NODES + 1:,} nodes, more than orch plans for "
                                          f"({MAX_NODES:,})"]


def test_a_grid_of_too_many_points_is_refused():
    ranks = list(range(1, 301))
    threads = list(range(1, 1 + MAX_GRID_POINTS // 300 // 2 + 1))
    spec, _ = parse_spec({"name": "t", "workload": {"name": "classifier"},
                          "grid": {"ranks": ranks, "threads_per_rank": threads, "local_batch": [1, 2]}})
    points = 300 * len(threads) * 2
    with pytest.raises(PlanTooLarge, match=f"300 ranks × {len(threads)} threads × 2 local batch values = "
                                           f"{points:,} points, more than orch plans at once"):
        make_plan(spec, cluster_4x2s28c(), rank_memory_mib=lambda b: 1.0, ccl_available=False)


def test_a_grid_placing_too_many_ranks_is_refused():
    huge = compact(name="n", nodes=100_000, sockets=2, cores_per_socket=56, threads_per_core=2, memory_gib=512)
    spec, _ = parse_spec({"name": "t", "workload": {"name": "classifier"},
                          "grid": {"ranks": [10_000_000, 11_000_000], "threads_per_rank": [1], "local_batch": [1]}})
    with pytest.raises(PlanTooLarge, match=f"place 21,000,000 ranks in all, more than orch plans at once "
                                           f"\\({MAX_PLACED_RANKS:,}\\)"):
        make_plan(spec, huge, rank_memory_mib=lambda b: 1.0, ccl_available=False)


def test_the_auto_grid_on_10000_nodes_plans_without_listing_every_rank():
    huge = compact(name="n", nodes=10_000, sockets=2, cores_per_socket=56, threads_per_core=2, memory_gib=512)
    spec, _ = parse_spec({"name": "t", "workload": {"name": "classifier"}, "grid": {"local_batch": [8]}})
    plan = make_plan(spec, huge, rank_memory_mib=lambda b: 100.0, ccl_available=False)
    widest = plan.cell(1_048_576, 1, 8)   # 2^20 ranks of 1 core on 1,120,000 cores
    # the fewest nodes: ceil(2^20 ÷ 112 cores) = 9,363
    assert widest.feasible and widest.placement.nodes_used == 9_363 and len(widest.memory_budget_mib) == 2**20
    assert widest.placement._ranks is None   # nothing listed each rank's CPUs yet
    assert widest.placement.ranks[-1].node == 9_362 and len(widest.placement.ranks) == 2**20


def test_detailed_and_compact_forms_of_one_cluster_plan_alike():
    shape = dict(sockets=2, cores_per_socket=4, threads_per_core=2, memory_gib=16)
    as_compact = compact(name="n", nodes=3, **shape)
    as_detailed = detailed([dict(n.to_dict()) for n in as_compact.nodes])
    assert len(as_detailed.groups) == 1
    for ranks, threads in [(1, 4), (3, 2), (5, 4), (12, 2), (6, 3)]:
        assert place(as_compact, ranks, threads) == place(as_detailed, ranks, threads)
