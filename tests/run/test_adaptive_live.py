"""An adaptive sweep on a real local Ray, at a tiny size (the classifier, 9 cells): it measures the calibration,
chooses its trials one at a time, stops on its own with an answer, records why each trial was chosen, leaves a
folder `orch report` and `orch predict` read, and a full sweep on that folder resumes it."""

from __future__ import annotations

import json

import pytest
from conftest import by_key, read_records, write_sweep

from orchestrator.cli import main

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]

SWEEP = """
workload:
  name: classifier
  params: {hidden: 64, train_samples: 2048}
grid:
  ranks: [1, 2]
  threads_per_rank: [1, 2]
  local_batch: [16, 32, 64]
measure: {warmup_steps: 2, timed_steps: 10, repeats: 2}
adaptive: {question: fastest_time_to_train, budget_s: 900, target_rel_width: 10}
"""
GRID_CELLS = 9        # 2×2 does not fit 2 cores: 3 layouts × 3 local batches


@pytest.fixture(scope="module")
def adaptive_sweep(ray_local, tmp_path_factory):
    folder = tmp_path_factory.mktemp("adaptive")
    sweep = write_sweep(folder, "adaptive", SWEEP)
    results = folder / "results"
    return sweep, results


def test_an_adaptive_sweep_stops_on_its_own_and_says_why(adaptive_sweep, capsys):
    sweep, results = adaptive_sweep
    code = main(["sweep", str(sweep), "--results", str(results), "--no-report"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "adaptive sweep:" in out and "fastest per sample (no convergence runs): " in out
    assert "stopped: the answer's interval is narrow enough" in out
    records = read_records(results)
    cells = [r for r in records if r["kind"] == "throughput" and r["status"] == "ok"]
    assert 3 <= len(cells) < GRID_CELLS
    assert f"skipped {GRID_CELLS - len(cells)} cell(s), which would have cost about" in out
    reasons = [r["choice"]["reason"] for r in cells]
    assert reasons[0].startswith("cold start: the step model needs a 1-rank cell")
    assert all(r.startswith(("cold start", "confirming", "expected to narrow")) for r in reasons)
    assert all("choice" not in r for r in records if r["kind"] in ("peak", "allreduce"))


def test_report_and_predict_read_the_adaptive_folder(adaptive_sweep, capsys):
    _, results = adaptive_sweep
    assert main(["report", str(results)]) == 0
    assert main(["predict", str(results)]) == 0
    assert "samples/s" in capsys.readouterr().out


def test_a_full_sweep_resumes_the_adaptive_folder(adaptive_sweep, capsys):
    sweep, results = adaptive_sweep
    before = by_key(read_records(results))
    code = main(["sweep", str(sweep), "--results", str(results), "--full", "--no-report", "--json"])
    assert code == 0
    after = by_key(read_records(results))
    ok = [r for r in after.values() if r["kind"] == "throughput" and r["status"] == "ok"]
    assert len(ok) == GRID_CELLS
    for key, record in before.items():            # nothing measured before ran again
        assert after[key] == record
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert {r["key"] for r in printed if "key" in r} == set(after) - set(before)
