"""Where a sweep is logged besides its results folder: MLflow (`mlflow_tracker`) and TensorBoard
(`tensorboard_tracker`), from the driver as it records each trial, never from the ranks, and after the fact
(`orch report --mlflow / --tensorboard`, which also catches up on what a tracker missed).

A tracker is three calls:

- `open(results)`: the results folder as it is when the sweep starts (its spec, topology, environment and the
  records already there): the tracker logs the sweep and catches up on every record it lacks;
- `record(record)`: one record, as the driver appends it to trials.jsonl (run.driver.sweep's `on_record` hook);
- `finish(results, report_files, end)`: the sweep (or the report) ended; `report_files` are the files the
  report wrote, the only ones uploaded (never a link, never the rest of their folder).

`Tracking` makes the calls on a thread of its own, in order: the driver's `record` only queues the record, so
a slow or hostile tracking server never holds the sweep's main loop, and `finish` waits for what is queued at
most `$ORCH_TRACKING_WAIT_S` (constants.py), then goes on saying what was not logged.

A tracker is idempotent over a folder: what it logged is found again (MLflow: runs tagged with the folder and
the trial key; TensorBoard: a manifest beside the event files), so a resumed sweep or a later `orch report
--mlflow` adds what is missing and duplicates nothing. Logging never changes results and never fails a sweep:
`Tracking` guards every call, and a tracker that fails is said once (a warning naming the command that catches
up later) and left out for the rest of the run.

Where logs go is the user's choice alone (docs/trust.md): a sweep's own sweep file or the options; after the
fact, the options, then $MLFLOW_TRACKING_URI. A results folder's stored URI is never used: it is data someone
else may have written (`after_the_fact`).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from orchestrator.constants import DEFAULT_TRACKING_WAIT_S, TRACKING_WAIT_ENV_VAR
from orchestrator.core.measured.records import Record, dumps
from orchestrator.core.planning.spec import TrackingSpec
from orchestrator.errors import InputError
from orchestrator.io.store import Results

log = logging.getLogger(__name__)

INSTALL_HINT = ".venv/bin/pip install -e '.[tracking]' in orch's folder (bash scripts/setup.sh --dev installs it)"
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


class TrackingUnavailable(InputError):
    """Tracking was asked for but its package is not installed: bad input (exit 2), said before anything runs."""


class Tracker(Protocol):
    label: str         # what messages call it: "MLflow", "TensorBoard" (its id, "mlflow", is its TrackerKind's)

    def open(self, results: Results) -> None: ...

    def record(self, record: Record) -> None: ...

    def finish(self, results: Results, report_files: Sequence[Path], end: End) -> None: ...

    def catch_up_option(self) -> str:
        """The `orch report` option that logs later what this tracker missed, e.g. '--mlflow-uri URI'."""
        ...


# --- trackers found by name, as workloads are ---------------------------------------------------------------

# name -> "module:attribute" of its `TrackerKind`: orch's own. A new one is a module and a line here, or, from a
# package of its own, an entry point of the ENTRY_POINT_GROUP group (`toy = "my_pkg.toy:TRACKER"`).
TRACKERS: dict[str, str] = {
    "mlflow": "orchestrator.io.tracking.mlflow_tracker:TRACKER",
    "tensorboard": "orchestrator.io.tracking.tensorboard_tracker:TRACKER",
}
ENTRY_POINT_GROUP = "orch.trackers"


@dataclass(frozen=True, slots=True)
class TrackerPlace:
    """Where a tracker logs: the results folder, the sweep's name, the experiment the sweep file names (None:
    the tracker's default) and whether the sweep runs now (`live`) or is logged after the fact."""

    folder: Path
    sweep_name: str
    experiment: str | None
    live: bool


@dataclass(frozen=True, slots=True)
class TrackerKind:
    """A tracker as orch finds it by its id (`mlflow`, `tensorboard`, an entry point's name): how to make one, and
    what it needs.

    `make(setting, place)`: the tracker (`setting`: what follows `NAME=` in `--track NAME=SETTING`, the MLflow
    URI for `--mlflow-uri URI`; "" when none is given); `package`: a module that must import for it to run, checked
    before anything runs (None: nothing beyond orch); `option`: the option that asks for it, for messages;
    `install`: how to get its package."""

    id: str
    make: Callable[[str, TrackerPlace], Tracker]
    package: str | None = None
    option: str = ""
    install: str = ""


