"""The report of a script's sweep says what its timed region held: the script's own loop, data loading included,
and the learning rate orch gave it (or not); a workload's report is unchanged (the golden files pin it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from orchestrator.io.store import load_results
from orchestrator.report.markdown import _measurement

GOLDEN_SWEEP = Path(__file__).resolve().parents[1] / "data" / "results" / "golden-sweep"


def _as_script(tmp_path: Path, args: list[str]) -> Path:
    folder = tmp_path / "results"
    shutil.copytree(GOLDEN_SWEEP, folder)
    spec_file = folder / "spec.json"
    data = json.loads(spec_file.read_text())
    data["spec"]["workload"] = {"name": "train", "params": {}, "script": "/home/me/project/train.py", "args": args,
                                "script_sha256": "ab" * 32}
    spec_file.write_text(json.dumps(data))
    return folder


def test_a_script_sweep_says_its_timed_region_is_the_scripts_loop(tmp_path):
    text = _measurement(load_results(_as_script(tmp_path, ["--lr", "{lr}"])))
    assert ("The timed region holds only the script's own loop between two `orch.script.step()` calls (train.py: its "
            "data loading, logging and own synchronisations included)") in text
    assert "The script loaded its own data inside its steps" in text and "prepared in memory" not in text
    assert "The script was given the learning rate as {lr}: 0.02 at global batch 32" in text
    assert "evaluated on its own schedule" in text and "evaluated every" not in text


def test_a_script_without_lr_sets_its_own(tmp_path):
    text = _measurement(load_results(_as_script(tmp_path, ["--epochs", "3"])))
    assert "The script set its own learning rate (its arguments do not take {lr})" in text


def test_a_workload_sweep_keeps_its_words():
    text = _measurement(load_results(GOLDEN_SWEEP))
    assert "The timed region holds only training steps (forward, backward" in text and "script" not in text
