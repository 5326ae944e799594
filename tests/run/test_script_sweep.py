"""`orch sweep` over a plain DDP script (examples/ddp_script), end to end on a real local Ray: a 2 × 2 grid
(ranks 1-2 × local batch) with throughput and convergence, then `orch report` and `orch predict` on its records,
a resume that runs nothing, a changed script refused; and a script that crashes in one cell, which is a
failed record naming its cause while the sweep goes on.

One sweep serves the assertions (steps and seeds cut down from the example's: the figures are not the point)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import psutil
import pytest
import yaml
from conftest import REPO, by_key, read_records, write_sweep

from orchestrator.cli import main

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]

EXAMPLE = REPO / "examples" / "ddp_script"
FLOPS_PER_SAMPLE = 6 * (32 * 256 + 256 + 256 * 256 + 256 + 256 * 8 + 8)   # the script's MLP, as it reports it


@pytest.fixture(scope="module")
def example_sweep(ray_local, tmp_path_factory):
    """The example's script and sweep file copied side by side (so that the test may change the script), with
    fewer steps and one seed."""
    folder = tmp_path_factory.mktemp("ddp-script")
    shutil.copy(EXAMPLE / "train.py", folder / "train.py")
    spec = yaml.safe_load((EXAMPLE / "sweep.yaml").read_text())
    spec["measure"] = {"warmup_steps": 2, "timed_steps": 8, "repeats": 2, "peak": False}
    spec["convergence"].update(seeds=[0], max_epochs=3)
    sweep = folder / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(spec))
    results = folder / "results"
    code = main(["sweep", str(sweep), "--results", str(results)])
    return sweep, results, code


def test_the_script_is_swept_over_ranks_and_local_batch(example_sweep):
    _, results, code = example_sweep
    assert code == 0
    records = by_key(read_records(results))
    grid = {key: records[key] for key in ("r1-t1-b16", "r2-t1-b16", "r1-t1-b32", "r2-t1-b32")}
    sha = records["r1-t1-b16"]["applied"]["script_sha256"]
    for key, r in grid.items():
        assert r["status"] == "ok", (key, r["reason"])
        t = r["throughput"]
        # global batch × timed steps ÷ the slowest rank's time, per repeat; the median of the repeats
        assert t["samples_per_s_repeats"] == pytest.approx([r["global_batch"] * 8 / s for s in t["timed_s_repeats"]])
        assert len(t["timed_s_repeats"]) == 2 and t["cv"] >= 0 and t["data_wait_share"] is None
        assert t["train_flops_per_sample"] == FLOPS_PER_SAMPLE and r["applied"]["flops_per_sample"].startswith("the script")
        applied = r["applied"]
        assert applied["script"] == str(results.parent / "train.py") and applied["script_sha256"] == sha
        assert applied["script_args"][:2] == ["--batch-size", str(r["local_batch"])]
        assert [e["observed_cpus"] for e in r["placement"]] == [[0], [1]][:r["ranks"]]
        assert all(u > 50 for u in r["memory"]["peak_private_mib"]) and r["startup_s"] > 0
    assert grid["r2-t1-b32"]["throughput"]["gradient_bytes"] == 4 * FLOPS_PER_SAMPLE // 6   # orch.script.model
    assert records["allreduce-socket-n2-fp32"]["status"] == "ok"


def test_no_script_rank_outlives_the_sweep(example_sweep):
    # a rank's job file lies in its trial's work folder, which names the sweep (run.driver.sweep.WORK_ROOT)
    left = [p.pid for p in psutil.process_iter(["cmdline", "status"])
            if "orchestrator.run.rank.script" in " ".join(p.info["cmdline"] or [])
            and "/ddp-script/" in " ".join(p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]
    assert not left


def test_the_script_converges_once_per_global_batch(example_sweep):
    records = read_records(example_sweep[1])
    runs = {r["global_batch"]: r for r in records if r["kind"] == "convergence"}
    assert sorted(runs) == [16, 32, 64]
    for batch, r in runs.items():
        c = r["convergence"]
        assert r["status"] == "ok", (batch, r["reason"])
        assert c["curve"] and c["epochs_run"] <= 3 and c["lr"] == pytest.approx(0.01 * (batch / 16) ** 0.5, rel=1e-5)
        assert (c["epochs_to_target"] is not None) == c["converged"]
        assert r["applied"]["script_args"][3] == f"{0.01 * (batch / 16) ** 0.5:.6g}"
        # B_simple from the DDP model the script hands orch (orch.script.model); one rank's steps are its own
        noise = c["noise_scale"]
        if r["ranks"] > 1:
            assert noise["method"] == "ddp" and noise["steps"] > 0 and noise["epochs"], noise
            assert noise["b_simple"] is not None or "noise dominates" in noise["why_not"]
        else:
            assert noise == {"why_not": "one rank: a script's steps are its own, so orch cannot split a batch in two"}
    assert any(r["ranks"] > 1 for r in runs.values())


def test_report_and_predict_read_the_script_records(example_sweep, capsys):
    _, results, _ = example_sweep
    report = (results / "report" / "report.md").read_text()
    assert "the script's own loop between two `orch.script.step()` calls (train.py" in report
    assert "## Time to train" in report and "samples per epoch (2,048)" in report
    capsys.readouterr()
    assert main(["predict", str(results)]) == 0
    out = capsys.readouterr().out
    assert "held-out error (leave one cell out, 4 cells)" in out and "fastest" in out


def test_a_resume_runs_nothing_and_a_changed_script_is_refused(example_sweep, capsys):
    sweep, results, _ = example_sweep
    before = read_records(results)
    assert main(["sweep", str(sweep), "--results", str(results), "--no-report"]) == 0
    assert "(0 trial(s) to run, 8 already done)" in " ".join(capsys.readouterr().err.split())   # rich wraps lines
    script = sweep.parent / "train.py"
    script.write_text(script.read_text() + "\n# tuned\n")
    assert main(["sweep", str(sweep), "--results", str(results), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "workload.script_sha256: " in err and "--results" in err and "Traceback" not in err
    assert read_records(results) == before


CRASHING = """
import argparse
import torch
import orch.script

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int)
args = parser.parse_args()
if args.batch_size == 8:
    raise ValueError("batch 8 is not supported by this script")