def find_tracker(name: str) -> TrackerKind:
    """The tracker registered under `name`: orch's own (TRACKERS), else an entry point of ENTRY_POINT_GROUP.
    TrackingUnavailable (bad input) says where it looked when nothing is found or what is found does not load."""
    from importlib.metadata import entry_points

    ref = TRACKERS.get(name)
    found: object
    if ref is None:
        points = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
        if name not in points:
            raise TrackingUnavailable(f"no tracker named {name!r}: orch's are {', '.join(sorted(TRACKERS))}; the entry "
                                      f"points of group {ENTRY_POINT_GROUP} are: {', '.join(sorted(points)) or 'none'}")
        ref = points[name].value
    module, _, attribute = ref.partition(":")
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as err:
        raise TrackingUnavailable(f"tracker {name!r} ({ref}) does not load: {type(err).__name__}: {err}") from None
    if not isinstance(found, TrackerKind):
        raise TrackingUnavailable(f"tracker {name!r} ({ref}) is a {type(found).__name__}, not an orch TrackerKind")
    if found.id != name:   # one id per tracker: the one it is asked for by, and the one its settings are kept under
        raise TrackingUnavailable(f"tracker {name!r} ({ref}) gives its id as {found.id!r}")
    return found


def parse_tracker(text: str) -> tuple[str, str]:
    """(name, setting) of `NAME` or `NAME=SETTING` (`--track`).

    >>> parse_tracker("mlflow=http://h:5000"), parse_tracker("toy")
    (('mlflow', 'http://h:5000'), ('toy', ''))
    """
    name, _, setting = text.partition("=")
    if not name.strip():
        raise TrackingUnavailable(f"--track {text!r}: expected NAME or NAME=SETTING")
    return name.strip(), setting


@dataclass(frozen=True, slots=True)
class TrackingChoice:
    """What a sweep or a report logs to, from the sweep file's `tracking` section and the options: each tracker
    by name with its setting (MLflow's: the tracking URI, "" for MLflow's default), in order."""

    settings: tuple[tuple[str, str], ...] = ()
    experiment: str | None = None      # None: $MLFLOW_EXPERIMENT_NAME, else the sweep's name

    @property
    def wanted(self) -> bool:
        return bool(self.settings)

    def setting(self, name: str) -> str | None:
        """The tracker's setting, or None when it is not chosen."""
        return next((s for n, s in self.settings if n == name), None)


def choose(section: TrackingSpec | None, *, mlflow: str | bool | None = None,
           tensorboard: bool | None = None, others: Sequence[str] = ()) -> TrackingChoice:
    """The tracking a run does: the section's, overridden by the options. `mlflow`: None keeps the section's
    URI, True turns MLflow on (with the section's URI, else MLflow's default), False turns it off, a string is
    the URI. `tensorboard`: None keeps the section's choice. `others`: `NAME[=SETTING]` of trackers found by name
    (`--track`).

    >>> choose(TrackingSpec(mlflow="http://h:5000", experiment="e"))
    TrackingChoice(settings=(('mlflow', 'http://h:5000'),), experiment='e')
    >>> choose(None, mlflow=True, tensorboard=True, others=["toy=out.jsonl"]).settings
    (('mlflow', ''), ('tensorboard', ''), ('toy', 'out.jsonl'))
    >>> choose(TrackingSpec(mlflow="sqlite:///m.db"), mlflow="http://other:5000").setting("mlflow")
    'http://other:5000'
    """
    spec = section or TrackingSpec()
    uri: str | None = spec.mlflow
    if mlflow is False:
        uri = None
    elif mlflow is True:
        uri = spec.mlflow or ""
    elif isinstance(mlflow, str):
        uri = mlflow
    settings = [("mlflow", uri)] if uri is not None else []
    if spec.tensorboard if tensorboard is None else tensorboard:
        settings.append(("tensorboard", ""))
    chosen = dict(settings)
    for name, setting in map(parse_tracker, others):   # an option names a tracker once; a later one wins
        chosen[name] = setting
    return TrackingChoice(tuple(chosen.items()), spec.experiment)


def after_the_fact(section: TrackingSpec | None, *, mlflow: str | bool | None, tensorboard: bool,
                   others: Sequence[str] = ()) -> tuple[TrackingChoice, str | None]:
    """What `orch report --mlflow / --tensorboard / --track` logs to, and a hint to print: the URI comes from
    the user alone (the option, else $MLFLOW_TRACKING_URI, else MLflow's default), never from the folder's stored
    `tracking.mlflow`, which someone else may have written to receive the user's MLflow credentials. The
    folder's experiment is kept: a name inside the server the user chose, which the sweep's own runs are in.
    The hint names the folder's URI when a bare --mlflow did not use it.

    >>> after_the_fact(TrackingSpec(mlflow="http://evil:5000", experiment="e"), mlflow=True, tensorboard=False)[0]
    TrackingChoice(settings=(('mlflow', ''),), experiment='e')
    """
    stored = section or TrackingSpec()
    choice = choose(TrackingSpec(experiment=stored.experiment), mlflow=mlflow or False, tensorboard=tensorboard,
                    others=others)
    hint = None
    if mlflow is True and stored.mlflow:
        hint = (f"the folder's spec.json names the tracking URI {stored.mlflow[:200]!r}; orch logs only where you "
                "say (--mlflow-uri URI, else $MLFLOW_TRACKING_URI), never where a results folder says: give "
                "--mlflow-uri with that URI if it is yours")
    return choice, hint


