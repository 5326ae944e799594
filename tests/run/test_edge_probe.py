"""The stability edge probed in real rank processes (run.rank.edge): the section a convergence run records, and a
probed run training exactly as the same run unprobed (the probe works on a copy, its random state restored)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_launchers

from orchestrator.core.measured.records import ConvergenceSection
from orchestrator.core.predict import edge
from orchestrator.run.job import ConvergenceSettings, ConvergenceTask, RankJob

CPUS = sorted(os.sched_getaffinity(0))
# the target is out of reach: both runs train the whole epoch, so their curves can be compared point by point
SETTINGS = dict(metric="accuracy", target=0.999, max_epochs=1.0, eval_every_epochs=0.125, lr_rule="linear",
                base_lr=0.05, base_batch=32, warmup_epochs=0.0)


STRIPES = str(Path(__file__).resolve().parents[2] / "examples" / "my-model" / "my_model" / "workload.py") + ":workload"


def _job(edge_mode: str, global_batch: int, workload: str = "classifier", **params) -> RankJob:
    params = params or {"hidden": 64}
    return RankJob(workload=workload, params=params, backend="gloo", local_batch=32,
                   threads=1, task=ConvergenceTask(settings=ConvergenceSettings(**SETTINGS, global_batch=global_batch,
                                                                                edge=edge_mode)))


@pytest.mark.needs_cpus(2)
def test_a_probed_run_trains_as_the_same_run_unprobed(tmp_path):
    runs = {}
    for mode in ("full", "none"):
        job = _job(mode, 64, hidden=64, momentum=0.9)
        outcomes = run_launchers(tmp_path / mode, [(job, [CPUS[0]]), (job, [CPUS[1]])])
        assert [o.status for o in outcomes] == ["ok", "ok"], [o.log_tail for o in outcomes]
        runs[mode] = outcomes[0].result.convergence
    probed, plain = runs["full"], runs["none"]
    assert probed.curve == plain.curve and probed.epochs_run == plain.epochs_run     # every evaluation the same
    assert plain.edge is None
    e = probed.edge
    assert e is not None and e.mode == "full" and e.optimizer == "SGD" and e.momentum == 0.9
    assert e.batch == 64 and len(e.rise_rates) == 2              # a range test per rank, at the global batch
    assert e.at_epoch == pytest.approx(0.25) and e.rate == pytest.approx(0.1)    # 0.05 × 64/32, a quarter epoch in
    ramp = edge.ramp(e.rate, edge.RANGE_STEPS["full"])
    assert all(r is None or r in ramp for r in e.rise_rates)
    assert (e.eps_max is not None) == (e.why_not is None)        # measured, or said why not
    # it survives the record's JSON unchanged
    conv = ConvergenceSection(converged=False).with_fields(edge=e)
    assert ConvergenceSection.from_json(json.loads(json.dumps(conv.to_json()))).edge == e


def test_an_adaptive_optimizer_gets_a_range_test_and_no_hessian(tmp_path):
    job = _job("full", 32, STRIPES, optimizer="adamw", train_samples=512, eval_samples=128, precision="fp32")
    (outcome,) = run_launchers(tmp_path, [(job, [CPUS[0]])])
    assert outcome.status == "ok", outcome.log_tail
    e = outcome.result.convergence.edge
    assert e is not None and e.optimizer == "AdamW" and e.eps_max is None
    assert "preconditions its step" in e.why_not and len(e.rise_rates) == 1
