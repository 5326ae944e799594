"""Where a sweep is logged besides its results folder: MLflow (`mlflow_tracker`) and TensorBoard
(`tensorboard_tracker`), from the driver as it records each trial, never from the ranks, and after the fact
(`orch report --mlflow / --tensorboard`, which also catches up on what a tracker missed).

A tracker is three calls, made in the driver's main thread:

- `open(results)`: the results folder as it is when the sweep starts (its spec, topology, environment and the
  records already there): the tracker logs the sweep and catches up on every record it lacks;
- `record(record)`: one record, as the driver appends it to trials.jsonl (run.sweep's `on_record` hook);
- `finish(results, report_dir, end)`: the sweep (or the report) ended; the report's files are in `report_dir`.

A tracker is idempotent over a folder: what it logged is found again (MLflow: runs tagged with the folder and
the trial key; TensorBoard: a manifest beside the event files), so a resumed sweep or a later `orch report
--mlflow` adds what is missing and duplicates nothing. Logging never changes results and never fails a sweep:
`Tracking` guards every call, and a tracker that fails is said once (a warning naming the command that catches
up later) and left out for the rest of the run.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from orchestrator.core.records import Record, dumps
from orchestrator.core.schema import load
from orchestrator.core.spec import TrackingSpec
from orchestrator.io.store import Results

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'orch[tracking]' (bash scripts/setup.sh --dev installs it)"
TENSORBOARD_DIR = "tensorboard"   # inside the results folder


class End(StrEnum):
    """How the run that logs ended: a sweep that finished or was interrupted, or `orch report` after the fact
    (which leaves the status of a sweep's run as the sweep left it)."""

    FINISHED = "finished"
    INTERRUPTED = "interrupted"
    REPORT = "report"


def fingerprint(record: Record) -> str:
    """Which record a tracker's run holds: a hash of its JSON (a trial run again is another record)."""
    return hashlib.sha1(dumps(record).encode()).hexdigest()[:20]


class TrackingUnavailable(ValueError):
    """Tracking was asked for but its package is not installed: bad input (exit 2), said before anything runs."""


class Tracker(Protocol):
    name: str          # "MLflow", "TensorBoard"

    def open(self, results: Results) -> None: ...

    def record(self, record: Record) -> None: ...

    def finish(self, results: Results, report_dir: Path | None, end: End) -> None: ...

    def catch_up_option(self) -> str:
        """The `orch report` option that logs later what this tracker missed, e.g. '--mlflow URI'."""
        ...


@dataclass(frozen=True, slots=True)
class TrackingChoice:
    """What a sweep or a report logs to, from the sweep file's `tracking` section and the options."""

    mlflow: str | None = None          # the tracking URI; "" for MLflow's default; None: no MLflow
    experiment: str | None = None      # None: $MLFLOW_EXPERIMENT_NAME, else the sweep's name
    tensorboard: bool = False

    @property
    def wanted(self) -> bool:
        return self.mlflow is not None or self.tensorboard


def choose(section: TrackingSpec | dict[str, Any] | None, *, mlflow: str | bool | None = None,
           tensorboard: bool | None = None) -> TrackingChoice:
    """The tracking a run does: the section's, overridden by the options. `mlflow`: None keeps the section's
    URI, True turns MLflow on (with the section's URI, else MLflow's default), False turns it off, a string is
    the URI. `tensorboard`: None keeps the section's choice. A section read back from spec.json (a dict) that
    no longer loads is no tracking: the folder's results do not depend on it.

    >>> choose(TrackingSpec(mlflow="http://h:5000", experiment="e"))
    TrackingChoice(mlflow='http://h:5000', experiment='e', tensorboard=False)
    >>> choose(None, mlflow=True, tensorboard=True)
    TrackingChoice(mlflow='', experiment=None, tensorboard=True)
    >>> choose({"mlflow": "sqlite:///m.db"}, mlflow="http://other:5000").mlflow
    'http://other:5000'
    """
    spec = (load(TrackingSpec, section)[0] if isinstance(section, dict) else section) or TrackingSpec()
    uri: str | None = spec.mlflow
    if mlflow is False:
        uri = None
    elif mlflow is True:
        uri = spec.mlflow or ""
    elif isinstance(mlflow, str):
        uri = mlflow
    return TrackingChoice(uri, spec.experiment, spec.tensorboard if tensorboard is None else tensorboard)


def require(choice: TrackingChoice) -> None:
    """TrackingUnavailable when a chosen tracker's package does not import, before anything runs."""
    for wanted, module, option in ((choice.mlflow is not None, "mlflow", "--mlflow"),
                                   (choice.tensorboard, "tensorboard", "--tensorboard")):
        if not wanted:
            continue
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise TrackingUnavailable(f"{option} (or the sweep file's tracking section) needs the {module} package, "
                                      f"which does not import here ({err}): {INSTALL_HINT}") from None


def open_tracking(choice: TrackingChoice, folder: Path, sweep_name: str, *, live: bool) -> Tracking:
    """The trackers of `choice` for the results folder `folder` (not opened yet: `Tracking.open`); `live`: a
    sweep that runs now (its MLflow run is RUNNING until it ends), not a report after the fact."""
    require(choice)
    trackers: list[Tracker] = []
    if choice.mlflow is not None:
        from orchestrator.io.tracking.mlflow_tracker import MlflowTracker

        trackers.append(MlflowTracker(choice.mlflow, choice.experiment, folder, sweep_name, live=live))
    if choice.tensorboard:
        from orchestrator.io.tracking.tensorboard_tracker import TensorBoardTracker

        trackers.append(TensorBoardTracker(folder / TENSORBOARD_DIR))
    return Tracking(trackers, folder)


class Tracking:
    """The trackers one sweep or report logs to. Every call is guarded: a tracker that raises is said once,
    with the command that catches up later, and is left out from then on; the caller never sees the error."""

    def __init__(self, trackers: Iterable[Tracker], folder: Path):
        self.trackers = list(trackers)
        self.folder = folder
        self.failed: list[str] = []   # one line per tracker that failed

    @property
    def ok(self) -> bool:
        """No tracker failed."""
        return not self.failed

    def open(self, results: Results) -> None:
        for tracker in list(self.trackers):
            self._guarded(tracker, tracker.open, results)

    def record(self, record: Record) -> None:
        """The driver's hook: one record as it is appended."""
        for tracker in list(self.trackers):
            self._guarded(tracker, tracker.record, record)

    def finish(self, results: Results, report_dir: Path | None, end: End) -> None:
        for tracker in list(self.trackers):
            self._guarded(tracker, tracker.finish, results, report_dir, end)

    def _guarded(self, tracker: Tracker, call: Any, *args: Any) -> None:
        try:
            call(*args)
        except Exception as err:   # logging must never fail a sweep: any error at all stops this tracker only
            self.trackers.remove(tracker)
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            line = f"{tracker.name}: {reason}"
            self.failed.append(line)
            log.warning("%s. Nothing more is logged there in this run; `orch report %s %s` logs what is missing "
                        "later.", line, self.folder, tracker.catch_up_option())
            log.debug("%s failed", tracker.name, exc_info=True)
