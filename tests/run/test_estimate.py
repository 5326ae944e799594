"""The sweep's first estimate (run.driver.estimate) from a plan, without Ray: a convergence run is costed by its
start-up, steps and evaluations (the eval set is the workload's test_samples), and the estimate carries what
the measured terms will refine (each training trial's layout and step)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import two_core_avx2_machine

from orchestrator.app.plan import plan_for
from orchestrator.core.execution import eta
from orchestrator.io.sweepfile import load_sweep
from orchestrator.run.driver.estimate import sweep_estimate
from orchestrator.run.driver.kinds import item_types
from orchestrator.run.driver.kinds.base import SweepContext

REPO = Path(__file__).resolve().parents[2]


def test_convergence_runs_are_costed_by_their_steps_and_evaluations():
    sweep = load_sweep(REPO / "sweeps" / "classifier.yaml")
    topology, _ = two_core_avx2_machine()
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


def probed_on(cpu: str, sweep):
    """A probe of `sweep` that timed 0.1 s + 0.01 s per sample on 2 threads of `cpu`, and 4 s of start-up."""
    from orchestrator.core.planning.probe import ProbePoint, probe_result

    points = [ProbePoint(local_batch=b, peak_private_mib=300.0, rank_peak_private_mib=300.0, library_mib=0.0,
                         watched_peak_private_mib=300.0, flops_per_step=None, step_s=0.1 + 0.01 * b, startup_s=4.0)
              for b in (2, 8)]
    fields = {"format": 1, "workload": sweep.workload.name, "code": "c", "params": {}, "precision": "fp32",
              "torch": "t", "backend": "gloo", "held_batches": 13}
    return probe_result(fields, points, threads=2, measured_at="now", ddp_copies=0.0, cpu=cpu)


def test_a_probe_that_timed_steps_on_the_plans_cpu_costs_the_steps_and_start_ups_not_the_flops():
    sweep = load_sweep(REPO / "sweeps" / "classifier.yaml")
    topology, isa = two_core_avx2_machine(cpu_model="cpu A")
    plan = plan_for(sweep, topology, ccl_available=False)

    def estimate_with(probe):
        ctx = SweepContext(sweep.with_probe(probe), plan, nodes=1)
        return sweep_estimate(ctx, [item for kind in item_types() for item in kind.plan_items(ctx)])

    estimate, basis = estimate_with(probed_on(isa.identity, sweep))
    assert estimate is not None and "steps the probe timed on this CPU" in basis and "start-up 4.0 s" in basis
    m = sweep.spec.measure
    for w in (w for w in estimate.work.values() if w.kind == "throughput"):
        assert w.shape is not None
        step = (0.1 + 0.01 * w.shape.local_batch) * 2 / w.shape.threads
        assert w.step_s == pytest.approx(step)
        # its steps, and those after timing: 1 under the FLOP counter, 5 more with DDP (the all-reduce check's 2,
        # the 3 that note when its buckets are ready)
        after = 6 if w.shape.ranks > 1 else 1
        assert w.estimate_s == pytest.approx(4.0 + step * (m.warmup_steps + m.timed_steps * m.repeats + after))
    run = next(w for w in estimate.work.values() if w.kind == "convergence")
    assert run.estimate_s == pytest.approx(eta.convergence_run_s(
        estimate.costs, run.shape, run.step_s, epochs=eta.CONVERGENCE_EPOCHS_PRIOR * 15, startup_s=4.0))

    # Timed on another CPU (the same name, another ISA): its steps say nothing of this one, the FLOP rule stands
    other, basis = estimate_with(probed_on("cpu A (avx2 avx512f)", sweep))
    assert other is not None and "50.0 GFLOP/s per core" in basis
    assert all(w.step_s != pytest.approx((0.1 + 0.01 * w.shape.local_batch) * 2 / w.shape.threads)
               for w in other.work.values() if w.shape is not None)
