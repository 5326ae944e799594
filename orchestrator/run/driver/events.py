"""What the driver says while a sweep runs, to whoever shows it: a trial started (and why an adaptive sweep chose
it), the phase its rank 0 last reported, a trial finished (its record; none when it was interrupted), and a note.
The driver calls these and knows nothing of a terminal: the CLI's live display and `--json`'s lines
(orchestrator.cli.progress) and the Python API's notices (orchestrator.app.sweep) implement them.

`describe` and `phase_words` are the driver's words for a record and a phase, which every presentation uses.
"""

from __future__ import annotations

from typing import Protocol

from orchestrator.core.measured import records as rec
from orchestrator.run.driver.kinds import kind_module
from orchestrator.run.job import Phase, RankProgress


class SweepEvents(Protocol):
    """A sweep's progress, as the driver reports it (from the main thread and from each trial's thread: an
    implementation is thread-safe)."""

    def started(self, key: str, label: str, chosen: str | None) -> None:
        """Trial `key` started (`label`: what it runs, where); `chosen`: why an adaptive sweep chose it."""

    def phase(self, key: str, progress: RankProgress | None) -> None:
        """What trial `key`'s rank 0 last reported (None: nothing yet, or it could not be asked)."""

    def finished(self, key: str, record: rec.Record | None, *, counts: bool) -> None:
        """Trial `key` ended with `record` (None: interrupted, not recorded; it runs again on resume). `counts`:
        it ran (an infeasible point is recorded without running, and is not one of the trials to run)."""

    def note(self, message: str) -> None:
        """Something the person running the sweep should read now (where a failed trial's logs are)."""


def describe(record: rec.Record) -> str:
    """One line of what a record says: '312.4 samples/s (cv 1.2%)', 'reached 0.9 at 2.25 epochs', ... (an ok
    record's line is its kind's: run.driver.kinds), or the first line of why it failed."""
    if record.status != rec.Status.OK:
        return record.reason.splitlines()[0][:90] if record.reason else ""
    line: str = kind_module(record.kind).describe(record)
    return line


def phase_words(progress: RankProgress | None) -> str:
    """What a rank's last report says it is doing: 'timing repeat 2/3', 'training epoch 1/10, last eval 0.812',
    'starting up (done: imports)', ...

    >>> phase_words(RankProgress(Phase.TIMING, step=3, repeat=2, of=3)), phase_words(None)
    ('timing repeat 2/3', 'starting')
    """
    if progress is None:
        return str(Phase.STARTING)
    if progress.phase == Phase.TIMING and not progress.of:   # a peak or a calibration: no repeats
        return f"timing, {progress.step} done"
    if progress.phase == Phase.TIMING:
        return f"timing repeat {progress.repeat}/{progress.of}"
    if progress.phase in (Phase.TRAINING, Phase.EVALUATING):
        metric = f", last eval {progress.metric:.3f}" if progress.metric is not None else ""
        return f"{progress.phase} epoch {progress.repeat}/{progress.of}{metric}"
    if progress.phase == Phase.BUILDING and progress.stage:
        return f"starting up (done: {progress.stage})"
    return str(progress.phase)
