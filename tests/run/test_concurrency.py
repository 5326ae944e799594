"""Trials in flight at the same time on a real local Ray: convergence runs pack onto free cores and give the
same epochs as alone; Ctrl-C and a SIGKILLed driver with several trials in flight lose nothing, record
nothing twice and leave no rank behind."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime

import pytest
from conftest import (
    CPUS,
    assert_no_ranks_left,
    by_key,
    file_lines,
    rank_processes,
    read_records,
    start_orch,
    wait_for_records,
    write_sweep,
)

from orchestrator.cli import main

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]

# Two seeds of one global batch on a 1-core layout: on two cores they can run side by side.
CONVERGE = """
workload: {name: classifier, params: {hidden: 64, train_samples: 4096}}
grid: {ranks: [1], threads_per_rank: [1], local_batch: [16]}
measure: {warmup_steps: 2, timed_steps: 20, repeats: 2, peak: false, allreduce: false}
convergence: {metric: accuracy, target: %s, max_epochs: %s, seeds: [0, 1], eval_every_epochs: 0.5,
              base_lr: 0.05, base_batch: 16}
"""


def _interval(record: dict) -> tuple[float, float]:
    start = datetime.fromisoformat(record["started_at"].replace("Z", "+00:00")).timestamp()
    return start, start + record["wall_s"]


def test_convergence_runs_pack_onto_free_cores_and_reach_the_same_epochs_as_alone(ray_local, tmp_path):
    sweep = write_sweep(tmp_path, "packed", CONVERGE % (0.935, 2))
    packed, alone = tmp_path / "packed", tmp_path / "alone"
    assert main(["sweep", str(sweep), "--results", str(packed), "--no-report"]) == 0
    assert main(["sweep", str(sweep), "--results", str(alone), "--no-report", "--max-concurrent", "1"]) == 0
    together, apart = by_key(read_records(packed)), by_key(read_records(alone))
    runs = ["conv-g16-s0", "conv-g16-s1"]
    for key in runs:
        assert together[key]["status"] == apart[key]["status"] == "ok"
        assert together[key]["convergence"]["curve"] == apart[key]["convergence"]["curve"]   # bit for bit
        assert together[key]["convergence"]["epochs_to_target"] is not None
        assert (together[key]["convergence"]["epochs_to_target"]
                == apart[key]["convergence"]["epochs_to_target"])
    (a0, a1), (b0, b1) = (_interval(together[key]) for key in runs)
    assert a0 < b1 and b0 < a1, "packed runs did not overlap in time"
    cpus = [together[key]["placement"][0]["observed_cpus"] for key in runs]
    assert sorted(cpus) == [[CPUS[0]], [CPUS[1]]], "each packed run keeps its own pinned core"
    (c0, c1), (d0, d1) = (_interval(apart[key]) for key in runs)
    # started_at has whole seconds: one second of slack
    assert c1 <= d0 + 1.0 or d1 <= c0 + 1.0, "--max-concurrent 1 ran them together"


def _wait_for_two_in_flight(sweep_name: str, proc, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while len(rank_processes(f"/{sweep_name}/conv-")) < 2:
        assert proc.poll() is None, f"the sweep ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "never two convergence runs in flight"
        time.sleep(0.2)


def test_ctrl_c_with_two_trials_in_flight_stops_both_and_keeps_what_finished(tmp_path):
    sweep = write_sweep(tmp_path, "two-interrupted", CONVERGE % (0.999, 50))
    results = tmp_path / "results"
    proc = start_orch("sweep", str(sweep), "--results", str(results), "--no-report")
    _wait_for_two_in_flight("two-interrupted", proc)
    os.kill(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert_no_ranks_left("two-interrupted")
    records = read_records(results)
    assert [r["key"] for r in records] == ["r1-t1-b16"] and records[0]["status"] == "ok"


def test_driver_killed_with_two_trials_in_flight_then_rerun_resumes_each_once(tmp_path):
    sweep = write_sweep(tmp_path, "two-killed", CONVERGE % (0.999, 4))
    results = tmp_path / "results"
    args = ["sweep", str(sweep), "--results", str(results), "--no-report"]
    proc = start_orch(*args)
    wait_for_records(results, 1, proc)
    _wait_for_two_in_flight("two-killed", proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert_no_ranks_left("two-killed")
    finished = file_lines(results / "trials.jsonl")
    assert [json.loads(line)["key"] for line in finished] == ["r1-t1-b16"]

    rerun = start_orch(*args)
    _out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert "2 trial(s) to run, 1 already done" in err
    lines = file_lines(results / "trials.jsonl")
    assert lines[:1] == finished
    keys = [r["key"] for r in read_records(results)]
    assert sorted(keys) == ["conv-g16-s0", "conv-g16-s1", "r1-t1-b16"]
