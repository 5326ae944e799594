"""Inputs that orch reads but did not write, or wrote long ago: a results folder someone else handed over, a
profile folder, an RCP file, a results path that is no folder. Each is bad input (exit 2, one reason, no
traceback), `orch sweep`'s before Ray starts, and no name read from a file becomes a path outside its folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.app import session
from orchestrator.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "results" / "example-predict"
SWEEP = REPO / "sweeps" / "classifier.yaml"


def run_bad(capsys, argv: list[str]) -> str:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert "Traceback" not in err + out
    assert err.startswith("orch: error: ") or "\norch " in f"\n{err}" and ": error: argument " in err  # argparse's
    return err


@pytest.fixture
def folder(tmp_path) -> Path:
    """A copy of a committed results folder (records, spec, topology, environment)."""
    copy = tmp_path / "results" / "example"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("report"))
    return copy


@pytest.fixture
def no_ray(monkeypatch):
    """`orch sweep` must refuse before Ray starts: starting it is a failure of the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started for input that was bad before it")

    monkeypatch.setattr(session, "ray_session", refuse)   # the sweep (app.sweep) starts Ray through it


def edit_spec(folder: Path, change) -> None:
    data = json.loads((folder / "spec.json").read_text())
    (folder / "spec.json").write_text(json.dumps(change(data)))


# --- orch report ---------------------------------------------------------------------------------------------

def test_report_trials_that_are_not_utf8(folder, capsys):
    (folder / "trials.jsonl").write_bytes((folder / "trials.jsonl").read_bytes() + b"\xff\xfe garbage\n")
    err = run_bad(capsys, ["report", str(folder), "--format", "md"])
    assert "trials.jsonl: is not UTF-8 text" in err


@pytest.mark.parametrize("change, reason", [
    (lambda d: [d], "a JSON list where orch writes an object"),
    (lambda d: {**d, "derived": [1, 2]}, "`spec` and `derived` must be JSON objects"),
    (lambda d: {**d, "spec": {**d["spec"], "convergence": "yes"}}, "spec.convergence must be a JSON object"),
    (lambda d: {**d, "derived": {**d["derived"], "local_batches": [8, "x"]}}, "derived.local_batches must be a list"),
])
def test_report_spec_json_of_the_wrong_shape(folder, capsys, change, reason):
    edit_spec(folder, change)
    assert reason in run_bad(capsys, ["report", str(folder), "--format", "md"])


def test_report_never_names_a_file_after_a_workload_that_is_a_path(folder, tmp_path, capsys):
    edit_spec(folder, lambda d: {**d, "derived": {**d["derived"], "workload": "../../../escaped"}})
    err = run_bad(capsys, ["report", str(folder)])
    assert "derived.workload: '../../../escaped' must be letters, digits" in err
    assert not list(tmp_path.rglob("*escaped*")) and not (folder / "report").exists()


def test_a_workload_found_by_file_path_reads_back_and_names_its_files_by_its_own_name(folder, tmp_path, capsys):
    """spec.workload.name is the reference a workload was found by (here a file's absolute path); only
    derived.workload, the workload's own name, ever names a file."""
    edit_spec(folder, lambda d: {**d, "spec": {**d["spec"], "workload": {**d["spec"]["workload"],
                                                                         "name": "/home/me/bench.py:workload"}}})
    from orchestrator.io.store import load_results
    from orchestrator.report.data import benchmark_name

    assert benchmark_name(load_results(folder)) == load_results(folder).derived.workload
    edit_spec(folder, lambda d: {**d, "derived": {k: v for k, v in d["derived"].items() if k != "workload"}})
    assert benchmark_name(load_results(folder)) == "workload"   # a path never names a file


