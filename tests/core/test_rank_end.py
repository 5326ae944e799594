"""How a rank ended and which rank explains a failed trial: pure, no Ray, no processes."""

from __future__ import annotations

import signal
from dataclasses import dataclass

import pytest

from orchestrator.core.measured.rank_end import (
    COLLECTIVE_TIMEOUT,
    EXIT_ORPHANED,
    Cause,
    RankStatus,
    cause,
    classify_exit,
    describe_exit,
    first_bad,
    root_cause,
)


@dataclass
class End:
    status: str
    reason: str | None = None
    exit_code: int | None = None
    log_tail: str = ""


OK = End("ok", exit_code=0)


def test_cause_orders_memory_before_signal_before_timeout_before_plain_failure():
    ends = [End("stopped"), End("failed", exit_code=1), End("timeout"), End("failed", exit_code=-signal.SIGKILL),
            End("oom")]
    assert sorted(cause(e) for e in ends) == [Cause.OOM, Cause.SIGNAL, Cause.TIMEOUT, Cause.FAILED, Cause.STOPPED]


def test_a_peer_lost_mid_collective_outranks_the_signal_it_died_of():
    aborted = End("failed", exit_code=-signal.SIGABRT, log_tail="RuntimeError: [gloo] Connection closed by peer")
    assert cause(aborted) == Cause.PEER_LOST
    assert cause(End("failed", exit_code=-signal.SIGABRT)) == Cause.SIGNAL


def test_no_outcome_ranks_last():
    assert cause(None) == Cause.NO_OUTCOME > cause(OK)


def test_root_cause_is_none_when_every_rank_is_ok():
    assert root_cause([OK, OK], ended=[1, 0]) is None


def test_root_cause_names_the_oom_rank_not_the_peer_that_lost_it():
    echo = End("failed", "the rank exited with status 1", 1, "Broken pipe")
    oom = End("oom", "private memory 950 MiB exceeded the rank's budget 900 MiB", -9)
    assert root_cause([echo, oom, OK], ended=[0, 1, 2]) == (1, "oom", "rank 1: private memory 950 MiB exceeded "
                                                                "the rank's budget 900 MiB")


def test_between_equal_causes_the_first_to_end_wins():
    first, second = End("failed", "status 1", 1), End("failed", "status 2", 2)
    assert root_cause([first, second], ended=[1, 0])[0] == 1
    assert root_cause([first, second], ended=[0, 1])[0] == 0


def test_a_stopped_rank_or_a_missing_outcome_makes_the_trial_failed():
    assert root_cause([End("stopped", "stopped by the driver"), OK], ended=[0, 1]) == (
        0, "failed", "rank 0: stopped by the driver")
    assert root_cause([OK, None], ended=[0]) == (1, "failed", "rank 1: no outcome")


def test_first_bad_picks_the_best_explanation_so_far():
    timeout = End("timeout", "no progress for 4 s")
    assert first_bad([OK, End("failed", "status 1", 1), timeout]) is timeout
    assert first_bad([OK, None]) is None


def test_describe_exit_names_signals_and_orch_own_codes():
    assert describe_exit(None) == "the rank did not exit"
    assert describe_exit(-signal.SIGKILL).startswith("the rank was killed by SIGKILL (not sent by orch")
    assert describe_exit(-signal.SIGSEGV) == "the rank was killed by SIGSEGV"
    assert describe_exit(EXIT_ORPHANED) == "the rank exited because its launcher went away"
    assert describe_exit(1) == "the rank exited with status 1"


@pytest.mark.parametrize("code, written, done, log, expected", [
    (0, True, True, "", (RankStatus.OK, None)),
    (0, True, False, "", (RankStatus.OK, None)),
    (-6, True, True, "", (RankStatus.OK, "result kept: the rank was killed by SIGABRT after reporting it")),
    (-6, True, False, "", (RankStatus.FAILED, "the rank was killed by SIGABRT")),
    (0, False, False, "", (RankStatus.FAILED, "the rank exited with status 0")),
    (1, False, False, "Traceback ...", (RankStatus.FAILED, "the rank exited with status 1")),
    (1, False, False, f"[gloo] {COLLECTIVE_TIMEOUT} 60000ms",
     (RankStatus.TIMEOUT, "a collective timed out in torch.distributed (the rank exited with status 1)")),
])
def test_classify_exit(code, written, done, log, expected):
    assert classify_exit(code, result_written=written, reported_done=done, log_end=log) == expected


def test_classify_exit_looks_only_at_the_end_of_the_log():
    log = f"{COLLECTIVE_TIMEOUT} in an early retry\n" + "x" * 10_000
    assert classify_exit(1, result_written=False, reported_done=False, log_end=log)[0] == RankStatus.FAILED
