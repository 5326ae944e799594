"""Load a topology file (compact or detailed form, YAML or JSON)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.core.json.schema import InvalidInput
from orchestrator.core.machine.topology import Topology, topology_from_data
from orchestrator.io.yamlfile import read_yaml, with_lines


def load_topology(path: str | Path) -> Topology:
    data, lines = read_yaml(path, "topology file")
    topology, problems = topology_from_data(data, source=f"file {path}")
    if topology is None:
        raise InvalidInput(f"topology file {path}", with_lines(problems, lines))
    return topology


def load_for_this_machine(path: str | Path) -> Topology:
    """A topology file read to plan what `orch sweep` would run here, on an embedded Ray. The sweep takes each
    node's CPU verdict from the Ray node it runs on unless the file states one (`isa:`), so a plan must do the
    same, or `orch plan` and `orch sweep` resolve different precisions (and probes) for one machine. Where the
    file describes this machine (one node whose CPUs this process may use), its nodes without `isa:` get this
    machine's verdict from the CPU flags (no torch), and the topology's source says so; where it describes
    another machine, nothing is assumed and the source says why."""
    from orchestrator.io.detect import detect_local

    topology = load_topology(path)
    if all(node.isa is not None for node in topology.nodes):
        return topology
    here = detect_local()
    if len(topology.nodes) == 1 and topology.cpu_ids() <= here.cpu_ids():
        return topology.with_unstated_isa([here.nodes[0].isa],
                                          f"{topology.source}; CPU verdict from this machine, which it describes "
                                          "(the file states no isa:)")
    why = (f"{len(topology.nodes)} nodes" if len(topology.nodes) > 1 else
           f"CPU(s) {sorted(topology.cpu_ids() - here.cpu_ids())[:8]} this machine lacks")
    return Topology(topology.nodes, f"{topology.source}; another machine ({why}): no CPU verdict assumed where it "
                                    "states no isa:")


def planned_machine(path: str | Path | None) -> Topology:
    """The machine `orch plan` and `orch probe` plan for: a topology file (`load_for_this_machine`), else this
    machine, detected (its CPU verdict from the flags: no torch)."""
    if path:
        return load_for_this_machine(path)
    from orchestrator.io.detect import detect_local

    return detect_local()
