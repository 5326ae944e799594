"""The machine model: compact and detailed file forms, CPU numbering, NUMA nodes, round trips."""

from __future__ import annotations

import json

import pytest

from orchestrator.core.machine.topology import MAX_CPUS_PER_NODE, Core, NumaNode, cpu_ranges, topology_from_data

from hand_topologies import (
    ALL,
    GIB,
    cluster_4x2s28c,
    emulated_2s1c,
    heterogeneous,
    one_socket_2c,
    xeon_2s28c_smt,
    xeon_2s28c_snc,
)


def problems_of(data) -> list[str]:
    topology, problems = topology_from_data(data)
    assert topology is None
    return [str(p) for p in problems]


# --- compact form ------------------------------------------------------------------------------------------

def test_compact_smt_numbering_follows_linux_intel_convention():
    node = xeon_2s28c_smt().nodes[0]
    s0, s1 = node.sockets
    assert s0.cores[0] == Core((0, 56)) and s0.cores[27] == Core((27, 83))
    assert s1.cores[0] == Core((28, 84)) and s1.cores[27] == Core((55, 111))
    assert s0.cpus(hyperthreads=False) == tuple(range(28))
    # siblings adjacent, so an even slice never splits a physical core
    assert s0.cpus(hyperthreads=True)[:4] == (0, 56, 1, 57)
    assert node.threads_per_core == 2
    assert node.usable_cores(False) == 56 and node.usable_cores(True) == 112
    assert node.memory_mib == 192 * GIB


def test_compact_default_numa_is_one_node_per_socket_sharing_memory():
    node = xeon_2s28c_smt().nodes[0]
    assert [n.index for n in node.numa_nodes] == [0, 1]
    assert node.numa_nodes[0].cpus == tuple(sorted(list(range(28)) + list(range(56, 84))))
    assert node.numa_nodes[1].memory_mib == 96 * GIB


def test_compact_numa_per_socket_splits_cores():
    node = xeon_2s28c_snc().nodes[0]
    assert len(node.numa_nodes) == 4
    assert node.numa_nodes[1].cpus == tuple(list(range(14, 28)) + list(range(70, 84)))
    assert node.numa_nodes[2].cpus[0] == 28
    assert node.numa_of_cpus((13, 14)) == (0, 1)
    assert node.numa_nodes[3].memory_mib == 48 * GIB


def test_compact_numa_per_socket_must_divide_cores():
    assert problems_of({"sockets": 2, "cores_per_socket": 28, "numa_per_socket": 3, "memory_gib": 1}) == [
        "<top>: numa_per_socket(3) must divide cores_per_socket(28)"]


def test_compact_nodes_are_named_and_repeated():
    topology = cluster_4x2s28c()
    assert [n.name for n in topology.nodes] == ["n0", "n1", "n2", "n3"]
    assert topology.usable_cores(False) == 224
    assert one_socket_2c().nodes[0].name == "laptop"


def test_compact_explicit_cpus_single_ids():
    node = emulated_2s1c().nodes[0]
    assert [s.cpus(False) for s in node.sockets] == [(0,), (1,)]
    assert [n.cpus for n in node.numa_nodes] == [(0,), (1,)]


def test_compact_explicit_cpus_with_siblings():
    topology, problems = topology_from_data({"sockets": 1, "cores_per_socket": 2, "threads_per_core": 2,
                                             "memory_gib": 4, "cpus": [[[0, 2], [1, 3]]]})
    assert problems == []
    assert topology.nodes[0].sockets[0].cpus(True) == (0, 2, 1, 3)


def test_compact_explicit_cpus_wrong_counts_are_all_reported():
    got = problems_of({"sockets": 2, "cores_per_socket": 2, "threads_per_core": 1, "memory_gib": 4,
                       "cpus": [[0, [1, 2]], [3]], })
    assert got == ["<top>: cpus[0][1]: 2 CPU id(s) but threads_per_core is 1",
                   "<top>: cpus[1]: 1 core(s) but cores_per_socket is 2"]
    assert problems_of({"sockets": 2, "cores_per_socket": 1, "memory_gib": 4, "cpus": [[0]]}) == [
        "<top>: cpus: lists 1 socket(s) but sockets is 2"]


