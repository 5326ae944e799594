"""Topology detection against fake /sys trees written to tmp_path, and once against this machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.core.machine.topology import Core, topology_from_data
from orchestrator.io import detect
from orchestrator.io.detect import detect_local, parse_cpulist


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def fake_sys(root: Path, *, sockets: int = 2, cores: int = 2, threads: int = 2, numa: bool = True,
             topology: bool = True) -> tuple[Path, Path]:
    """Linux's numbering on Intel: first threads of all cores, socket by socket, then their siblings."""
    sys_cpu, sys_node = root / "cpu", root / "node"
    total = sockets * cores
    write(sys_cpu / "online", f"0-{total * threads - 1}")
    for t in range(threads):
        for s in range(sockets):
            for c in range(cores):
                cpu = t * total + s * cores + c
                (sys_cpu / f"cpu{cpu}").mkdir(parents=True)
                if topology:
                    write(sys_cpu / f"cpu{cpu}" / "topology" / "physical_package_id", str(s))
                    write(sys_cpu / f"cpu{cpu}" / "topology" / "core_id", str(c))
    if numa:
        for s in range(sockets):
            ids = [t * total + s * cores + c for t in range(threads) for c in range(cores)]
            write(sys_node / f"node{s}" / "cpulist", ",".join(map(str, sorted(ids))))
            write(sys_node / f"node{s}" / "meminfo",
                  f"Node {s} MemTotal:       {8 * 2**20} kB\nNode {s} MemFree:        {2**20} kB")
    return sys_cpu, sys_node


@pytest.fixture
def affinity(monkeypatch):
    """Pretend this process may run on the given CPUs (the real machine may have fewer than the fake tree)."""
    def set_(cpus):
        monkeypatch.setattr(detect.os, "sched_getaffinity", lambda pid: set(cpus))
    return set_


@pytest.fixture(autouse=True)
def no_cgroup(request, tmp_path, monkeypatch):
    """The fake trees describe machines larger than this one: this machine's own cgroup cpuset must not narrow
    them (test_this_machine keeps it; the `cgroup` fixture below writes a fake one)."""
    if request.node.name != "test_this_machine":
        monkeypatch.setattr(detect, "PROC_SELF_CGROUP", tmp_path / "no-proc-self-cgroup")


@pytest.mark.parametrize("text, expected", [
    ("0-3,8,10-11", (0, 1, 2, 3, 8, 10, 11)), ("5", (5,)), ("", ()), ("0-1,\n", (0, 1)),
])
def test_parse_cpulist(text, expected):
    assert parse_cpulist(text) == expected


def test_two_sockets_with_smt_siblings_and_numa_memory(tmp_path, affinity):
    affinity(range(8))
    topology = detect_local(*fake_sys(tmp_path))
    (node,) = topology.nodes
    assert [s.cores for s in node.sockets] == [(Core((0, 4)), Core((1, 5))), (Core((2, 6)), Core((3, 7)))]
    assert node.threads_per_core == 2
    assert [(n.index, n.cpus, n.memory_mib) for n in node.numa_nodes] == [
        (0, (0, 1, 4, 5), 8192.0), (1, (2, 3, 6, 7), 8192.0)]
    assert node.memory_mib > 0
    assert not any("missing" in note or "may use" in note for note in node.notes)
    assert topology.source.startswith("detected on ")


def test_detected_topology_round_trips_through_the_detailed_form(tmp_path, affinity):
    affinity(range(8))
    topology = detect_local(*fake_sys(tmp_path))
    again, problems = topology_from_data(topology.to_dict())
    assert problems == [] and again == topology


def test_restricted_affinity_keeps_only_allowed_cpus_with_a_note(tmp_path, affinity):
    affinity({0, 1, 4, 5})
    (node,) = detect_local(*fake_sys(tmp_path)).nodes
    assert [s.cores for s in node.sockets] == [(Core((0, 4)), Core((1, 5)))]
    assert "this process may use 4 of 8 online CPUs (affinity/cpuset)" in node.notes
    assert [n.cpus for n in node.numa_nodes] == [(0, 1, 4, 5), ()]   # node 1 keeps its memory, no CPUs


def test_missing_topology_dir_degrades_to_one_socket_with_a_note(tmp_path, affinity):
    affinity(range(4))
    sys_cpu, sys_node = fake_sys(tmp_path, sockets=1, cores=2, threads=2, topology=False)
    (node,) = detect_local(sys_cpu, sys_node).nodes
    assert len(node.sockets) == 1
    assert node.sockets[0].cores == (Core((0,)), Core((1,)), Core((2,)), Core((3,)))
    assert any(note.endswith("cpuN/topology is missing: each CPU is treated as a core of socket 0")
               for note in node.notes)