for _ in range(100):
    torch.ones(args.batch_size).sum()
    orch.script.step(samples=args.batch_size)
"""


def test_a_script_that_crashes_in_one_cell_is_a_failed_record_and_the_sweep_goes_on(ray_local, tmp_path, capsys):
    (tmp_path / "crashing.py").write_text(CRASHING)
    sweep = write_sweep(tmp_path, "crashing", textwrap.dedent("""
        workload:
          script: crashing.py
          args: [--batch-size, "{local_batch}"]
        grid: {ranks: [1], threads_per_rank: [1], local_batch: [4, 8]}
        measure: {warmup_steps: 1, timed_steps: 3, repeats: 2, peak: false, allreduce: false}
        """))
    assert main(["sweep", str(sweep), "--results", str(tmp_path / "results"), "--no-report"]) == 1
    err = capsys.readouterr().err
    # The probe runs the script at batches 2 and 8; its failure at 8 leaves the memory unchecked, no more.
    assert "at local batch 8 failed" in err and "memory per rank not checked" in " ".join(err.split())
    records = by_key(read_records(tmp_path / "results"))
    assert records["r1-t1-b4"]["status"] == "ok"
    crashed = records["r1-t1-b8"]
    assert crashed["status"] == "failed" and crashed["reason"] == (
        "rank 0: the rank exited with status 1: ValueError: batch 8 is not supported by this script")
    assert "raise ValueError" in crashed["log_tail"] and "Traceback" not in err


@pytest.mark.slow
def test_the_script_vs_builtin_benchmark_sweeps_both_sides(tmp_path):
    """benchmarks/bench_script_vs_builtin.py --quick: both sweeps run and are compared (correctness only: the
    figure is measured on a quiet machine, docs/testing.md)."""
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_script_vs_builtin.py"), "--quick", "--out",
                          str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [row] = json.loads((tmp_path / "summary.json").read_text())["rows"]
    assert row["layout"] == "r1-t1-b2" and row["ratio"] > 0 and row["verdict"] in ("within noise", "outside noise")
    assert len(row["built-in"]["repeats"]) == len(row["script"]["repeats"]) == 2
    assert "| r1-t1-b2 |" in run.stdout
