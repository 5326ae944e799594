"""Detect the local machine's topology from Linux's own descriptions.

Sources: /sys/devices/system/cpu/cpuN/topology (sockets, cores, SMT siblings), /sys/devices/system/node
(NUMA nodes and their memory), psutil and the cgroup limit for usable memory, and the process's CPU
affinity (a container or batch scheduler may give us fewer CPUs than the machine has). Where a file is
missing the result degrades to something safe and says so in `Node.notes`.
"""

from __future__ import annotations

import os
import socket as socketlib
from collections import defaultdict
from pathlib import Path

import psutil

from orchestrator.core.machine.topology import BYTES_PER_MIB, Core, Node, NumaNode, Socket, Topology, cpu_ranges
from orchestrator.io import isa

SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")
CGROUP_MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")


def parse_cpulist(text: str) -> tuple[int, ...]:
    """'0-3,8,10-11' -> (0, 1, 2, 3, 8, 10, 11)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(cpus)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _usable_memory_mib(notes: list[str]) -> float:
    total = psutil.virtual_memory().total
    limit_text = _read(CGROUP_MEMORY_MAX)
    if limit_text and limit_text != "max" and int(limit_text) < total:
        notes.append(f"memory limited by cgroup to {int(limit_text) / BYTES_PER_MIB:,.0f} MiB "
                     f"(machine has {total / BYTES_PER_MIB:,.0f} MiB)")
        return int(limit_text) / BYTES_PER_MIB
    return total / BYTES_PER_MIB


def cgroup_cpuset() -> tuple[tuple[int, ...], Path] | None:
    """The CPUs this process's cgroup allows, and the file that says so; None where no cgroup names them.

    cgroup v2: `cpuset.cpus.effective` of the process's cgroup (the `0::PATH` line of /proc/self/cgroup), or
    of the nearest ancestor that has one (the controller may be enabled higher up); cgroup v1:
    `cpuset.effective_cpus` under the cpuset hierarchy. A container (Kubernetes' static CPU manager, a SLURM
    step with ConstrainCores) gets its exclusive cores this way. Linux normally narrows the affinity to
    match, but a runtime that changes the cpuset of a running container, or a process started with a wider
    mask than its cgroup, can leave them apart (pytorch#131011): pinning must stay inside the cgroup's set.
    """
    for line in (_read(PROC_SELF_CGROUP) or "").splitlines():
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "-", "")
        if controllers == "":
            root, name = CGROUP_ROOT, "cpuset.cpus.effective"
        elif "cpuset" in controllers.split(","):
            root, name = CGROUP_ROOT / "cpuset", "cpuset.effective_cpus"
        else:
            continue
        here = root / path.lstrip("/")
        for folder in (here, *here.parents):
            text = _read(folder / name)
            if text:
                return parse_cpulist(text), folder / name
            if folder == root:
                break
    return None


def usable_cpus(notes: list[str] | None = None) -> list[int]:
    """This process's affinity, narrowed to its cgroup's cpuset where that is smaller (said so in `notes`)."""
    allowed = sorted(os.sched_getaffinity(0))
    cpuset = cgroup_cpuset()
    if cpuset is not None:
        inside = [c for c in allowed if c in set(cpuset[0])]
        if inside and len(inside) < len(allowed):
            if notes is not None:
                notes.append(f"the cgroup cpuset ({cpuset[1]}: {cpu_ranges(cpuset[0])}) is smaller than this "
                             f"process's affinity ({cpu_ranges(allowed)}): planned and pinned on the "
                             f"{len(inside)} CPU(s) it allows")
            return inside
    return allowed


def detect_local(sys_cpu: Path = SYS_CPU, sys_node: Path = SYS_NODE, *, probe_isa: bool = False) -> Topology:
    """The topology of this machine, restricted to the CPUs this process may run on, with what its CPU
    computes natively: from a bf16-against-fp32 GEMM probe when `probe_isa` (imports torch, ~0.1 s once
    imported), else from the CPU flags alone."""
    notes: list[str] = []
    allowed = usable_cpus(notes)
    online_text = _read(sys_cpu / "online")
    online = set(parse_cpulist(online_text)) if online_text else set(allowed)
    cpus = [c for c in allowed if c in online]
    if len(cpus) < len(online):
        notes.append(f"this process may use {len(cpus)} of {len(online)} online CPUs (affinity/cpuset)")

    # socket -> core id -> sibling CPUs
    layout: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    missing_topology = False
    for cpu in cpus:
        topo = sys_cpu / f"cpu{cpu}" / "topology"
        package, core = _read(topo / "physical_package_id"), _read(topo / "core_id")
        if package is None or core is None:
            missing_topology = True
            package, core = "0", str(cpu)
        layout[int(package)][int(core)].append(cpu)
    if missing_topology:
        notes.append(f"{sys_cpu}/cpuN/topology is missing: each CPU is treated as a core of socket 0")

    sockets = []
    for index, package_id in enumerate(sorted(layout)):
        cores = sorted((tuple(sorted(sibs)) for sibs in layout[package_id].values()), key=lambda c: c[0])
        sockets.append(Socket(index, tuple(Core(c) for c in cores)))

    memory_mib = _usable_memory_mib(notes)
    numa = _detect_numa(sys_node, set(cpus), memory_mib, notes)
    cpu_isa = isa.probe() if probe_isa else isa.from_flags()
    return Topology((Node(socketlib.gethostname(), tuple(sockets), numa, memory_mib, tuple(notes), cpu_isa),),
                    source=f"detected on {socketlib.gethostname()}")


def _detect_numa(sys_node: Path, cpus: set[int], memory_mib: float, notes: list[str]) -> tuple[NumaNode, ...]:
    nodes = []
    for path in sorted(sys_node.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        node_cpus = tuple(c for c in parse_cpulist(_read(path / "cpulist") or "") if c in cpus)
        meminfo = _read(path / "meminfo") or ""
        total_kb = next((int(line.split()[-2]) for line in meminfo.splitlines() if "MemTotal" in line), 0)
        if node_cpus or total_kb:
            nodes.append(NumaNode(int(path.name[4:]), node_cpus, total_kb / 1024))
    if not nodes:
        notes.append(f"{sys_node} is missing: one NUMA node assumed")
        return (NumaNode(0, tuple(sorted(cpus)), memory_mib),)
    return tuple(nodes)