def test_report_out_that_cannot_be_written(folder, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert "--out " + str(blocker) + ": is a file, not a folder" in run_bad(
        capsys, ["report", str(folder), "--format", "md", "--out", str(blocker)])
    err = run_bad(capsys, ["report", str(folder), "--format", "md", "--out", str(blocker / "report")])
    assert "cannot write the report there (Not a directory)" in err


# --- orch sweep: refused before Ray --------------------------------------------------------------------------

def test_sweep_results_that_name_a_file(tmp_path, capsys, no_ray):
    blocker = tmp_path / "results.txt"
    blocker.write_text("mine")
    err = run_bad(capsys, ["sweep", str(SWEEP), "--results", str(blocker)])
    assert f"--results {blocker}: is a file, not a folder" in err
    assert blocker.read_text() == "mine"


@pytest.mark.parametrize("corrupt, reason", [
    (b'{"spec": {"name": "classifier"', "not valid JSON"),
    (b"[1, 2, 3]", "a JSON list where orch writes an object"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
])
def test_sweep_resuming_a_corrupt_spec_json_is_refused_before_ray_starts(folder, capsys, no_ray, corrupt, reason):
    (folder / "spec.json").write_bytes(corrupt)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    err = run_bad(capsys, ["sweep", str(SWEEP), "--results", str(folder)])
    assert f"{folder / 'spec.json'}: " in err and reason in err and "to resume" in err
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before   # the lock went with it


HOLDER = """
import sys, time
from pathlib import Path
from orchestrator.io.lock import FolderLock
FolderLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_sweep_on_a_folder_in_use_exits_2_at_once_naming_the_holder(folder, capsys, no_ray):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        err = run_bad(capsys, ["sweep", str(SWEEP), "--results", str(folder)])
        assert f"results folder {folder} is in use by another orch sweep: pid {holder.pid} on host " in err
        assert ", started 20" in err
    finally:
        holder.kill()
        holder.wait()


def test_sweep_refuses_a_work_folder_another_user_could_change(tmp_path, capsys, monkeypatch, no_ray):
    from orchestrator.io import files

    root = tmp_path / "orch-work"
    root.mkdir()
    os.chmod(root, 0o777)
    monkeypatch.setattr(files, "WORK_ROOT", root)
    err = run_bad(capsys, ["sweep", str(SWEEP), "--results", str(tmp_path / "r")])
    assert f"work folder {root} is writable by other users (mode 777)" in err
    assert not (tmp_path / "r").exists()


# --- orch predict --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content, reason", [
    (b'{"bs": \xff}', "is not UTF-8 text"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
])
def test_predict_rcp_files_that_cannot_be_read(tmp_path, capsys, content, reason):
    rcp = tmp_path / "rcps.json"
    rcp.write_bytes(content)
    assert f"RCP file {rcp}: {reason}" in run_bad(capsys, ["predict", str(EXAMPLE), "--rcp", str(rcp)])


@pytest.mark.parametrize("option, value, reason", [
    ("--local-batch", ",".join(map(str, range(1, 40))), "39 values, more than 32"),
    ("--nodes", "1,2,1000000", "1000000 is more than 100,000"),
    ("--deadline", "inf", "'inf' is not a duration"),
    ("--budget", "nan", "'nan' is not a cost in node-hours"),
])
def test_predict_options_have_stated_bounds(capsys, option, value, reason):
    assert reason in run_bad(capsys, ["predict", str(EXAMPLE), option, value])


def test_predict_a_plan_too_large_is_bad_input_not_a_traceback(capsys, monkeypatch):
    from orchestrator.core.planning import plan

    monkeypatch.setattr(plan, "MAX_GRID_POINTS", 3)
    err = run_bad(capsys, ["predict", str(EXAMPLE), "--local-batch", "1,2,3,4,5,6,7,8"])
    assert "--nodes/--local-batch on this target: the grid has" in err


# --- orch profile --------------------------------------------------------------------------------------------

def test_profile_report_only_never_follows_a_label_out_of_its_folder(tmp_path, capsys):
    out = tmp_path / "profile"
    out.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "profile-result.json").write_text("{}")
    (out / "profile-header.json").write_text(json.dumps({"targets": ["../outside"]}))
    err = run_bad(capsys, ["profile", str(SWEEP), "--report-only", "--out", str(out)])
    assert "profile-header.json target: '../outside' must be letters, digits" in err
    assert sorted(p.name for p in out.iterdir()) == ["profile-header.json"]


@pytest.mark.parametrize("header, reason", [
    ("[]", "no list of targets"),
    ('{"targets": "1x1x8"}', "no list of targets"),
    ("{", "not valid JSON"),
    ('{"targets": ["1x1x8"]}', "no sweep, workload, steps, warmup, machine, backend, command"),  # was a KeyError
])
def test_profile_report_only_headers_of_the_wrong_shape(tmp_path, capsys, header, reason):
    (tmp_path / "profile-header.json").write_text(header)
    assert reason in run_bad(capsys, ["profile", str(SWEEP), "--report-only", "--out", str(tmp_path)])


def test_profile_variant_names_are_folder_names(tmp_path, capsys):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(SWEEP.read_text() + "profile:\n  variants:\n    ../../x: {hidden: 32}\n")
    err = run_bad(capsys, ["profile", str(sweep), "--layout", "1x1x8", "--out", str(tmp_path / "p")])
    assert "profile.variants: '../../x' must be letters, digits" in err
    assert not (tmp_path / "p").exists()


def test_profile_layouts_are_bounded(tmp_path, capsys):
    layouts = [a for b in range(1, 34) for a in ("--layout", f"1x1x{b}")]
    err = run_bad(capsys, ["profile", str(SWEEP), *layouts, "--out", str(tmp_path / "p")])
    assert "33 layouts, more than 32" in err


# --- what orch predict reads of a folder --------------------------------------------------------------------------

@pytest.mark.parametrize("points", [[1, 2], {"8": "x"}, {"-8": 1.0}, {"8": float("inf")}, {"²": 1.0}, {"8": -1}])
def test_predict_memory_figures_of_the_wrong_shape(folder, capsys, points):
    edit_spec(folder, lambda d: {**d, "derived": {**d["derived"], "memory_mib": points}})
    assert "derived.memory_mib must map local batches" in run_bad(capsys, ["predict", str(folder)])


def test_predict_reads_memory_per_rank_from_the_folder(folder, capsys):
    """derived.memory_mib (what a sweep records now) sets the memory rule; a folder without it uses the memory
    its records were planned with. Memory larger than the machine's makes every layout infeasible: the figure was
    read from the folder, not from the workload's formula."""
    assert main(["predict", str(folder), "--json"]) == 0
    capsys.readouterr()
    edit_spec(folder, lambda d: {**d, "derived": {**d["derived"], "memory_mib": {"16": 1e9, "256": 1e9}}})
    err = run_bad(capsys, ["predict", str(folder)])
    assert "fits no layout of the target" in err and "memory" in err
