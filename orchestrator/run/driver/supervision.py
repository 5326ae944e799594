"""Supervise a trial's started ranks to their end, wherever they run: the first rank to end badly stops the
others (after a grace period, so they can report their own end first), and the trial's status names the
root cause (core.measured.rank_end), not the echo of it in the other ranks.

The ranks are reached through a `RankHost`: the node launcher actors over Ray in a sweep (run.driver.trial.RayRanks),
or `LocalRanks`, rank launchers called in this process (no Ray), which the tests use, so that they drive
this very supervision.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from orchestrator.core.measured.rank_end import RankStatus, first_bad, root_cause
from orchestrator.core.measured.records import Status
from orchestrator.run.driver.launcher import Outcome, RankLauncher, RankLimits
from orchestrator.run.job import RankProgress

GRACE_AFTER_FAILURE_S = 2.0   # let the other ranks report their own end before stopping them
WAIT_POLL_S = 0.5             # how long the supervision loop waits for a rank's end before its other work
# How often the driver asks rank 0 for its phase, for the progress display. Each ask is an actor call on
# the machine being measured: at 0.5 s it cost ~3% of a 2-thread rank's throughput on a 2-core machine
# (benchmarks/bench_orch_vs_direct.py); at 2 s it is lost in the noise.
STATUS_POLL_S = 2.0


@dataclass(slots=True)
class TrialRun:
    status: Status                   # the trial's, for its record
    reason: str | None
    outcomes: list[Outcome | None]
    ready_s: float | None = None     # reservation → every rank built its model
    wall_s: float = 0.0
    failing_rank: int | None = None
    node_ids: list[str] = field(default_factory=list)
    interrupted: bool = False        # stopped by the driver (Ctrl-C): not a result, the trial is run again


@dataclass(frozen=True, slots=True)
class Limits:
    """What each rank's launcher watches: its memory budget, its start-up, progress, and the trial's wall-clock
    deadline."""

    budgets_mib: Sequence[float]   # per rank
    step_timeout_s: float
    deadline: float                # a time.time() instant
    startup_timeout_s: float = 600.0

    def of_rank(self, index: int) -> RankLimits:
        return RankLimits(budget_mib=self.budgets_mib[index], startup_timeout_s=self.startup_timeout_s,
                          step_timeout_s=self.step_timeout_s, deadline=self.deadline)


# A pending end of a rank: whatever its host waits on (a Ray object reference, a future), hashable.
End = TypeVar("End", bound=Hashable)


class RankHost(Protocol[End]):
    """A trial's started ranks, by index, and how the driver waits on them (each rank's pending `End`)."""

    def supervise(self, index: int, limits: RankLimits) -> End: ...
    def wait(self, pending: list[End], timeout_s: float) -> tuple[list[End], list[End]]: ...
    def outcome(self, end: End) -> Outcome: ...
    def stop(self, index: int, reason: str) -> None: ...
    def progress(self, index: int) -> RankProgress | None: ...


class LocalRanks:
    """Rank launchers in this process, each supervised in a thread as the launcher actors' threads do."""

    def __init__(self, launchers: list[RankLauncher]):
        self.launchers = launchers
        self._threads = ThreadPoolExecutor(max_workers=max(1, len(launchers)), thread_name_prefix="rank")

    def supervise(self, index: int, limits: RankLimits) -> Future[Outcome]:
        return self._threads.submit(self.launchers[index].supervise, limits)

    def wait(self, pending: list[Future[Outcome]],
             timeout_s: float) -> tuple[list[Future[Outcome]], list[Future[Outcome]]]:
        done, _ = wait(pending, timeout=timeout_s, return_when=FIRST_COMPLETED)
        return [f for f in pending if f in done], [f for f in pending if f not in done]

    def outcome(self, end: Future[Outcome]) -> Outcome:
        outcome: Outcome = end.result()
        return outcome

    def stop(self, index: int, reason: str) -> None:
        self.launchers[index].stop(reason)

    def progress(self, index: int) -> RankProgress | None:
        return self.launchers[index].progress()


def supervise(host: RankHost[End], limits: Limits, started: float, *, stop: threading.Event,
              on_progress: Callable[[RankProgress | None], None] | None = None,
              node_ids: list[str] | None = None) -> TrialRun:
    """Wait for every rank's end; once one ends badly, give the others a grace period to report their
    own end, then stop them. `stop`, once set, stops every rank: the run is marked interrupted. The trial's
    status and reason come from the root cause (core.measured.rank_end)."""
    ends = {host.supervise(i, limits.of_rank(i)): i for i in range(len(limits.budgets_mib))}
    outcomes: list[Outcome | None] = [None] * len(ends)
    ended: list[int] = []   # rank indices in the order they ended: the first to fail is the likeliest cause
    pending = list(ends)
    failed_at, polled_at, interrupted = None, 0.0, False
    while pending:
        if stop.is_set() and not interrupted:
            interrupted = True
            _stop(host, [ends[end] for end in pending], "interrupted by the user (Ctrl-C)")
        done, pending = host.wait(pending, WAIT_POLL_S)
        for end in done:
            i = ends[end]
            outcomes[i] = outcome = host.outcome(end)
            ended.append(i)
            if outcome.status != RankStatus.OK and failed_at is None:
                failed_at = time.monotonic()
        if failed_at is not None and pending and time.monotonic() - failed_at > GRACE_AFTER_FAILURE_S:
            bad = first_bad(outcomes)
            _stop(host, [ends[end] for end in pending],
                  f"stopped because another rank ended: {bad.reason if bad else None}")
            failed_at = float("inf")  # stop only once
        if on_progress is not None and pending and time.monotonic() - polled_at >= STATUS_POLL_S:
            polled_at = time.monotonic()
            on_progress(_progress_of(host))
    return _trial_run(outcomes, ended, started, node_ids or [], interrupted)


def _stop(host: RankHost[End], indices: list[int], reason: str) -> None:
    for i in indices:
        host.stop(i, reason)


def _progress_of(host: RankHost[End]) -> RankProgress | None:
    """Rank 0's progress; None when it cannot be asked (a display detail must never end the trial)."""
    try:
        return host.progress(0)
    except Exception:
        return None


def _trial_run(outcomes: list[Outcome | None], ended: list[int], started: float, node_ids: list[str],
               interrupted: bool) -> TrialRun:
    wall = time.time() - started
    if interrupted:
        return TrialRun(Status.FAILED, "interrupted", outcomes, None, wall, None, node_ids, interrupted=True)
    ready = [o.result.ready_at for o in outcomes if o and o.result and o.result.ready_at]
    ready_s = max(ready) - started if len(ready) == len(outcomes) else None
    cause = root_cause(outcomes, ended)
    if cause is None:
        notes = "; ".join(f"rank {i}: {o.reason}" for i, o in enumerate(outcomes) if o and o.reason)
        return TrialRun(Status.OK, notes or None, outcomes, ready_s, wall, None, node_ids)
    index, status, reason = cause
    return TrialRun(status, reason, outcomes, ready_s, wall, index, node_ids)
