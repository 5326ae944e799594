"""benchmarks/large_batch_check.py on results folders written with known epochs and a known B_simple: the held-out
large batches predicted by every method, B_simple's prior narrowing the interval, and `orch predict` showing
B_simple and the B_crit it implies."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from predict_results import write_results

from orchestrator.cli import main

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import large_batch_check  # noqa: E402

LAYOUTS = [(1, 1, 16), (1, 2, 16), (2, 1, 16), (1, 1, 32)]
BATCHES = (16, 32, 64, 256, 512)


def _folder(tmp_path, b_simple):
    return write_results(tmp_path, layouts=LAYOUTS, global_batches=BATCHES, epochs_truth=(1.5, 100.0),
                         seed_factors=(0.9, 1.0, 1.1), b_simple=b_simple)


def test_the_held_out_batches_are_predicted_by_every_method(tmp_path, capsys):
    results = _folder(tmp_path, b_simple=100.0)
    assert large_batch_check.main([str(results)]) == 0
    out = capsys.readouterr().out
    assert "results: kept [16, 32, 64], held out [256, 512]" in out
    # records without the learning-rate rule: the critical-batch form
    assert "with B_simple: E_min·(1 + B/B_crit)" in out and "B_simple's prior and the measured epochs jointly" in out
    summary = {line.split("|")[1].strip(): line.split("|") for line in out.splitlines() if line.startswith("| ")}
    for method in large_batch_check.METHODS:
        assert summary[method][2].strip() == "2", method
    # a B_simple that tells the truth: small errors, both held-out batches inside, a narrower interval than the
    # epochs alone give
    with_b, without = summary["with B_simple"], summary["without"]
    assert float(with_b[3].strip().rstrip("%")) < 20 and with_b[4].strip() == "2 of 2"
    width = lambda row: float(row[5].strip().lstrip("×"))   # noqa: E731
    assert width(with_b) < width(without)
    assert summary["RCP rule"][4].strip() == "no interval"


def test_a_square_root_sweep_is_predicted_by_the_rules_form_and_missed_by_the_old_one(tmp_path, capsys):
    # epochs c·√B (the square-root rule's k = 0 limit) recorded with the rule: the form that knows it predicts 256
    # and 512 from 16 to 64 within 10% and inside its band; E_min·(1 + B/B_crit) bends towards E ∝ B
    results = write_results(tmp_path, layouts=LAYOUTS, global_batches=BATCHES, seed_factors=(0.9, 1.0, 1.1),
                            b_simple=100.0, sqrt_rule=(0.01, 32, 0.15))
    assert large_batch_check.main([str(results)]) == 0
    out = capsys.readouterr().out
    assert "with B_simple: A·B/(ε(B)·(1 − k·ε(B)·(1 + B_noise/B))) under the sqrt rule" in out
    summary = {line.split("|")[1].strip(): line.split("|") for line in out.splitlines() if line.startswith("| ")}
    error = lambda method: float(summary[method][3].strip().rstrip("%"))   # noqa: E731
    assert error("with B_simple") < 10 and summary["with B_simple"][4].strip() == "2 of 2"
    assert error("old, with B_simple") > 30
    assert main(["predict", str(results), "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["epochs_model"]
    assert (model["epochs_form"], model["epochs_lr_rule"], model["epochs_k_mode"]) == ("lr rule", "sqrt", "limit")
    assert model["e_min"] is None and "the rule's k = 0 limit" in model["epochs_words"]
    import orch

    frame = orch.predict(results).to_frame()
    assert set(frame["epochs_form"]) == {"lr rule"} and set(frame["epochs_k"]) == {0.0}


def test_without_b_simple_the_methods_that_need_it_are_left_out(tmp_path, capsys):
    results = _folder(tmp_path, b_simple=None)
    assert large_batch_check.main([str(results), "--kept", "16,32,64"]) == 0
    out = capsys.readouterr().out
    assert "no B_simple in the kept runs" in out and "| with B_simple | 2 |" not in out and "| without | 2 |" in out


def test_predict_shows_b_simple_and_the_b_crit_it_implies(tmp_path, capsys):
    results = _folder(tmp_path, b_simple=100.0)
    assert main(["predict", str(results), "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["epochs_model"]
    assert model["b_crit_mode"] == "joint" and model["b_simple_runs"] == 15
    assert model["b_simple_low"] < model["b_simple"] < model["b_simple_high"]
    assert model["b_crit_low"] < model["b_crit"] < model["b_crit_high"]
    assert main(["predict", str(results)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "epochs model: E_min·(1 + B/B_crit), E_min" in text
    assert "B_simple's prior and the measured epochs jointly (B_simple" in text
    assert "the epochs moved it ×" in text
    assert main(["report", str(results)]) == 0
    report = (results / "report" / "report.md").read_text()
    assert "B_simple [90%]" in report and "takes it as a prior on B_crit" in report
