"""What shows a sweep's events (run.driver.events): the CLI's display when it is not on a terminal (a CI log,
`orch sweep ... > log`: one plain line per trial start and end, since a live display would print nothing until
the sweep ends) and on one, `--json`'s records, and the Python API's notices, which print nothing."""

from __future__ import annotations

import io
import json

from rich.console import Console

from orchestrator.app.notices import Notice
from orchestrator.app.sweep import NoticedProgress
from orchestrator.cli.progress import JsonProgress, LiveProgress
from orchestrator.run.job import Phase, RankProgress


def _progress(total: int) -> tuple[LiveProgress, io.StringIO]:
    out = io.StringIO()
    return LiveProgress(total, console=Console(file=out, width=200)), out


def _finished(progress, record, counts=True):
    progress.finished(record.key, record, counts=counts)


def test_piped_output_has_a_line_per_trial_start_and_end(make):
    progress, out = _progress(2)
    with progress:
        _finished(progress, make.infeasible(2, 2, 8, "4 cores needed, 2 available"), counts=False)
        progress.started("r1-t1-b8", "r1-t1-b8 (1 rank(s) × 1 thread(s), local batch 8)", None)
        progress.phase("r1-t1-b8", RankProgress(Phase.TIMING, step=3, repeat=1, of=3))
        _finished(progress, make.tp(1, 1, 8, 123.4, cv=0.02))
        progress.started("r1-t2-b8", "r1-t2-b8 (1 rank(s) × 2 thread(s), local batch 8)", None)
        _finished(progress, make.bad(1, 2, 8, "oom", "private memory 900 MiB exceeded the rank's budget 800 MiB"))
    lines = out.getvalue().splitlines()
    assert lines[0] == "r2-t2-b8: infeasible"
    assert lines[1] == "[1/2] r1-t1-b8 (1 rank(s) × 1 thread(s), local batch 8): starting"
    assert lines[2].startswith("[1/2] r1-t1-b8: ok in ") and lines[2].endswith(": 123.4 samples/s (cv 2.0%)")
    assert lines[3].startswith("[2/2] r1-t2-b8 (")
    assert lines[4].startswith("[2/2] r1-t2-b8: oom in ") and "exceeded the rank's budget 800 MiB" in lines[4]
    # No live-display frames (progress bars, boxes) in a log.
    assert len(lines) == 5 and "━" not in out.getvalue()


def test_json_mode_prints_records_not_lines(make, capsys):
    with JsonProgress() as progress:
        progress.started("r1-t1-b8", "r1-t1-b8", None)
        _finished(progress, make.tp(1, 1, 8, 50.0))
        progress.note("r1-t1-b8: its logs are there")
    printed = capsys.readouterr()
    assert [json.loads(line)["key"] for line in printed.out.splitlines()] == ["r1-t1-b8"]
    assert [json.loads(line) for line in printed.err.splitlines()] == [{"note": "r1-t1-b8: its logs are there"}]


def test_the_api_s_progress_hands_finished_trials_and_notes_to_notify_and_prints_nothing(make, capsys):
    heard: list[Notice] = []
    with NoticedProgress(heard.append, 2) as progress:
        _finished(progress, make.infeasible(2, 2, 8, "4 cores needed, 2 available"), counts=False)
        progress.started("r1-t1-b8", "r1-t1-b8 (1 rank(s) × 1 thread(s), local batch 8)", "cold start")
        progress.phase("r1-t1-b8", RankProgress(Phase.TIMING, step=3, repeat=1, of=3))
        _finished(progress, make.tp(1, 1, 8, 123.4, cv=0.02))
        progress.started("r1-t2-b8", "r1-t2-b8", None)
        progress.finished("r1-t2-b8", None, counts=False)   # interrupted
        progress.note("r2-t1-b8: failed; its ranks' logs are in results/x/logs/r2-t1-b8-rank*.log")
    assert [n.plain() for n in heard] == ["[1/2] r1-t1-b8: ok: 123.4 samples/s (cv 2.0%)",
                                          "r2-t1-b8: failed; its ranks' logs are in results/x/logs/r2-t1-b8-rank*.log"]
    assert capsys.readouterr() == ("", "")


def test_every_running_trial_is_shown_and_each_end_is_timed_from_its_own_start(make):
    out = io.StringIO()
    progress = LiveProgress(2, console=Console(file=out, width=200, force_terminal=True))
    progress.started("conv-g8-s0", "conv-g8-s0 (global batch 8, seed 0, on 1×1)", None)
    progress.started("conv-g8-s1", "conv-g8-s1 (global batch 8, seed 1, on 1×1)", "the widest interval")
    progress.phase("conv-g8-s1", RankProgress(Phase.TRAINING, step=3, repeat=2, of=10, metric=0.125))
    frame = Console(file=io.StringIO(), width=200)
    frame.print(progress._render())
    shown = frame.file.getvalue()
    assert "▶ conv-g8-s0 (global batch 8, seed 0, on 1×1): starting" in shown
    assert "▶ conv-g8-s1 (global batch 8, seed 1, on 1×1): training epoch 2/10, last eval 0.125" in shown
    assert "chosen: the widest interval" in shown
    progress.finished("conv-g8-s0", None, counts=False)   # interrupted: not counted, no longer shown
    assert list(progress.running) == ["conv-g8-s1"] and progress.done == 0


def test_piped_lines_of_overlapping_trials_number_starts_and_ends_apart(make):
    progress, out = _progress(2)
    with progress:
        progress.started("r1-t1-b8", "r1-t1-b8 (first)", None)
        progress.started("r1-t1-b16", "r1-t1-b16 (second)", None)
        _finished(progress, make.tp(1, 1, 16, 10.0))
        _finished(progress, make.tp(1, 1, 8, 20.0))
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/2] r1-t1-b8 (first): starting"
    assert lines[1] == "[2/2] r1-t1-b16 (second): starting"
    assert lines[2].startswith("[1/2] r1-t1-b16: ok in ") and lines[3].startswith("[2/2] r1-t1-b8: ok in ")
