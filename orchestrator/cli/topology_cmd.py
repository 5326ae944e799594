"""`orch topology`: show the machine model that planning uses."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from orchestrator.app import topology as app_topology
from orchestrator.app.options import TopologyOptions
from orchestrator.cli.common import EXIT_OK, console, examples
from orchestrator.cli.options import add_options, options_from
from orchestrator.core.machine.isa import ISA_FEATURES, CpuIsa
from orchestrator.core.machine.topology import MIB_PER_GIB, Topology, cpu_ranges

if TYPE_CHECKING:   # rich and the run layer: imported when a topology is shown
    from rich.console import Group
    from rich.table import Table

    from orchestrator.run.driver.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "topology", help="show this machine's topology (or a topology file's)",
        description="Print sockets, physical cores with their CPU ids, hardware threads per core, NUMA nodes, "
                    "memory, and what the CPU computes natively: its ISA features (avx2, avx512f, avx512_bf16, "
                    "amx_bf16, ...), the kernels torch dispatches to, and the bf16 verdict from a 0.1 s GEMM probe "
                    "(bf16 against fp32 on one core), which decides `precision: auto`. Detected from "
                    "/sys/devices/system, /proc/cpuinfo and psutil unless --topology is given. The --json "
                    "output is itself a valid topology file (detailed form): save it on a machine and plan for it "
                    "elsewhere with `orch plan --topology`.",
        **examples(
                   "orch topology",
                   "orch topology --topology sweeps/topologies/xeon-2s28c-smt.yaml --json",
                   anchor="orch-topology"))
    add_options(parser, TopologyOptions)
    parser.add_argument("--json", action="store_true",
                        help="print JSON (a detailed-form topology file) instead of a table")
    parser.set_defaults(run=run)


def render(topology: Topology) -> Group:
    from rich.console import Group, RenderableType
    from rich.table import Table
    from rich.text import Text

    parts: list[RenderableType] = [Text(f"{topology.describe()}   [{topology.source}]", style="bold")]
    for index, node in enumerate(topology.nodes):
        table = Table(title=f"node {index}: {node.name} — {node.memory_mib / MIB_PER_GIB:,.1f} GiB, "
                            f"{node.threads_per_core} thread(s)/core", title_justify="left")
        table.add_column("socket", justify="right")
        table.add_column("cores", justify="right")
        table.add_column("CPU ids (first thread of each core)")
        table.add_column("SMT sibling CPU ids")
        table.add_column("NUMA nodes")
        for s in node.sockets:
            siblings = [cpu for c in s.cores for cpu in c.cpus[1:]]
            table.add_row(str(s.index), str(len(s.cores)), cpu_ranges(s.cpus(False)), cpu_ranges(siblings) or "–",
                          ",".join(map(str, node.numa_of_cpus(s.cpus(True)))) or "?")
        parts.append(table)
        numa = Table(title="NUMA nodes", title_justify="left")
        numa.add_column("node", justify="right")
        numa.add_column("CPUs")
        numa.add_column("memory (GiB)", justify="right")
        for n in node.numa_nodes:
            numa.add_row(str(n.index), cpu_ranges(n.cpus) or "–", f"{n.memory_mib / MIB_PER_GIB:,.1f}")
        parts.append(numa)
        if node.isa is not None:
            parts.append(Text(isa_line(node.isa)))
        parts += [Text(f"note: {note}", style="yellow") for note in node.notes]
    return Group(*parts)


def isa_line(isa: CpuIsa) -> str:
    """One line: the CPU's features, torch's kernels, and the bf16 verdict with its evidence."""
    features = ", ".join(isa.features) or "none of " + ", ".join(ISA_FEATURES)
    extra = [f"torch kernels {isa.torch_capability}"] if isa.torch_capability else []
    extra += [f"ONEDNN_MAX_CPU_ISA={isa.isa_cap}"] if isa.isa_cap else []
    model = f"{isa.cpu_model}: " if isa.cpu_model else ""
    return f"CPU: {model}{features}{'; ' + '; '.join(extra) if extra else ''}\n{isa.verdict()}"


def render_ray_nodes(cluster: Cluster) -> Table:
    """One row per Ray node: what Ray counts (its logical "CPU" resource) beside what orch may pin to."""
    from rich.table import Table

    table = Table(title="Ray nodes (each detected on that node)", title_justify="left")
    for column in ("node", "host", "address", "Ray CPUs", "usable CPUs", "sockets", "cores", "memory (GiB)"):
        table.add_column(column, justify="left" if column in ("host", "address", "usable CPUs") else "right")
    for index, ray_node in enumerate(cluster.nodes):
        node = ray_node.topology.nodes[0]
        table.add_row(str(index), ray_node.hostname, ray_node.ip, f"{ray_node.ray_cpus:g}",
                      f"{len(ray_node.cpus)}: {cpu_ranges(ray_node.cpus)}", str(len(node.sockets)),
                      str(node.usable_cores(False)), f"{node.memory_mib / MIB_PER_GIB:,.1f}")
    return table


def run(args: argparse.Namespace) -> int:
    shown = app_topology.topology(options_from(TopologyOptions, args))
    if args.json:
        print(json.dumps(shown.topology.to_dict(), indent=2))
    else:
        if shown.cluster is not None:
            console().print(render_ray_nodes(shown.cluster))
        console().print(render(shown.topology))
    return EXIT_OK
