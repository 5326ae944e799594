"""The whole report of a hand-made results folder, pinned by golden files, plus the behaviour around it
(formats, plots, partial and empty sweeps, determinism, the terminal form).

The fixture `tests/data/results/golden-sweep/` is a 2-socket × 4-core machine, ranks {1,2,4} × threads
{1,2,4} × local batch {32,256}, with ok, infeasible, failed, oom and timeout points, a point not run yet, a
missing baseline (1×1×256 timed out), 3 global batches × 3 seeds of convergence (one seed not converged),
fp32 peak records, and a torn last line in trials.jsonl.

After an intended change to the report, regenerate the golden files and review the diff:

    ORCH_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/report/test_report_golden.py
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from orchestrator.app.report import analyzed
from orchestrator.io.store import load_results
from orchestrator.report import build
from orchestrator.report.build import FORMATS, REPORT_FILE


def write_report(results, out, formats=FORMATS):
    """The report's files as `orch report` writes them: its data analyzed (the models fitted) once."""
    return build.write_report(results, analyzed(results), out, formats)


def terminal_report(results):
    return build.terminal_report(results, analyzed(results))

DATA = Path(__file__).resolve().parents[1] / "data"
RESULTS = DATA / "results" / "golden-sweep"
GOLDEN = DATA / "golden" / "golden-sweep"
UPDATE = os.environ.get("ORCH_UPDATE_GOLDEN") == "1"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXPECTED_PNGS = {"scalability-b32.png", "scalability-b256.png", "throughput-vs-cores.png", "convergence.png",
                 "time-to-train.png"}


def pinned(name: str) -> bool:
    """The files the golden test pins: the Markdown report, every CSV, and the RCP-style JSON."""
    return name == REPORT_FILE or name.endswith(".csv") or name.startswith("rcps_")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    paths = write_report(load_results(RESULTS), out)
    return out, paths


def test_golden_files(report):
    out, paths = report
    produced = {p.name for p in paths if pinned(p.name)}
    if UPDATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for stale in GOLDEN.iterdir():
            if stale.name not in produced:
                stale.unlink()
        for name in produced:
            shutil.copyfile(out / name, GOLDEN / name)
    assert produced == {p.name for p in GOLDEN.iterdir()}, "pinned files differ from the golden set"
    for name in sorted(produced):
        assert (out / name).read_text(encoding="utf-8") == (GOLDEN / name).read_text(encoding="utf-8"), (
            f"{name} differs from {GOLDEN / name}; if the change is intended, regenerate with "
            "ORCH_UPDATE_GOLDEN=1 and review the diff")


def test_report_files_are_written_per_table_and_returned(report):
    out, paths = report
    names = [p.name for p in paths]
    assert names[-1] == REPORT_FILE
    assert sorted(names) == sorted(p.name for p in out.iterdir())
    for stem in ("scalability-b32", "scalability-b256", "throughput-b32", "efficiency-b256", "weak-scaling-b32",
                 "convergence", "time-to-train", "hardware-efficiency"):
        assert f"{stem}.csv" in names and f"{stem}.json" in names
    table = json.loads((out / "scalability-b256.json").read_text())
    assert table["name"] == "scalability-b256" and table["rows"][1]["cells"][1]["text"] == "1.89"


def test_markdown_report_reads_on_its_own(report):
    out, _ = report
    text = (out / REPORT_FILE).read_text()
    for needle in ("## Machine", "Intel(R) Xeon(R) Gold 5222", "2 socket(s) × 4 cores", "torch 2.14.1",
                   "Backend: gloo", "```yaml", "warm-up steps, excluded from timing", "barrier",
                   "slowest rank's time", "median", "coefficient of variation", "peak private memory (its resident set",
                   "ran on (r×t×b)", "did not run ok (timeout)", "trials.jsonl: line 30: torn last line",
                   "![Scalability: scalability-b32.png](scalability-b32.png)", "rcps_classifier.json"):
        assert needle in text, needle
    assert str(RESULTS) not in text and str(out) not in text      # no absolute paths


