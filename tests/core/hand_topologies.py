"""Hand-made topologies shared by the pure tests, each built the way a user would describe it.

Imported by name from the test modules next to it (pytest puts this folder on sys.path).
"""

from __future__ import annotations

from orchestrator.core.json.schema import load
from orchestrator.core.machine.topology import CompactTopology, Topology, build_compact, topology_from_data

GIB = 1024


def compact(**fields) -> Topology:
    """A compact-form topology; fails the test on any problem."""
    spec, problems = load(CompactTopology, fields)
    assert not problems, problems
    return build_compact(spec, source="test")


def detailed(nodes: list[dict]) -> Topology:
    topology, problems = topology_from_data({"nodes": nodes}, source="test")
    assert not problems, problems
    return topology


def one_socket_2c() -> Topology:
    return compact(name="laptop", sockets=1, cores_per_socket=2, memory_gib=8)


def xeon_2s28c() -> Topology:
    return compact(name="xeon", sockets=2, cores_per_socket=28, memory_gib=192)


def xeon_2s28c_smt() -> Topology:
    return compact(name="xeon-smt", sockets=2, cores_per_socket=28, threads_per_core=2, memory_gib=192)


def xeon_2s28c_snc() -> Topology:
    """Sub-NUMA clustering: each socket's 28 cores split into two NUMA nodes of 14."""
    return compact(name="xeon-snc", sockets=2, cores_per_socket=28, threads_per_core=2, numa_per_socket=2,
                   memory_gib=192)


def xeon_8s28c() -> Topology:
    return compact(name="big", sockets=8, cores_per_socket=28, threads_per_core=2, memory_gib=1536)


def cluster_4x2s28c() -> Topology:
    return compact(name="n", nodes=4, sockets=2, cores_per_socket=28, threads_per_core=2, memory_gib=192)


def emulated_2s1c() -> Topology:
    return compact(name="emulated", sockets=2, cores_per_socket=1, memory_gib=16, cpus=[[0], [1]])


def heterogeneous() -> Topology:
    """Three unlike nodes in the detailed form: a small one first (so that file order is not size order),
    a 2-socket SMT node with odd CPU numbering, and a 1-socket node with two NUMA nodes."""
    return detailed([
        {"name": "small", "memory_mib": 8 * GIB, "sockets": [[0, 1]]},
        {"name": "smt", "memory_mib": 64 * GIB,
         "sockets": [[[0, 8], [1, 9], [2, 10], [3, 11]], [[4, 12], [5, 13], [6, 14], [7, 15]]]},
        {"name": "snc", "memory_mib": 32 * GIB, "sockets": [[10, 11, 12, 13, 14, 15]],
         "numa_nodes": [{"cpus": [10, 11, 12], "memory_mib": 16 * GIB},
                        {"cpus": [13, 14, 15], "memory_mib": 16 * GIB}]},
    ])


def heterogeneous_repeated() -> Topology:
    """Alike nodes interleaved with unlike ones (two shapes, five nodes), so that placement, which works on
    groups of alike nodes, must still pick the fewest nodes with ties to the lower index across groups."""
    small = {"memory_mib": 12 * GIB, "sockets": [[0, 1], [2, 3]]}
    big = {"memory_mib": 16 * GIB, "sockets": [[0, 1, 2, 3], [4, 5, 6, 7]]}
    return detailed([{"name": "s0", **small}, {"name": "b1", **big}, {"name": "s2", **small},
                     {"name": "b3", **big}, {"name": "s4", **small}])


# (id, builder, hyperthreads) for whole-grid property tests.
ALL = [
    ("1s2c", one_socket_2c, False),
    ("2s28c", xeon_2s28c, False),
    ("2s28c-smt-off", xeon_2s28c_smt, False),
    ("2s28c-smt-on", xeon_2s28c_smt, True),
    ("2s28c-snc", xeon_2s28c_snc, False),
    ("8s28c", xeon_8s28c, False),
    ("4x2s28c", cluster_4x2s28c, False),
    ("4x2s28c-smt-on", cluster_4x2s28c, True),
    ("emulated-2s1c", emulated_2s1c, False),
    ("heterogeneous", heterogeneous, False),
    ("heterogeneous-smt-on", heterogeneous, True),
    ("heterogeneous-repeated", heterogeneous_repeated, False),
]