def test_missing_node_dir_gives_one_numa_node_with_a_note(tmp_path, affinity):
    affinity(range(8))
    sys_cpu, sys_node = fake_sys(tmp_path, numa=False)
    (node,) = detect_local(sys_cpu, sys_node).nodes
    assert len(node.sockets) == 2
    assert [(n.index, n.cpus, n.memory_mib) for n in node.numa_nodes] == [(0, tuple(range(8)), node.memory_mib)]
    assert f"{sys_node} is missing: one NUMA node assumed" in node.notes


def test_missing_online_file_uses_the_affinity(tmp_path, affinity):
    affinity(range(8))
    sys_cpu, sys_node = fake_sys(tmp_path)
    (sys_cpu / "online").unlink()
    (node,) = detect_local(sys_cpu, sys_node).nodes
    assert node.usable_cores(True) == 8


def test_this_machine():
    topology = detect_local()
    (node,) = topology.nodes
    assert len(node.sockets) >= 1
    cpus = [cpu for s in node.sockets for core in s.cores for cpu in core.cpus]
    assert cpus and len(cpus) == len(set(cpus))
    assert set(cpus) <= os.sched_getaffinity(0)
    assert node.memory_mib > 0
    assert node.numa_nodes and {c for n in node.numa_nodes for c in n.cpus} <= set(cpus)


def fake_cgroup(root: Path, lines: str, files: dict[str, str]) -> None:
    """/proc/self/cgroup with `lines`, and files (paths relative to a fake /sys/fs/cgroup) with their text."""
    write(root / "proc-self-cgroup", lines)
    for path, text in files.items():
        write(root / "cgroup" / path, text)


@pytest.fixture
def cgroup(tmp_path, monkeypatch):
    def set_(lines: str, files: dict[str, str]) -> None:
        fake_cgroup(tmp_path / "fs", lines, files)
        monkeypatch.setattr(detect, "PROC_SELF_CGROUP", tmp_path / "fs" / "proc-self-cgroup")
        monkeypatch.setattr(detect, "CGROUP_ROOT", tmp_path / "fs" / "cgroup")
    return set_


@pytest.mark.parametrize("lines, files", [
    # cgroup v2, the cpuset controller enabled on the pod's cgroup, read from the container's (its child)
    ("0::/kubepods/pod1/ctr", {"kubepods/pod1/cpuset.cpus.effective": "0-1,4-5",
                               "kubepods/pod1/ctr/cgroup.procs": "1"}),
    # cgroup v1 (hybrid hierarchy, as on this development machine)
    ("4:memory:/x\n3:cpuset:/slurm/job7\n0::/", {"cpuset/slurm/job7/cpuset.effective_cpus": "0,1,4,5"}),
])
def test_a_cgroup_cpuset_smaller_than_the_affinity_is_what_is_planned_with_a_note(tmp_path, affinity, cgroup,
                                                                                    lines, files):
    affinity(range(8))       # e.g. a runtime that narrowed the container's cpuset after its processes started
    cgroup(lines, files)
    (node,) = detect_local(*fake_sys(tmp_path)).nodes
    assert [s.cores for s in node.sockets] == [(Core((0, 4)), Core((1, 5)))]
    assert any(note.startswith("the cgroup cpuset (") and "0-1,4-5" in note and "planned and pinned on the 4 CPU(s)"
               in note for note in node.notes), node.notes
    assert detect.usable_cpus() == [0, 1, 4, 5]   # what a Ray node reports as the CPUs orch may pin to


@pytest.mark.parametrize("lines, files", [
    ("0::/", {}),                                              # v2 without the cpuset controller
    ("0::/a", {"cpuset.cpus.effective": "0-7"}),               # the cpuset allows every CPU
    ("1:cpu:/\n0::/", {"cpuset.cpus.effective": "9"}),         # names none of ours: keep the affinity
    ("not a cgroup line", {}),
])
def test_no_smaller_cpuset_leaves_the_affinity_alone(tmp_path, affinity, cgroup, lines, files):
    affinity(range(8))
    cgroup(lines, files)
    (node,) = detect_local(*fake_sys(tmp_path)).nodes
    assert node.usable_cores(True) == 8
    assert not any("cgroup cpuset" in note for note in node.notes)