def test_pngs_are_valid_and_not_trivial(report):
    out, paths = report
    pngs = {p.name for p in paths if p.suffix == ".png"}
    assert pngs == EXPECTED_PNGS
    for name in pngs:
        data = (out / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE, name
        width, height = struct.unpack(">II", data[16:24])         # the IHDR chunk follows the signature
        assert width >= 300 and height >= 200, (name, width, height)
        assert len(data) > 10_000, (name, len(data))


def test_output_is_deterministic(report, tmp_path):
    out, paths = report
    again = write_report(load_results(RESULTS), tmp_path)
    assert [p.name for p in again] == [p.name for p in paths]
    for p in again:
        assert p.read_bytes() == (out / p.name).read_bytes(), p.name


def test_formats_select_files_and_unknown_ones_are_rejected(tmp_path):
    results = load_results(RESULTS)
    paths = write_report(results, tmp_path / "csv-only", formats=("csv",))
    assert paths and all(p.suffix == ".csv" for p in paths)
    md = write_report(results, tmp_path / "md-only", formats=("md",))
    assert [p.name for p in md] == [REPORT_FILE]
    text = md[0].read_text()
    assert ".png" not in text and "## Files" not in text and "rcps_" not in text
    with pytest.raises(ValueError, match="valid formats are: md, csv, json, png"):
        write_report(results, tmp_path / "bad", formats=("md", "pdf"))


def _copy_results(tmp_path: Path, lines: list[str] | None, drop_convergence: bool = False) -> Path:
    folder = tmp_path / "partial"
    folder.mkdir()
    for name in ("spec.json", "topology.json", "environment.json"):
        shutil.copyfile(RESULTS / name, folder / name)
    if drop_convergence:
        spec = json.loads((folder / "spec.json").read_text())
        spec["spec"]["convergence"] = None
        (folder / "spec.json").write_text(json.dumps(spec))
    if lines is not None:
        (folder / "trials.jsonl").write_text("".join(lines))
    return folder


def test_a_sweep_with_no_records_yet_says_no_data_yet(tmp_path):
    results = load_results(_copy_results(tmp_path, None))
    paths = write_report(results, tmp_path / "report", formats=FORMATS)
    assert not [p for p in paths if p.suffix == ".png"]
    text = (tmp_path / "report" / REPORT_FILE).read_text()
    assert "No convergence run has finished yet: no data yet." in text
    assert "Needs throughput and convergence results: no data yet." in text
    assert "No layout ran ok yet: no data yet." in text
    # the grid is known from spec.json, so every point is "not run yet"
    assert "18 grid points" in text and "18 not run yet" in text


def test_a_partial_sweep_reports_what_it_has(tmp_path):
    lines = [line + "\n" for line in (RESULTS / "trials.jsonl").read_text().splitlines()
             if '"kind":"throughput"' in line and '"local_batch":32,' in line]
    results = load_results(_copy_results(tmp_path, lines, drop_convergence=True))
    assert results.errors == ()
    paths = write_report(results, tmp_path / "report")
    names = {p.name for p in paths}
    assert {"scalability-b32.png", "throughput-vs-cores.png"} <= names
    assert "convergence.png" not in names and "time-to-train.png" not in names
    text = (tmp_path / "report" / REPORT_FILE).read_text()
    assert "The sweep has no convergence section, so epochs to target were not measured." in text
    assert "### Scalability, local batch 256" in text and "Skipped record lines" not in text


def test_terminal_report_renders_every_table(tmp_path):
    from rich.console import Console

    console = Console(record=True, width=140, file=io.StringIO())
    console.print(*terminal_report(load_results(RESULTS)))
    text = console.export_text()
    for needle in ("Scalability, local batch 32", "1.90", "Time to train (hours)", "7.00 ± 0.50",
                   "did not converge b", "torn last line"):
        assert needle in text, needle
    empty = load_results(_copy_results(tmp_path, None))
    console.print(*terminal_report(empty))
    assert "no data yet" in console.export_text()


def test_orch_report_fits_the_models_once_for_the_terminal_and_the_files(tmp_path, monkeypatch, capsys):
    """The report renders one fit (orchestrator.app.report.analyzed): the tables printed and the files written
    show the same models, and the fit, the costly part, runs once."""
    from orchestrator.cli import main
    from orchestrator.core.predict import fit

    calls = []
    real = fit.fit_all
    monkeypatch.setattr(fit, "fit_all", lambda *args, **kwargs: calls.append(args) or real(*args, **kwargs))
    assert main(["report", str(RESULTS), "--out", str(tmp_path), "--format", "terminal", "--format", "all"]) == 0
    assert len(calls) == 1 and (tmp_path / REPORT_FILE).is_file() and "Scalability" in capsys.readouterr().out
