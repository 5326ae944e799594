"""The sweep's first estimate (run.estimate) from a plan, without Ray: a convergence run is costed by its
start-up, steps and evaluations (the eval set is the workload's test_samples), and the estimate carries what
the measured terms will refine (each training trial's layout and step)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.cli.common import plan_for
from orchestrator.core import eta
from orchestrator.core.isa import PROBE, CpuIsa
from orchestrator.core.topology import CompactTopology, build_compact
from orchestrator.io.sweepfile import load_sweep
from orchestrator.run.estimate import sweep_estimate
from orchestrator.run.kinds import item_types
from orchestrator.run.kinds.base import SweepContext

REPO = Path(__file__).resolve().parents[2]


def test_convergence_runs_are_costed_by_their_steps_and_evaluations():
    sweep = load_sweep(REPO / "sweeps" / "classifier.yaml")
    topology = build_compact(CompactTopology(nodes=1, sockets=1, cores_per_socket=2, threads_per_core=1,
                                             memory_gib=16))
    isa = CpuIsa(features=("avx2",), fp32_gflops=50.0, bf16_gflops=2.0, source=PROBE)
    topology = replace(topology, nodes=tuple(replace(n, isa=isa) for n in topology.nodes))
    ctx = SweepContext(sweep, plan_for(sweep, topology, ccl_available=False), nodes=1)
    items = [item for kind in item_types() for item in kind.plan_items(ctx)]
    estimate, basis = sweep_estimate(ctx, items)
    assert estimate is not None and "50.0 GFLOP/s per core" in basis
    costs = estimate.costs
    assert costs is not None and costs.eval_samples == sweep.params.test_samples and costs.node_cores == 2
    runs = [w for w in estimate.work.values() if w.kind == "convergence"]
    assert len(runs) == 12 and all(w.shape is not None and w.step_s for w in runs)
    for w in runs:
        expected = eta.convergence_run_s(costs, w.shape, w.step_s, epochs=eta.CONVERGENCE_EPOCHS_PRIOR * 15)
        assert w.estimate_s == pytest.approx(expected)
    timed = [w for w in estimate.work.values() if w.kind == "throughput"]
    assert timed and all(w.shape is not None for w in timed)