def require(choice: TrackingChoice) -> None:
    """TrackingUnavailable when a chosen tracker is not found or its package does not import, before anything
    runs."""
    for name, _ in choice.settings:
        kind = find_tracker(name)
        if kind.package is None:
            continue
        try:
            importlib.import_module(kind.package)
        except ImportError as err:
            raise TrackingUnavailable(f"{kind.option or '--track ' + name} (or the sweep file's tracking section) "
                                      f"needs the {kind.package} package, which does not import here ({err})"
                                      + (f": {kind.install}" if kind.install else "")) from None


def open_tracking(choice: TrackingChoice, folder: Path, sweep_name: str, *, live: bool) -> Tracking:
    """The trackers of `choice` for the results folder `folder` (not opened yet: `Tracking.open`); `live`: a
    sweep that runs now (its MLflow run is RUNNING until it ends), not a report after the fact."""
    require(choice)
    place = TrackerPlace(folder, sweep_name, choice.experiment, live)
    return Tracking([find_tracker(name).make(setting, place) for name, setting in choice.settings], folder)


def wait_s() -> float:
    """How long `Tracking.finish` waits for the trackers ($ORCH_TRACKING_WAIT_S, default constants.py's)."""
    try:
        value = float(os.environ.get(TRACKING_WAIT_ENV_VAR, DEFAULT_TRACKING_WAIT_S))
    except ValueError:
        value = float(DEFAULT_TRACKING_WAIT_S)
    return value if value > 0 else float(DEFAULT_TRACKING_WAIT_S)


class Tracking:
    """The trackers one sweep or report logs to, called on a thread of their own in the order the calls came:
    `open` and `record` return at once; `finish` waits at most `wait_s()` for everything queued. Every call is
    guarded: a tracker that raises is said once, with the command that catches up later, and is left out from
    then on; the caller never sees the error, and never waits on a server beyond the bound."""

    def __init__(self, trackers: Iterable[Tracker], folder: Path):
        self.trackers = list(trackers)
        self.folder = folder
        self.failed: list[str] = []   # one line per tracker that failed
        self._calls: queue.Queue[Callable[[Tracker], None] | None] = queue.Queue()   # None: the last item
        self._worker: threading.Thread | None = None

    @property
    def ok(self) -> bool:
        """No tracker failed."""
        return not self.failed

    def open(self, results: Results) -> None:
        self._submit(lambda tracker: tracker.open(results))

    def record(self, record: Record) -> None:
        """The driver's hook: one record as it is appended (queued: this returns at once)."""
        self._submit(lambda tracker: tracker.record(record))

    def finish(self, results: Results, report_files: Sequence[Path], end: End) -> None:
        """The last call; waits for the queue at most `wait_s()`, then says what was not logged."""
        files = tuple(report_files)
        self._submit(lambda tracker: tracker.finish(results, files, end))
        if self._worker is None:
            return
        self._calls.put(None)
        bound = wait_s()
        self._worker.join(bound)
        if self._worker.is_alive():
            names = ", ".join(t.label for t in self.trackers) or "a tracker"
            line = f"{names}: still not done after {bound:g} s (a slow or unanswering server)"
            self.failed.append(line)
            log.warning("%s; orch goes on without it (%s sets the wait). `orch report %s %s` logs what is missing "
                        "later.", line, TRACKING_WAIT_ENV_VAR, self.folder,
                        " ".join(t.catch_up_option() for t in self.trackers))
        self._worker = None

    def _submit(self, call: Callable[[Tracker], None]) -> None:
        if not self.trackers:
            return
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="orch-tracking", daemon=True)
            self._worker.start()
        self._calls.put(call)

    def _work(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            for tracker in list(self.trackers):
                self._guarded(tracker, call)

    def _guarded(self, tracker: Tracker, call: Callable[[Tracker], None]) -> None:
        try:
            call(tracker)
        except Exception as err:   # logging must never fail a sweep: any error at all stops this tracker only
            self.trackers.remove(tracker)
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            line = f"{tracker.label}: {reason}"
            self.failed.append(line)
            log.warning("%s. Nothing more is logged there in this run; `orch report %s %s` logs what is missing "
                        "later.", line, self.folder, tracker.catch_up_option())
            log.debug("%s failed", tracker.label, exc_info=True)
