"""`orch predict` on the epochs side, end to end through main(argv) on committed folders: B_crit and where it
came from, the chance of missing a deadline beside the interval (checked against the committed seeds'
spread), and an RCP file that describes another workload than the one measured."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from orchestrator.cli import main

REPO = Path(__file__).resolve().parents[2]
RETINANET = REPO / "results" / "example-predict-retinanet"
CLASSIFIER = REPO / "results" / "example-classifier"
RCP_RETINANET = REPO / "tests" / "data" / "rcp" / "rcps_retinanet.json"
CLUSTER = REPO / "sweeps" / "topologies" / "cluster-4x2s28c.yaml"


def test_the_issue_command_warns_that_the_rcp_describes_another_workload(capsys):
    args = ["predict", str(RETINANET), "--rcp", str(RCP_RETINANET), "--topology", str(CLUSTER), "--deadline", "2h"]
    assert main(args) == 0
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())
    assert ("describes MLPerf's retinanet: RetinaNet with a ResNeXt50-32x4d FPN at 800×800 px, 264 classes, on "
            "OpenImages") in text
    assert ("model: backbone 'resnext50_32x4d', image_size 800, classes 264 in the reference; backbone 'resnet18', "
            "image_size 128, classes 4 measured") in text
    assert "data set: OpenImages (MLPerf's 264-class subset) in the reference; dataset 'synthetic' measured" in text
    # which figure came from where
    assert "epochs from RCP file rcps_retinanet.json, benchmark retinanet" in text and "reference runs by NVIDIA" in text
    assert "samples per epoch: 256 samples (the measured retinanet workload's data set)" in text
    assert "samples/s: the measured cells of" in text and "backbone resnet18, image_size 128" in text
    # and the recommendation itself says so
    assert "recommendation (deadline 2 h" in text and "which describes another model or data set" in text
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "another model or data set" in out["recommendation"]["answer"]
    assert any("describes MLPerf's retinanet" in w for w in out["warnings"])
    assert out["sources"][0].startswith("epochs from RCP file rcps_retinanet.json")


def test_an_rcp_that_orch_exported_for_the_same_workload_is_not_warned_about(tmp_path, capsys):
    from orchestrator.core.predict.rcp import OrchSection, check_workload

    params = {"backbone": "resnet18", "image_size": 128}
    assert check_workload("retinanet", OrchSection(workload="retinanet", params=params), "retinanet", params).matches
    other = check_workload("retinanet", OrchSection(workload="retinanet", params={**params, "image_size": 256}),
                           "retinanet", params)
    assert other.differences == ("parameters: image_size 256 in the file; image_size 128 measured",)
    unknown = check_workload("gpt3", None, "retinanet", params)
    assert "orch does not know the reference model of benchmark 'gpt3'" in unknown.unchecked


def test_the_deadline_prints_the_chance_of_missing_it_at_the_evaluation_cadence(capsys):
    assert main(["predict", str(CLASSIFIER), "--deadline", "0.216s"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "P(time-to-train > 6e-05 h) = " in text and "at the fast end of samples/s" in text
    assert "epochs stops at" in text and "(evaluations every 0.25)" in text
    # the runs recorded the square-root rule: the form that knows it, k frozen at 0 where the epochs do not need it
    assert "epochs model: A·B/(ε(B)·(1 − k·ε(B)·(1 + B_noise/B))) under the sqrt rule (0.01 at global batch 32)" in text
    assert "the measured epochs do not need k" in text
    assert main(["predict", str(CLASSIFIER), "--deadline", "0.216s", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epochs_model"]["eval_every_epochs"] == 0.25 and out["epochs_model"]["epochs_form"] == "lr rule"
    assert out["epochs_model"]["epochs_k_mode"] == "limit" and out["epochs_model"]["b_crit_mode"] == "frozen"
    risks = [row["p_over_deadline"] for row in out["layouts"] if row["p_over_deadline"] is not None]
    assert risks and all(0.0 <= p <= 1.0 for p in risks)


def test_the_chance_of_missing_is_checked_against_the_committed_seeds(capsys):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import deadline_check

    assert deadline_check.main([]) == 0
    rows = {line.split("|")[1].strip(): line.split("|") for line in capsys.readouterr().out.splitlines()[2:]}
    every = rows["all"]
    seeds, median, inside = int(every[3].split()[0]), float(every[4]), float(every[5].strip().rstrip("%")) / 100
    # the committed seeds, against the stopping distribution orch predicts for their batch: their chances of
    # being exceeded centre on ½, and about 80% of them lie inside [0.1, 0.9]
    assert seeds >= 50 and 0.35 <= median <= 0.65 and 0.65 <= inside <= 0.95