def test_compact_explicit_cpus_duplicates_and_negatives_rejected():
    got = problems_of({"sockets": 2, "cores_per_socket": 1, "memory_gib": 4, "cpus": [[0], [0]]})
    assert got == ["<top>: cpus[1][0]: CPU id 0 appears twice"]
    got = problems_of({"sockets": 1, "cores_per_socket": 1, "memory_gib": 4, "cpus": [[-1]]})
    assert got == ["<top>: cpus[0][0]: CPU id -1 is negative"]


def test_compact_explicit_cpus_wrong_type_has_item_path():
    got = problems_of({"sockets": 1, "cores_per_socket": 1, "memory_gib": 4, "cpus": [["a"]]})
    assert got == ["cpus[0][0]: must be int or list of int, got 'a'"]


def test_compact_cpus_null_means_default_numbering():
    topology, problems = topology_from_data({"sockets": 1, "cores_per_socket": 2, "memory_gib": 1, "cpus": None})
    assert problems == [] and topology.nodes[0].sockets[0].cpus(False) == (0, 1)


def test_compact_strictness_reports_every_problem():
    got = problems_of({"sockets": 0, "cores_per_socket": "many", "memory_gib": -1, "socket": 2})
    assert "socket: unknown key; valid keys are: cores_per_socket, cpus, isa, memory_gib, name, network, nodes, " \
           "numa_per_socket, sockets, threads_per_core" in got
    assert "sockets: must be >= 1, got 0" in got
    assert "cores_per_socket: must be int, got 'many'" in got
    assert "memory_gib: must be > 0, got -1.0" in got
    assert len(got) == 4


def test_compact_missing_required_fields():
    got = problems_of({"nodes": 2})
    assert [g.split(":")[0] for g in got] == ["sockets", "cores_per_socket", "memory_gib"]
    assert all("required" in g for g in got)


@pytest.mark.parametrize("data, kind", [([1, 2], "list"), ("2s28c", "str"), (None, "NoneType")])
def test_topology_must_be_a_mapping(data, kind):
    assert problems_of(data) == [f"<top>: a topology must be a mapping, got {kind}"]


# --- detailed form -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, build, _ht", ALL, ids=[a[0] for a in ALL])
def test_detailed_round_trip_gives_an_equal_topology(name, build, _ht):
    topology = build()
    data = json.loads(json.dumps(topology.to_dict()))  # what `orch topology --json` writes
    again, problems = topology_from_data(data)
    assert problems == []
    assert again == topology


def test_detailed_round_trip_keeps_sparse_numa_indices_and_notes():
    topology = heterogeneous()
    data = topology.to_dict()
    data["nodes"][2]["numa_nodes"][1]["index"] = 3     # e.g. a CXL-only node 2 in between
    data["nodes"][0]["notes"] = ["memory limited by cgroup"]
    again, problems = topology_from_data(json.loads(json.dumps(data)))
    assert problems == []
    assert [n.index for n in again.nodes[2].numa_nodes] == [0, 3]
    assert again.nodes[0].notes == ("memory limited by cgroup",)
    assert again.to_dict() == data


def test_detailed_defaults_one_numa_node_per_socket():
    node = heterogeneous().nodes[1]
    assert [n.cpus for n in node.numa_nodes] == [tuple(range(0, 4)) + tuple(range(8, 12)),
                                                 tuple(range(4, 8)) + tuple(range(12, 16))]
    assert node.numa_nodes[0].memory_mib == 32 * GIB
    assert node.threads_per_core == 2


