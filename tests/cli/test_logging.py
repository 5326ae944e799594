"""orch's diagnostics through `logging` (orchestrator.cli.logs): -v and -q on every command, the level and a log
file from the environment, plain lines in orch's words off a terminal and rich's handler on one, and the
command's output untouched by any of it."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from orchestrator.cli import build_parser, main
from orchestrator.cli.logs import configure

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "results" / "example-classifier"


@pytest.fixture
def torn(tmp_path) -> Path:
    """A copy of the committed classifier folder whose trials.jsonl ends in a torn line (a warning to report)."""
    folder = tmp_path / "classifier"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("report"))
    with open(folder / "trials.jsonl", "a") as fh:
        fh.write('{"schema":1,"kind":"throughput","key":"r9')
    return folder


def report(capsys, folder: Path, *options: str) -> tuple[int, str, str]:
    code = main(["report", str(folder), "--format", "json", "--out", str(folder / "out"), *options])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_command_takes_v_and_q():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        flags = {flag for action in parser._actions for flag in action.option_strings}
        assert {"-v", "--verbose", "-q", "--quiet"} <= flags, name


def test_a_note_shows_by_default_and_q_keeps_only_warnings(torn, capsys):
    code, _, err = report(capsys, torn)
    assert code == 0
    assert "warning: " in err and "torn last line" in err and f"wrote 15 file(s) to {torn / 'out'}" in err
    code, _, quiet = report(capsys, torn, "-q")
    assert code == 0 and "torn last line" in quiet and "wrote" not in quiet
    assert len(list((torn / "out").glob("*.json"))) == 15   # the output (the files) is the same either way


def test_v_adds_debug_detail_with_its_module(torn, capsys):
    _, _, err = report(capsys, torn, "-v")
    assert f"debug: orchestrator.app.report: reading the results folder {torn}" in err
    _, _, err = report(capsys, torn)
    assert "debug:" not in err


def test_the_level_comes_from_the_environment_and_the_options_win(torn, capsys, monkeypatch):
    monkeypatch.setenv("ORCH_LOG_LEVEL", "warning")
    _, _, err = report(capsys, torn)
    assert "torn last line" in err and "wrote" not in err
    _, _, err = report(capsys, torn, "-v")
    assert "debug: orchestrator.app.report" in err and "wrote" in err
    monkeypatch.setenv("ORCH_LOG_LEVEL", "loud")
    shutil.rmtree(torn / "out")
    code, _, err = report(capsys, torn)
    assert code == 2 and "orch: error: ORCH_LOG_LEVEL='loud': expected one of DEBUG, INFO, WARNING, ERROR" in err
    assert not (torn / "out").exists()   # refused before anything ran


def test_a_log_file_gets_everything_with_time_and_module(torn, capsys, monkeypatch, tmp_path):
    path = tmp_path / "orch.log"
    monkeypatch.setenv("ORCH_LOG_FILE", str(path))
    code, _, err = report(capsys, torn, "-q")
    assert code == 0 and "wrote" not in err
    lines = path.read_text().splitlines()
    assert any(" DEBUG orchestrator.app.report: reading the results folder" in line for line in lines)
    assert any(" INFO orchestrator.cli.report_cmd: wrote 15 file(s)" in line for line in lines)
    assert any(" WARNING orchestrator.cli.report_cmd: " in line and "torn last line" in line for line in lines)
    assert all(line[:4].isdigit() for line in lines)   # each starts with its time
    monkeypatch.setenv("ORCH_LOG_FILE", str(tmp_path / "no" / "such" / "folder" / "orch.log"))
    code, _, err = report(capsys, torn)
    assert code == 2 and "ORCH_LOG_FILE=" in err and "cannot be written" in err


def test_bad_input_reads_as_before(capsys, tmp_path):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"orch: error: {tmp_path}: not a results folder") and "Traceback" not in err


def test_a_terminal_gets_richs_handler_and_a_second_setup_replaces_the_first():
    from rich.logging import RichHandler

    logger = logging.getLogger("orchestrator")
    before = list(logger.handlers)
    try:
        configure("INFO", terminal=True)
        configure("INFO", terminal=True)
        ours = [h for h in logger.handlers if h not in before]
        assert len(ours) == 1 and isinstance(ours[0], RichHandler)
        assert logging.getLogger("orch").handlers[-1] is ours[0]   # one handler for orch's loggers
    finally:
        configure("INFO", terminal=False)
