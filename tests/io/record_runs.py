"""Fake trial runs for the record writer test: what a sweep hands run.driver.recording (one record of each kind and
end), the ranks' results read from the JSON they write, as the launcher reads them."""

from __future__ import annotations

import json
from types import SimpleNamespace

from orchestrator.core.machine.topology import CompactTopology, build_compact
from orchestrator.core.measured.rank_end import RankStatus
from orchestrator.core.planning.plan import make_plan
from orchestrator.core.planning.spec import parse_spec
from orchestrator.run.driver import recording
from orchestrator.run.driver.launcher import Outcome
from orchestrator.run.driver.trial import TrialRun
from orchestrator.run.job import RankResult

STARTED_AT = 1763629380.4
MEASURE = SimpleNamespace(warmup_steps=2, timed_steps=5, repeats=3)
CONVERGENCE = SimpleNamespace(metric="accuracy", target=0.9, max_epochs=10, lr_rule="linear", base_lr=0.1,
                              base_batch=32, warmup_epochs=1.0, eval_every_epochs=1.0)


def _result(rank, **sections):
    data = {"rank": rank, "pid": 4000 + rank, "threads": 1, "affinity": {"threads": [rank], "main_thread": [rank]},
            "run_s": 2.5, "build_s": 0.25, "applied": {"optimizer": "sgd"}, "ready_at": 1763629381.0,
            "started_at": 1763629380.5, "startup_breakdown_s": {"python": 0.125, "model": 0.25},
            "communication": {"backend": "gloo", "version": "2.5.1", "oneccl": None, "env": {}}, **sections}
    return RankResult.from_json(json.dumps(data))


def _ok(rank, **sections):
    return Outcome(status=RankStatus.OK, reason=None, exit_code=0, peak_private_mib=512.5 + rank,
                   result=_result(rank, **sections), log_tail="", log=None, pin=f"taskset {rank}", pid=4000 + rank)


def _throughput(rank):
    return {"allreduce_check": {"local_grad_sums": [0.5 + rank], "synced_grad_sums": [1.0]},
            "gradient_bytes": 4096, "gradient_dtype": "fp32", "ddp_bucket_bytes": [4096],
            "ddp_wire_dtype": "bf16", "ddp_wire_bucket_bytes": [2048],
            "repeat_s": [0.5 + rank / 8, 0.625, 0.5], "step_ms_median": 100.0 + rank, "step_ms_p90": 125.0,
            "data_wait_s": 0.0625, "timed_s": 1.75, "train_flops_per_sample": 1.5e6}


def plan():
    spec, problems = parse_spec({"name": "t", "workload": {"name": "classifier"},
                                 "grid": {"ranks": [1, 2, 16], "threads_per_rank": [1], "local_batch": [8]}})
    assert problems == []
    topology = build_compact(CompactTopology(nodes=1, sockets=2, cores_per_socket=4, memory_gib=16))
    return make_plan(spec, topology, rank_memory_mib=lambda batch: 100.0, ccl_available=False), topology


def records():
    """One record of each kind and path: ok throughput, failed throughput, infeasible, convergence ok and
    timed out, peak, all-reduce."""
    p_plan, topology = plan()
    two, one, too_many = p_plan.cell(2, 1, 8), p_plan.cell(1, 1, 8), p_plan.cell(16, 1, 8)
    ok = TrialRun("ok", None, [_ok(0, throughput=_throughput(0)), _ok(1, throughput=_throughput(1))],
                  ready_s=1.5, wall_s=3.25, node_ids=["node-a", "node-a"])
    failing = Outcome(status=RankStatus.FAILED, reason="exit 1", exit_code=1, peak_private_mib=300.0, result=None,
                      log_tail="Traceback ...\nRuntimeError: boom", log="...", pin="taskset 1", pid=4001)
    failed = TrialRun("failed", "rank 1: exit 1", [None, failing], ready_s=None, wall_s=1.0, failing_rank=1)
    converged = TrialRun("ok", None, [_ok(0, convergence={
        "converged": True, "epochs_to_target": 2.25, "epochs_run": 3.0, "steps_per_epoch": 16,
        "curve": [[1.0, 0.5], [2.0, 0.875], [3.0, 0.9375]], "lr": 0.025, "train_s": 12.5})], ready_s=1.0, wall_s=14.0)
    timed_out = TrialRun("timeout", "no progress for 60 s", [failing], wall_s=60.0, failing_rank=0)
    peak = TrialRun("ok", None, [_ok(r, peak={"precision": "fp32", "gflops": 50.0 + r, "best_gflops": 55.0 + r,
                                                  "gemm_size": 2048, "threads": 1, "matmuls": 9}) for r in (0, 1)],
                    ready_s=0.5, wall_s=4.0)
    allreduce = TrialRun("ok", None, [_ok(r, allreduce={"sizes_bytes": [1024, 4096], "time_s": [1e-5 + r * 1e-6, 4e-5],
                                                        "dtype": "fp32"}) for r in (0, 1)], ready_s=0.5, wall_s=2.0)
    common = dict(topology=topology, started_at=STARTED_AT)
    return [
        recording.throughput_record(two, ok, backend="gloo", measure=MEASURE, **common),
        recording.throughput_record(two, failed, backend="gloo", measure=MEASURE, **common),
        recording.infeasible_record(too_many, "gloo"),
        recording.convergence_record("conv-g8-s0", one, 0, converged, backend="gloo", spec_convergence=CONVERGENCE,
                                     **common),
        recording.convergence_record("conv-g8-s1", one, 1, timed_out, backend="gloo", spec_convergence=CONVERGENCE,
                                     **common),
        recording.peak_record("peak-r2-t1-fp32", two, peak, **common),
        recording.allreduce_record("allreduce-socket-n2-fp32", "socket", two, allreduce, backend="gloo", **common),
    ]
