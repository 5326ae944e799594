"""`orch sweep`'s adaptive options without Ray: the sweep file's section, `--replay FOLDER` on a committed folder
measured in full, and bad input (exit 2, one line, no traceback)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.core.planning.spec import parse_spec

REPO = Path(__file__).resolve().parents[2]
CLASSIFIER = REPO / "results" / "example-classifier"
SWEEP = REPO / "sweeps" / "predict-classifier.yaml"


def _sweep(tmp_path: Path, adaptive: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: s
        workload: {{name: classifier}}
        grid: {{ranks: [1, 2], threads_per_rank: [1, 2], local_batch: [32, 128]}}
        {adaptive}
        """))
    return path


def test_the_adaptive_section_is_loaded_strictly():
    spec, problems = parse_spec({"name": "s", "workload": {"name": "classifier"}, "grid": {"local_batch": [8]},
                                 "adaptive": {"question": "scalability_table", "budget_s": 600}})
    assert problems == [] and spec is not None and spec.adaptive is not None
    assert spec.adaptive.question == "scalability_table" and spec.adaptive.budget_s == 600.0
    assert spec.adaptive.target_rel_width is None and spec.adaptive.nodes == 1
    _, problems = parse_spec({"name": "s", "workload": {"name": "classifier"}, "grid": {"local_batch": [8]},
                              "adaptive": {"question": "fastest", "target_rel_width": 0, "stop": 1}})
    messages = " ".join(f"{p.path}: {p.message}" for p in problems)
    assert "adaptive.question: must be one of 'fastest_time_to_train', 'scalability_table'" in messages
    assert "adaptive.target_rel_width: must be > 0" in messages and "adaptive.stop: unknown key" in messages


def test_replay_prints_each_choice_and_the_answer(capsys):
    rc = main(["sweep", str(SWEEP), "--replay", str(CLASSIFIER), "--target-rel-width", "0.3"])
    out = " ".join(capsys.readouterr().out.split())     # wrapped between words at the console's width
    assert rc == 0, out
    assert "[1] r1-t2-b32 (24 core-s so far, as recorded): answer no interval" in out
    assert f"adaptive sweep, replayed on {CLASSIFIER} (no trial ran):" in out
    assert "fastest time-to-train: 1×2×128, 0.185 s [0.166–0.207 s] (±11.1%)" in out
    assert "stopped: the answer's interval is narrow enough: ±11.1%, target ±15.0%" in out
    assert "measured 11 trial(s):" in out and "skipped 7 cell(s), which would have cost about" in out


def test_a_budget_in_the_sweep_file_stops_the_replay(tmp_path, capsys):
    rc = main(["sweep", str(_sweep(tmp_path, "adaptive: {budget_s: 30}")), "--replay", str(CLASSIFIER)])
    out = capsys.readouterr().out
    assert rc == 0 and "stopped: budget spent: " in out


@pytest.mark.parametrize("args, message", [
    (["--budget", "soon"], "'soon' is not a duration"),
    (["--target-rel-width", "0"], "--target-rel-width"),
    (["--replay", "/nonexistent/folder"], "not a results folder"),
])
def test_bad_adaptive_input_exits_2_with_one_line(args, message, capsys):
    rc = main(["sweep", str(SWEEP), *args])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err


def test_a_target_topology_that_does_not_load_exits_2(tmp_path, capsys):
    sweep = _sweep(tmp_path, f"adaptive: {{target_topology: {tmp_path / 'missing.yaml'}}}")
    rc = main(["sweep", str(sweep), "--replay", str(CLASSIFIER)])
    err = capsys.readouterr().err
    assert rc == 2 and "adaptive.target_topology" in err and "Traceback" not in err