def test_detailed_problems_are_all_reported_with_paths():
    got = problems_of({"nodes": [
        {"name": "a", "memory_mib": 0, "sockets": [[0, 1], [1, "x"]], "cores": 3},
        {"memory_mib": 1024},
        {"memory_mib": 1024, "sockets": [[0]],
         "numa_nodes": [{"cpus": [0, 7], "memory_mib": "lots", "size": 1}, "n1"]},
        {"memory_mib": 1024, "sockets": [[0, 1], [1]], "numa_nodes": [{"cpus": [0, 7]}]},
        {"memory_mib": 1024, "sockets": []},
    ], "extra": 1})
    assert got == [
        "extra: unknown key; valid keys are: network, nodes, source",
        "nodes[0].cores: unknown key; valid keys are: isa, memory_mib, name, notes, numa_nodes, sockets",
        "nodes[0].memory_mib: must be > 0, got 0.0",
        "nodes[0].sockets[1][1]: must be int or list of int, got 'x'",
        "nodes[1].sockets: required (per socket, a list of cores, each a CPU id or a list of sibling CPU ids)",
        "nodes[2].numa_nodes[0].size: unknown key; valid keys are: cpus, index, memory_mib",
        "nodes[2].numa_nodes[0].memory_mib: must be float, got 'lots'",
        "nodes[2].numa_nodes[1]: must be a mapping, got 'n1'",
        # what the schema cannot say (a CPU twice, NUMA CPUs in no socket, no socket) is checked for every
        # node whose types are right, and reported with the type problems of the others
        "nodes[3].sockets[1][0]: CPU id(s) [1] appear twice",
        "nodes[3].numa_nodes[0].cpus: CPU id(s) [7] are in no socket of this node",
        "nodes[4].sockets: must list at least one socket (a list of cores)",
    ]


def test_detailed_cpu_ids_are_non_negative_and_a_core_has_at_least_one():
    got = problems_of({"nodes": [{"memory_mib": 1024, "sockets": [[0, [1, -2], -3]],
                                  "numa_nodes": [{"index": -1, "cpus": [-4], "memory_mib": -1}]}]})
    assert got == ["nodes[0].sockets[0][1][1]: must be >= 0, got -2",
                   "nodes[0].sockets[0][2]: must be >= 0, got -3",
                   "nodes[0].numa_nodes[0].index: must be >= 0, got -1",
                   "nodes[0].numa_nodes[0].cpus[0]: must be >= 0, got -4",
                   "nodes[0].numa_nodes[0].memory_mib: must be >= 0, got -1.0"]
    assert problems_of({"nodes": [{"memory_mib": 1024, "sockets": [[0, []]]}]}) == [
        "nodes[0].sockets[0][1]: must list at least one CPU id"]


def test_detailed_node_with_more_cpus_than_linux_allows_is_refused():
    got = problems_of({"nodes": [{"memory_mib": 1024, "sockets": [list(range(MAX_CPUS_PER_NODE + 1))]}]})
    assert got == [f"nodes[0].sockets: lists {MAX_CPUS_PER_NODE + 1:,} CPUs, more than Linux supports per node "
                   f"(NR_CPUS, {MAX_CPUS_PER_NODE:,})"]


def test_detailed_node_without_a_name_is_named_by_its_path():
    topology, problems = topology_from_data({"nodes": [{"memory_mib": 1024, "sockets": [[0]]}], "source": "s"})
    assert problems == [] and topology.nodes[0].name == "nodes[0]" and topology.source == "s"


def test_detailed_null_numa_nodes_and_notes_mean_not_given():
    topology, problems = topology_from_data({"nodes": [{"memory_mib": 1024, "sockets": [[0]], "numa_nodes": None,
                                                        "notes": None}]})
    assert problems == [] and topology.nodes[0].numa_nodes == (NumaNode(0, (0,), 1024.0),)
    assert topology.nodes[0].notes == ()


def test_detailed_empty_node_list_rejected():
    assert problems_of({"nodes": []}) == ["nodes: must list at least one node"]


def test_describe_names_every_shape():
    assert cluster_4x2s28c().describe() == "4 node(s): 2 socket(s) × 28 cores × 2 thread(s), 192 GiB"
    text = heterogeneous().describe()
    assert text.startswith("3 node(s): ")
    assert "1 socket(s) × 2 cores × 1 thread(s), 8 GiB" in text
    assert "2 socket(s) × 4 cores × 2 thread(s), 64 GiB" in text


def test_cpu_ranges():
    assert cpu_ranges([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert cpu_ranges([3]) == "3"
