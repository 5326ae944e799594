"""`orch plan` resolves the precision `orch sweep` would resolve on the same machine, whatever this CPU is.

The sweep takes each node's CPU verdict from the Ray node it runs on unless the topology file states one; a plan
of a file that describes this machine must take this machine's verdict too, or the two disagree on every CPU that
computes bf16 natively (and look for a probe in the wrong precision). The CPU is stood in for by its flags, so
these tests hold on an AVX2-only CPU and on a bf16-native one alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.core.machine.isa import FLAGS, CpuIsa
from orchestrator.io import isa as isa_io

REPO = Path(__file__).resolve().parents[2]
RETINANET = str(REPO / "sweeps" / "retinanet.yaml")                            # precision: auto
THIS_MACHINE = str(REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml")     # CPUs 0 and 1, no isa:

BF16_NATIVE = CpuIsa(features=("avx2", "avx512f", "avx512_bf16"), source=FLAGS, cpu_model="a bf16 CPU")
AVX2_ONLY = CpuIsa(features=("avx2",), source=FLAGS, cpu_model="an AVX2 CPU")


def planned(capsys, monkeypatch, cpu: CpuIsa, topology: str) -> dict:
    monkeypatch.setattr(isa_io, "from_flags", lambda *args, **kwargs: cpu)
    assert main(["plan", RETINANET, "--topology", topology, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# THIS_MACHINE describes this machine only where this process may use CPUs 0 and 1 (not under `taskset -c 0`)
@pytest.mark.needs_cpus(2)
@pytest.mark.parametrize(("cpu", "chosen"), [(BF16_NATIVE, "bf16"), (AVX2_ONLY, "fp32")])
def test_a_file_that_describes_this_machine_plans_in_this_cpus_precision(capsys, monkeypatch, cpu, chosen):
    plan = planned(capsys, monkeypatch, cpu, THIS_MACHINE)
    assert plan["precision"]["chosen"] == chosen
    assert plan["precision"]["per_node"] == [f"emulated-2s1c: {cpu.verdict()}"]
    assert "CPU verdict from this machine, which it describes (the file states no isa:)" in plan["topology"]["source"]


def test_a_file_that_describes_another_machine_assumes_nothing_and_says_so(capsys, monkeypatch, tmp_path):
    cluster = tmp_path / "cluster.yaml"     # as cluster-4x2s28c.yaml, without its isa:
    cluster.write_text("nodes: 4\nsockets: 2\ncores_per_socket: 28\nmemory_gib: 256\n")
    plan = planned(capsys, monkeypatch, BF16_NATIVE, str(cluster))
    assert plan["precision"]["chosen"] == "fp32"
    assert "nothing says whether it computes bf16 natively (state isa: in the topology)" in plan["precision"]["reason"]
    assert "another machine (4 nodes): no CPU verdict assumed where it states no isa:" in plan["topology"]["source"]


@pytest.mark.needs_cpus(2)
def test_plan_and_probe_read_the_same_machine(monkeypatch):
    """`orch probe` measures in the precision the plan will look its probe up in: one function gives both."""
    from orchestrator.app import probe
    from orchestrator.io.topofile import planned_machine

    monkeypatch.setattr(isa_io, "from_flags", lambda *args, **kwargs: BF16_NATIVE)
    assert probe.planned_machine is planned_machine
    [node] = planned_machine(THIS_MACHINE).nodes
    assert node.isa == BF16_NATIVE
