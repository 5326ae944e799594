"""The driver's supervision loop (run.driver.supervision.supervise) on a scripted rank host: no processes, no Ray.
Which rank's end explains the trial, when the others are stopped, and what a Ctrl-C leaves."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from orchestrator.core.measured.rank_end import RankStatus
from orchestrator.run.driver import supervision
from orchestrator.run.driver.launcher import Outcome
from orchestrator.run.driver.supervision import Limits, LocalRanks, supervise
from orchestrator.run.job import Phase, RankProgress


def _end(status: RankStatus, reason: str | None = None, *, code: int | None = None, log_tail: str = "") -> Outcome:
    return Outcome(status, reason, code, 100.0, None, log_tail, None, "taskset -c 0", 1234)


class ScriptedHost:
    """Ranks whose ends are given up front (None: runs until stopped); records every stop."""

    def __init__(self, ends: list[Outcome | None], progress: RankProgress | Exception | None = None):
        self.ends, self._progress = ends, progress
        self.futures: list[Future] = []
        self.stops: list[tuple[int, str]] = []

    def supervise(self, index: int, limits) -> Future:
        future: Future = Future()
        if self.ends[index] is not None:
            future.set_result(self.ends[index])
        self.futures.append(future)
        return future

    wait = LocalRanks.wait
    outcome = LocalRanks.outcome

    def stop(self, index: int, reason: str) -> None:
        self.stops.append((index, reason))
        if not self.futures[index].done():
            self.futures[index].set_result(_end(RankStatus.STOPPED, reason))

    def progress(self, index: int) -> RankProgress | None:
        if isinstance(self._progress, Exception):
            raise self._progress
        return self._progress


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(supervision, "WAIT_POLL_S", 0.01)
    monkeypatch.setattr(supervision, "GRACE_AFTER_FAILURE_S", 0.2)
    monkeypatch.setattr(supervision, "STATUS_POLL_S", 0.0)


def _supervise(host: ScriptedHost, **kwargs):
    started = time.time()
    limits = Limits([1000.0] * len(host.ends), 60.0, started + 60)
    return supervise(host, limits, started, stop=kwargs.pop("stop", threading.Event()), **kwargs)


def test_every_rank_ok_is_an_ok_trial_with_their_notes():
    run = _supervise(ScriptedHost([_end(RankStatus.OK), _end(RankStatus.OK, "result kept")]))
    assert (run.status, run.reason, run.failing_rank) == ("ok", "rank 1: result kept", None)


def test_a_failed_rank_stops_the_others_after_the_grace_period():
    started = time.monotonic()
    host = ScriptedHost([_end(RankStatus.FAILED, "exited with status 1", code=1), None])
    run = _supervise(host)
    assert time.monotonic() - started >= 0.2   # the others had their grace period to report their own end
    assert host.stops == [(1, "stopped because another rank ended: exited with status 1")]
    assert (run.status, run.failing_rank, run.reason) == ("failed", 0, "rank 0: exited with status 1")


def test_the_root_cause_is_named_not_its_echo():
    echo = _end(RankStatus.FAILED, "exited with status 1", code=1, log_tail="Broken pipe")
    oom = _end(RankStatus.OOM, "private memory exceeded")
    run = _supervise(ScriptedHost([echo, oom]))
    assert (run.status, run.failing_rank) == ("oom", 1)


def test_stop_interrupts_every_rank_and_the_run_is_no_result():
    stop = threading.Event()
    stop.set()
    host = ScriptedHost([None, None])
    run = _supervise(host, stop=stop)
    assert run.interrupted and run.status == "failed"
    assert sorted(host.stops) == [(0, "interrupted by the user (Ctrl-C)"), (1, "interrupted by the user (Ctrl-C)")]


@pytest.mark.parametrize("progress", [RankProgress(Phase.TIMING, step=3), RuntimeError("actor busy")])
def test_rank_0s_progress_is_shown_and_a_failed_ask_shows_none(progress):
    shown = []
    host = ScriptedHost([_end(RankStatus.FAILED, "exited with status 1", code=1), None], progress=progress)
    _supervise(host, on_progress=shown.append)
    assert shown and all(s == (None if isinstance(progress, Exception) else progress) for s in shown)
