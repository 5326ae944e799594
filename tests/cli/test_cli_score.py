"""`orch score` end to end through main(argv), on real results folders: a committed sweep split into what a
prediction is made from (its small local batches and global batches) and what is measured later (the rest).
The expected errors come from the folder's own records, read here with json, not from the scoring code."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

from orchestrator.cli import main

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "results" / "example-predict"        # the classifier: 1–2 ranks × 1–2 threads × batches 16–256
KEPT_BATCHES = (16, 32, 64)
KEPT_GLOBAL = 128


def split(dest: Path) -> Path:
    """A copy of FOLDER with only what the prediction may see: throughput at local batches ≤ 64, convergence at
    global batches ≤ 128 (peaks and the all-reduce calibration kept)."""
    dest.mkdir()
    for name in ("spec.json", "topology.json", "environment.json"):
        shutil.copy(FOLDER / name, dest / name)
    kept = []
    for line in (FOLDER / "trials.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") == "throughput" and r.get("local_batch", 0) not in KEPT_BATCHES:
            continue
        if r.get("kind") == "convergence" and r.get("global_batch", 0) > KEPT_GLOBAL:
            continue
        kept.append(line)
    (dest / "trials.jsonl").write_text("\n".join(kept) + "\n")
    return dest


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("score")
    kept = split(base / "kept")
    out = base / "plan"
    assert main(["predict", str(kept), "--local-batch", "16,32,64,128,256", "--out", str(out)]) == 0
    return out


def measured_samples_per_s() -> dict[tuple[int, int, int], float]:
    out = {}
    for line in (FOLDER / "trials.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") == "throughput" and r.get("status") == "ok":
            out[(r["ranks"], r["threads_per_rank"], r["local_batch"])] = r["throughput"]["samples_per_s"]
    return out


def test_score_matches_later_cells_and_reports_per_axis(saved, capsys):
    capsys.readouterr()
    assert main(["score", str(saved), str(FOLDER), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    predicted = {(c["ranks"], c["threads"], c["local_batch"]): c for c in
                 json.loads((saved / "prediction.json").read_text())["cells"]}
    measured = measured_samples_per_s()
    rows = [r for r in data["rows"] if r["what"] == "samples/s"]
    # exactly the layouts at the held-out local batches, each measured once: 3 shapes × 2 batches
    assert sorted(r["label"] for r in rows) == sorted(f"{r}×{t}×{b}" for r, t in ((1, 1), (1, 2), (2, 1))
                                                      for b in (128, 256))
    for row in rows:
        key = tuple(int(x) for x in row["label"].split("×"))
        assert row["measured"] == pytest.approx(measured[key])
        want = 100 * (predicted[key]["samples_per_s"] - measured[key]) / measured[key]
        assert row["error_pct"] == pytest.approx(want)
        assert row["inside"] == (predicted[key]["low"] <= measured[key] <= predicted[key]["high"])
        assert row["axes"] == ["local batch"]
    axis = next(a for a in data["axes"] if a["axis"] == "local batch")
    assert axis["median_abs_pct"] == pytest.approx(statistics.median(abs(r["error_pct"]) for r in rows))
    assert set(axis["baselines"]) >= {"linear", "amdahl"}
    epochs = [r for r in data["rows"] if r["what"] == "epochs"]
    assert sorted(r["label"] for r in epochs) == ["global batch 256", "global batch 512"]
    assert data["provenance"]["orch_version"] and data["not_measured"] >= 0


def test_score_prints_at_a_glance(saved, capsys):
    capsys.readouterr()
    assert main(["score", str(saved / "prediction.json"), str(FOLDER)]) == 0
    text = capsys.readouterr().out
    assert "Each prediction against what ran" in text and "Scored per axis" in text and "local batch" in text


@pytest.mark.parametrize("case", ["other workload", "not a results folder", "nothing measured", "newer format",
                                  "not json", "no prediction"])
def test_score_refuses_what_it_cannot_score(case, saved, tmp_path, capsys):
    prediction, folder = str(saved), str(FOLDER)
    expected = {"other workload": "workload parameters differ", "not a results folder": "not a results folder",
                "nothing measured": "was measured there", "newer format": "written by a newer orch",
                "not json": "not valid JSON", "no prediction": "not found"}[case]
    if case == "other workload":
        folder = str(REPO / "results" / "example-classifier")          # the classifier with other parameters
    elif case == "not a results folder":
        folder = str(tmp_path)
    elif case == "nothing measured":
        folder = str(split(tmp_path / "again"))      # the prediction's own inputs: every layout there is data
    elif case == "newer format":
        data = json.loads((saved / "prediction.json").read_text())
        (tmp_path / "p.json").write_text(json.dumps({**data, "format_version": data["format_version"] + 1}))
        prediction = str(tmp_path / "p.json")
    elif case == "not json":
        (tmp_path / "p.json").write_text("{not json")
        prediction = str(tmp_path / "p.json")
    elif case == "no prediction":
        prediction = str(tmp_path / "missing")
    capsys.readouterr()
    assert main(["score", prediction, folder]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err, err
