"""Load a topology file (compact or detailed form, YAML or JSON)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.core.schema import InvalidInput
from orchestrator.core.topology import Topology, topology_from_data
from orchestrator.io.yamlfile import read_yaml, with_lines


def load_topology(path: str | Path) -> Topology:
    data, lines = read_yaml(path, "topology file")
    topology, problems = topology_from_data(data, source=f"file {path}")
    if topology is None:
        raise InvalidInput(f"topology file {path}", with_lines(problems, lines))
    return topology
