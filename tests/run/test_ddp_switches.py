"""The workloads' DDP switches (ddp_comm_hook, ddp_bucket_mb, ddp_grad_as_bucket_view): validated, applied by
the rank's DDP wrapper, recorded in `applied` and in what the throughput section says goes on the wire.
The 2-rank tests run real rank processes (gloo) through the launcher, without Ray."""

from __future__ import annotations

import doctest
import os
from dataclasses import replace

import pytest
from conftest import run_launchers

from orch.workload import DdpOptions, ddp_options_of
from orchestrator.core.measured.records import Kind, Record, Status, ThroughputSection
from orchestrator.core.predict.data import gradient_buckets
from orchestrator.io.workload_finder import find_workload, parse_params
from orchestrator.run.job import ConvergenceSettings, ConvergenceTask, RankJob, Steps, ThroughputTask
from orchestrator.run.rank import ddp

CPUS = sorted(os.sched_getaffinity(0))
SWITCHES = {"ddp_comm_hook": "bf16", "ddp_grad_as_bucket_view": True, "ddp_bucket_mb": 0.05}


@pytest.mark.parametrize("name", ["classifier", "chaos", "retinanet"])
@pytest.mark.parametrize("params, message", [
    ({"ddp_comm_hook": "int8"}, "ddp_comm_hook: must be one of 'none', 'bf16', 'fp16'; got 'int8'"),
    ({"ddp_bucket_mb": 0}, "ddp_bucket_mb"),
    ({"ddp_bucket_mb": "big"}, "ddp_bucket_mb: must be float, got 'big'"),
    ({"ddp_grad_as_bucket_view": "yes"}, "ddp_grad_as_bucket_view: must be bool, got 'yes'"),
])
def test_bad_switch_values_are_rejected_with_the_allowed_ones(name, params, message):
    parsed, problems = parse_params(find_workload(name).workload, params)
    assert parsed is None and len(problems) == 1
    assert message in str(problems[0])


def test_switches_default_to_ddps_own_and_are_read_from_the_parameters():
    parsed, problems = parse_params(find_workload("retinanet").workload, {})
    assert not problems
    assert (parsed.ddp_comm_hook, parsed.ddp_bucket_mb, parsed.ddp_grad_as_bucket_view) == ("none", 25.0, False)
    parsed, _ = parse_params(find_workload("classifier").workload, {**SWITCHES, "ddp_bucket_mb": 100})
    assert ddp_options_of(parsed) == DdpOptions(comm_hook="bf16", bucket_mb=100.0, grad_as_bucket_view=True)
    with pytest.raises(ValueError, match=r"ddp_bucket_mb\(-1\) must be > 0"):
        DdpOptions(bucket_mb=-1)


def test_ddp_module_examples():
    assert doctest.testmod(ddp).failed == 0


def test_one_rank_records_the_switches_as_inactive():
    notes = ddp.applied(DdpOptions(comm_hook="fp16"), world_size=1)
    assert notes["ddp_comm_hook"] == "fp16 (inactive: 1 rank, no DDP)"
    assert ddp.wire_sizes({"gradient_dtype": "float32", "ddp_bucket_bytes": None}, None) == {
        "ddp_wire_dtype": None, "ddp_wire_bucket_bytes": None}


def test_predictor_costs_the_bytes_on_the_wire():
    record = Record(kind=Kind.THROUGHPUT, key="r2-t1-b32", status=Status.OK, throughput=ThroughputSection(
        samples_per_s=1.0, gradient_bytes=8000, ddp_bucket_bytes=[6000, 2000], ddp_wire_dtype="bfloat16",
        ddp_wire_bucket_bytes=[3000, 1000]))
    assert gradient_buckets([record]) == (3000, 1000)
    older = replace(record, throughput=ThroughputSection(samples_per_s=1.0, gradient_bytes=8000,
                                                         ddp_bucket_bytes=[6000, 2000]))
    assert gradient_buckets([older]) == (6000, 2000)


def _job(**over) -> RankJob:
    base = dict(task=ThroughputTask(steps=Steps(warmup=2, timed=5, repeats=1)), workload="classifier",
                params=SWITCHES, backend="gloo", local_batch=32, threads=1)
    return RankJob(**{**base, **over})


def _run_two_ranks(tmp_path, job: RankJob):
    """Both ranks of `job`, one CPU each, supervised in threads as Ray's actors do; both must end ok."""
    outcomes = run_launchers(tmp_path, [(job, [CPUS[0]]), (job, [CPUS[1]])])
    assert [o.status for o in outcomes] == ["ok", "ok"], [o.log_tail for o in outcomes]
    return outcomes


@pytest.mark.needs_cpus(2)
def test_bf16_hook_is_applied_recorded_and_still_averages_gradients(tmp_path):
    outcomes = _run_two_ranks(tmp_path, _job())
    applied = outcomes[0].result.applied
    assert applied["ddp_comm_hook"] == "bf16 (bf16_compress_hook: buckets all-reduced as bfloat16)"
    assert (applied["ddp_bucket_mb"], applied["ddp_grad_as_bucket_view"]) == ("0.05", "true")
    t = outcomes[0].result.throughput
    # fp32 gradients in buckets of ~0.05 MiB, each moved as bfloat16: half the bytes
    assert t.gradient_dtype == "float32" and t.ddp_wire_dtype == "bfloat16"
    assert len(t.ddp_bucket_bytes) >= 2 and sum(t.ddp_bucket_bytes) == t.gradient_bytes
    assert t.ddp_wire_bucket_bytes == [b // 2 for b in t.ddp_bucket_bytes]
    # when each bucket became ready, after timing: in the order DDP fills them, the last at the backward's end
    shares = t.ddp_bucket_ready_share
    assert len(shares) == len(t.ddp_bucket_bytes) and shares[-1] == 1.0
    assert all(0 < a <= b for a, b in zip(shares, shares[1:])), shares
    checks = [o.result.throughput.allreduce_check for o in outcomes]
    local = [c["local_grad_sums"] for c in checks]
    synced = [c["synced_grad_sums"] for c in checks]
    assert synced[0] == pytest.approx(synced[1], rel=1e-6, abs=1e-9)   # every rank gets the same sums
    assert local[0] != pytest.approx(local[1], rel=1e-3)
    # the mean of the ranks' gradients, to bfloat16's precision (8 bits of mantissa)
    assert synced[0] == pytest.approx([(a + b) / 2 for a, b in zip(*local)], rel=2e-2, abs=1e-3)


@pytest.mark.needs_cpus(2)
def test_training_with_the_bf16_hook_still_converges(tmp_path):
    convergence = ConvergenceSettings(metric="accuracy", target=0.85, max_epochs=3, eval_every_epochs=0.5,
                                      lr_rule="sqrt", base_lr=0.05, base_batch=32, warmup_epochs=0.0, global_batch=64)
    outcomes = _run_two_ranks(tmp_path, _job(task=ConvergenceTask(settings=convergence)))
    report = outcomes[0].result.convergence
    assert report.converged, report.curve
    assert outcomes[0].result.applied["ddp_comm_hook"].startswith("bf16")
