"""`orch predict`'s CPU what-if end to end: a target topology that states its cores' GEMM peak."""

from __future__ import annotations

import json

import pytest
from predict_results import write_results

from orchestrator.cli import main

FULL = [(r, t, b) for r, t in ((1, 1), (1, 2), (2, 1)) for b in (8, 16, 32, 64, 128)]
NODE = "sockets: 1\ncores_per_socket: 4\nthreads_per_core: 1\nmemory_gib: 16\n"


def layouts(tmp_path, results, target_text: str, name: str) -> dict:
    target = tmp_path / f"{name}.yaml"
    target.write_text(target_text)
    assert main(["predict", str(results), "--topology", str(target), "--out", str(tmp_path / name)]) == 0
    data = json.loads((tmp_path / name / "prediction.json").read_text())
    return {(x["ranks"], x["threads_per_rank"], x["local_batch"]): x for x in data["layouts"]}


def test_a_stated_gemm_peak_scales_compute_and_keeps_the_unscaled_end(tmp_path, capsys):
    """The measured core peaks at 100 GFLOP/s (fp32), the target's at 200: a 1-rank layout has no
    communication, so its step is compute only and its samples/s doubles exactly; the interval's other end is
    the unscaled prediction (no triad bandwidth for both), so the interval holds it."""
    results = write_results(tmp_path, layouts=FULL, peak_gflops=100.0)
    plain = layouts(tmp_path, results, NODE, "plain")
    faster = layouts(tmp_path, results, NODE + "isa: {peak_fp32_gflops_per_core: 200}\n", "faster")
    capsys.readouterr()
    assert plain.keys() == faster.keys()
    for key, row in faster.items():
        before = plain[key]
        assert any("CPU assumed as fast as the measured Test CPU" in n for n in before["notes"])
        assert any("200.0 ÷ 100.0 GFLOP/s = ×2.00" in n for n in row["notes"]), row["notes"]
        if key[0] == 1:
            assert row["samples_per_s"] == pytest.approx(2 * before["samples_per_s"], rel=1e-9)
        else:   # the all-reduce is not sped up by a faster core
            assert before["samples_per_s"] < row["samples_per_s"] < 2 * before["samples_per_s"]
        assert row["samples_per_s_low"] <= before["samples_per_s"] < row["samples_per_s"] < row["samples_per_s_high"]


def test_a_stated_peak_without_a_measured_one_is_said_not_used(tmp_path, capsys):
    results = write_results(tmp_path, layouts=FULL)                  # no peak record
    rows = layouts(tmp_path, results, NODE + "isa: {peak_fp32_gflops_per_core: 200}\n", "nopeak")
    capsys.readouterr()
    note = "CPU assumed as fast as the measured Test CPU (the target gives a per-core fp32 GEMM peak, but the sweep"
    assert all(any(note in n for n in row["notes"]) for row in rows.values())


def test_a_bad_figure_in_the_topology_is_exit_2(tmp_path, capsys):
    results = write_results(tmp_path, layouts=FULL, peak_gflops=100.0)
    bad = tmp_path / "bad.yaml"
    bad.write_text(NODE + "isa: {peak_fp32_gflops_per_core: -3}\n")
    assert main(["predict", str(results), "--topology", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "peak_fp32_gflops_per_core" in err and "Traceback" not in err
