"""`orch profile` decides `precision: auto` as a sweep does, before its ranks start: a `model_workload`'s trainer
refuses `auto` (deciding it probes the CPU, which the public workload door may not), so a profile's ranks, like
a sweep's, get the precision decided for the machine's nodes. The CPU is stood in for by its flags, so these
tests hold on an AVX2-only CPU and on a bf16-native one alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_sweep

from orchestrator.app.profile import _precision_decided
from orchestrator.core.machine.isa import FLAGS, CpuIsa
from orchestrator.core.machine.topology import Topology
from orchestrator.core.planning.trial import Trial
from orchestrator.io import isa as isa_io
from orchestrator.io.sweepfile import load_sweep
from orchestrator.io.topofile import planned_machine
from orchestrator.run.driver.profile_run import ProfileTarget, variant_params

REPO = Path(__file__).resolve().parents[2]
TINYNET = REPO / "tests" / "data" / "own_model" / "tinynet.py"
THIS_MACHINE = str(REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml")     # CPUs 0 and 1, no isa:
BF16_NATIVE = CpuIsa(features=("avx2", "avx512f", "avx512_bf16"), source=FLAGS, cpu_model="a bf16 CPU")
AVX2_ONLY = CpuIsa(features=("avx2",), source=FLAGS, cpu_model="an AVX2 CPU")


def _machine(monkeypatch: pytest.MonkeyPatch, cpu: CpuIsa) -> Topology:
    monkeypatch.setattr(isa_io, "from_flags", lambda *args, **kwargs: cpu)
    return planned_machine(THIS_MACHINE)


def _decided(tmp_path: Path, topology: Topology, workload: str, variants: str) -> dict[str, str]:
    sweep = load_sweep(write_sweep(tmp_path, "prof-precision", f"""
        workload: {{name: "{workload}"}}
        grid: {{ranks: [1], threads_per_rank: [1], local_batch: [8]}}
        profile: {{layouts: [1x1x8], variants: {variants}}}
        """))
    trial = Trial(ranks=1, threads_per_rank=1, local_batch=8)
    targets = [ProfileTarget(name, trial, None, params)   # its planned trial is not read here
               for name, params in variant_params(sweep, sweep.spec.profile.variants).items()]
    return {t.variant: t.params["precision"] for t in _precision_decided(targets, sweep, topology)}


@pytest.mark.parametrize(("cpu", "chosen"), [(BF16_NATIVE, "bf16"), (AVX2_ONLY, "fp32")])
def test_auto_is_decided_for_the_machine_and_an_explicit_precision_is_kept(tmp_path, monkeypatch, cpu, chosen):
    decided = _decided(tmp_path, _machine(monkeypatch, cpu), f"{TINYNET}:workload",
                       "{auto: {width: 16}, fp32: {precision: fp32}, bf16: {precision: bf16}}")
    assert decided == {"auto": chosen, "fp32": "fp32", "bf16": "bf16"}


def test_auto_runs_fp32_where_the_parameters_rule_bf16_out(tmp_path, monkeypatch):
    decided = _decided(tmp_path, _machine(monkeypatch, BF16_NATIVE), "retinanet",
                       "{small: {image_size: 64}, large: {image_size: 128}}")
    assert decided == {"small": "fp32", "large": "bf16"}   # the RetinaNet's bf16 needs >= 96 px
