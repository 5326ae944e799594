"""Trackers are found by name, as workloads are: orch's own (MLflow, TensorBoard) through the same registry
(`orchestrator.io.tracking.TRACKERS`, a name -> module map, then the `orch.trackers` entry-point group) as one
added by a test: one module (tests/io/toy_tracker.py) and one registration line, then `orch report --track`
and `orch.track` log to it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import orch
from orchestrator.cli import main
from orchestrator.io import tracking
from orchestrator.io.store import load_results

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "results" / "example-classifier"


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(tracking.TRACKERS, "toy", "toy_tracker:TRACKER")   # the one registration line


@pytest.fixture
def folder(tmp_path):
    copy = tmp_path / "example"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("report", "tensorboard"))
    return copy


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_orchs_trackers_are_found_through_the_registry():
    assert set(tracking.TRACKERS) == {"mlflow", "tensorboard"}
    assert tracking.find_tracker("tensorboard").package == "tensorboard"
    assert tracking.find_tracker("mlflow").option == "--mlflow"


def test_a_tracker_added_by_name_logs_a_folder_through_orch_report(toy, folder, capsys):
    assert main(["report", str(folder), "--format", "md", "--track", "toy"]) == 0
    lines = _lines(folder / "toy-tracker.jsonl")
    records = load_results(folder).records
    assert lines[0] == {"open": "classifier", "records": len(records)}
    assert sorted(line["record"] for line in lines[1:-1]) == sorted(r.key for r in records)
    assert lines[-1] == {"end": "report", "files": ["report.md"]}   # the report's own files, those written now


def test_a_tracker_added_by_name_logs_through_the_python_api_with_its_setting(toy, folder, tmp_path):
    log = tmp_path / "elsewhere.jsonl"
    assert orch.track(folder, trackers=[f"toy={log}"], report_files=[]) is True
    assert _lines(log)[-1] == {"end": "report", "files": []} and not (folder / "toy-tracker.jsonl").exists()


def test_an_unknown_tracker_is_bad_input_that_says_where_orch_looked(folder, capsys):
    assert main(["report", str(folder), "--format", "md", "--track", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "no tracker named 'nosuch': orch's are mlflow, tensorboard; the entry points of group orch.trackers" in err
    assert not (folder / "report").exists()   # refused before anything was written


def test_a_tracker_is_found_by_its_one_id(monkeypatch, folder, capsys):
    """A tracker's id is the name it is asked for by: one registered under another name than the id its
    TrackerKind gives is refused (its settings are kept under its id), before anything is written."""
    monkeypatch.setitem(tracking.TRACKERS, "other", "toy_tracker:TRACKER")
    assert tracking.find_tracker("mlflow").id == "mlflow"
    assert main(["report", str(folder), "--format", "md", "--track", "other"]) == 2
    assert "tracker 'other' (toy_tracker:TRACKER) gives its id as 'toy'" in capsys.readouterr().err
