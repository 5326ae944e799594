"""How a rank process ended, and which rank's end explains a failed trial. Pure: the launcher and the
driver pass in what they observed (exit status, whether a result was written, the end of the log).

When one rank fails, its peers usually fail too, a moment later and for a duller reason: a peer that
lost its partner mid-collective exits with an ordinary error (or aborts from gloo's thread), so the
record must name the rank whose end explains the others, not the last echo of it.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from enum import IntEnum, StrEnum
from typing import Protocol

from orchestrator.core.measured.records import Status

# The exit status of a rank that stopped because its launcher went away (see run.rank.main).
EXIT_ORPHANED = 3
# What gloo writes when a peer never joins a collective.
COLLECTIVE_TIMEOUT = "Timed out waiting"
# What a rank's log says when it failed only because a peer vanished mid-collective.
PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")
# How much of the end of a rank's log is searched for COLLECTIVE_TIMEOUT.
LOG_END_CHARS = 4096


class RankStatus(StrEnum):
    """How one rank ended, as its launcher saw it."""

    OK = "ok"
    FAILED = "failed"
    OOM = "oom"            # stopped by the memory watchdog
    TIMEOUT = "timeout"    # no progress, the wall-clock limit, or a collective that timed out
    STOPPED = "stopped"    # stopped by the driver because another rank ended

    @property
    def trial_status(self) -> Status:
        """The trial status this end gives a trial it explains: its own, but a rank stopped by the driver
        failed (the stop is an echo of another rank's end, never a verdict of its own).

        >>> RankStatus.STOPPED.trial_status, RankStatus.OOM.trial_status
        (<Status.FAILED: 'failed'>, <Status.OOM: 'oom'>)
        """
        return _TRIAL_STATUS[self]


# The one place where a rank's end maps onto a trial status (core.measured.records.Status).
_TRIAL_STATUS = {RankStatus.OK: Status.OK, RankStatus.FAILED: Status.FAILED, RankStatus.OOM: Status.OOM,
                 RankStatus.TIMEOUT: Status.TIMEOUT, RankStatus.STOPPED: Status.FAILED}


class Cause(IntEnum):
    """Root-cause priority: a lower value explains a failed trial better."""

    OOM = 0
    SIGNAL = 1
    TIMEOUT = 2
    FAILED = 3
    PEER_LOST = 4
    STOPPED = 5
    OK = 6
    NO_OUTCOME = 9     # the rank never reported an end (its launcher could not be asked)


class RankEnding(Protocol):
    """What the ranking needs of a rank's end (run.driver.launcher.Outcome has it)."""

    @property
    def status(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def log_tail(self) -> str: ...


_CAUSE_OF_STATUS = {RankStatus.OK: Cause.OK, RankStatus.FAILED: Cause.FAILED, RankStatus.OOM: Cause.OOM,
                    RankStatus.TIMEOUT: Cause.TIMEOUT, RankStatus.STOPPED: Cause.STOPPED}


def cause(end: RankEnding | None) -> Cause:
    """How well this rank's end explains the trial's failure.

    >>> from types import SimpleNamespace as End
    >>> cause(End(status="failed", reason=None, exit_code=-6, log_tail="gloo: Connection closed by peer")).name
    'PEER_LOST'
    >>> cause(End(status="failed", reason=None, exit_code=-9, log_tail="")).name
    'SIGNAL'
    """
    if end is None:
        return Cause.NO_OUTCOME
    # A rank that lost its peer mid-collective often aborts (SIGABRT from gloo's thread) right after the
    # peer died: its log says so, and that outranks the signal it died of.
    if end.status == RankStatus.FAILED and any(text in end.log_tail for text in PEER_LOST):
        return Cause.PEER_LOST
    if end.status == RankStatus.FAILED and end.exit_code is not None and end.exit_code < 0:
        return Cause.SIGNAL
    return _CAUSE_OF_STATUS[RankStatus(end.status)]


def first_bad(ends: Sequence[RankEnding | None]) -> RankEnding | None:
    """The best explanation among the ranks that already ended badly (None if none has)."""
    bad = [e for e in ends if e is not None and e.status != RankStatus.OK]
    return min(bad, key=cause) if bad else None


def root_cause(ends: Sequence[RankEnding | None], ended: Sequence[int]) -> tuple[int, Status, str] | None:
    """(rank index, trial status, reason) of the rank whose end explains the trial; None when every rank
    ended ok. `ended` lists rank indices in the order they ended: between equal causes the first to end
    is the likelier culprit. A rank stopped by the driver, or with no outcome, makes the trial 'failed'.

    >>> from types import SimpleNamespace as End
    >>> oom = End(status="oom", reason="private memory 950 MiB exceeded", exit_code=-9, log_tail="")
    >>> echo = End(status="failed", reason="exited with status 1", exit_code=1, log_tail="Broken pipe")
    >>> root_cause([echo, oom], ended=[0, 1])
    (1, <Status.OOM: 'oom'>, 'rank 1: private memory 950 MiB exceeded')
    """
    bad = [(i, e) for i, e in enumerate(ends) if e is None or e.status != RankStatus.OK]
    if not bad:
        return None
    order = {rank: position for position, rank in enumerate(ended)}
    index, worst = min(bad, key=lambda ie: (cause(ie[1]), order.get(ie[0], len(order))))
    status = Status.FAILED if worst is None else RankStatus(worst.status).trial_status
    return index, status, f"rank {index}: {worst.reason if worst else 'no outcome'}"


def describe_exit(code: int | None) -> str:
    """A rank's exit status in words.

    >>> describe_exit(-9)
    "the rank was killed by SIGKILL (not sent by orch: the kernel's out-of-memory killer is the usual sender)"
    >>> describe_exit(1)
    'the rank exited with status 1'
    """
    if code is None:
        return "the rank did not exit"
    if code < 0:
        name = signal.Signals(-code).name
        hint = (" (not sent by orch: the kernel's out-of-memory killer is the usual sender)"
                if -code == signal.SIGKILL else "")
        return f"the rank was killed by {name}{hint}"
    if code == EXIT_ORPHANED:
        return "the rank exited because its launcher went away"
    return f"the rank exited with status {code}"


def classify_exit(code: int | None, *, result_written: bool, reported_done: bool,
                  log_end: str) -> tuple[RankStatus, str | None]:
    """Status and reason of a rank that ended by itself (not stopped by its watchdog). The result on
    disk is kept exactly when the status is ok.

    >>> classify_exit(0, result_written=True, reported_done=True, log_end="")
    (<RankStatus.OK: 'ok'>, None)
    >>> classify_exit(-6, result_written=True, reported_done=True, log_end="")[1]
    'result kept: the rank was killed by SIGABRT after reporting it'
    >>> classify_exit(1, result_written=False, reported_done=False, log_end="[gloo] Timed out waiting 60000ms")
    (<RankStatus.TIMEOUT: 'timeout'>, 'a collective timed out in torch.distributed (the rank exited with status 1)')
    """
    if result_written and code != 0 and reported_done:
        # The measurement is complete and on disk; the process died in teardown (gloo's threads can abort
        # at interpreter exit). Keep the result, say what happened.
        return RankStatus.OK, f"result kept: {describe_exit(code)} after reporting it"
    if result_written and code == 0:
        return RankStatus.OK, None
    reason = describe_exit(code)
    if COLLECTIVE_TIMEOUT in log_end[-LOG_END_CHARS:]:
        # torch.distributed gave up on a collective before our watchdog did: still a hang.
        return RankStatus.TIMEOUT, f"a collective timed out in torch.distributed ({reason})"
    return RankStatus.FAILED, reason
