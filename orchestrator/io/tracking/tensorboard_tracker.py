"""A sweep in TensorBoard: one run per trial record, `RESULTS/tensorboard/<trial key>/`, with the trial's layout
and settings as hyperparameters (TensorBoard's HParams plugin), so that its table and parallel-coordinates views
show layouts against throughput. `tensorboard --logdir RESULTS/tensorboard` shows one sweep,
`tensorboard --logdir results` every sweep.

- The log folder's own event file holds the experiment: every hyperparameter with the values the records
  took (`orchestrator.core.measured.record_fields`' `param` fields and the record's kind) and every metric.
- A trial's event file holds its hyperparameters (the session's start, its trial id the key), its figures as
  scalars at step 0 (`metric` fields: samples_per_s, step_ms, cv, peak_private_mib, ok, ...), a convergence run's
  metric per evaluation at the global training step (with `epoch` at the same steps), an all-reduce
  calibration's time per message size (the step is the size in bytes), and the session's end with its status.
  Infeasible grid points never ran: they are not runs.

Event files are only appended to, so a trial whose record changed (it ran again) has its folder rewritten.
What was written is kept in `orch-logged.json` ({trial key: fingerprint of the record}), so a resumed sweep or
`orch report --tensorboard` writes only what is missing. Written with TensorBoard's own writer and protocol
buffers: no TensorFlow, no torch.

The log folder may be in someone else's results folder: it is used only when it is a folder (not a link), a
run folder is named by a trial key (a plain name: core.measured.records.is_key) and written under the log folder only,
and a run folder is removed only when the manifest lists it (orch wrote it) and it is a folder, not a link.
Anything else there is left alone, and the tracker says why it stopped.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from orchestrator.core.measured import record_fields as fields
from orchestrator.core.measured.records import Record, Status, is_key
from orchestrator.errors import RunFailed
from orchestrator.io.files import MAX_JSON_BYTES, UnreadableFile, read_json_input, write_atomic
from orchestrator.io.store import Results
from orchestrator.io.tracking import INSTALL_HINT, TENSORBOARD_DIR, End, TrackerKind, TrackerPlace, fingerprint

log = logging.getLogger(__name__)

MANIFEST = "orch-logged.json"
EXPERIMENT_EVENTS = "events.out.tfevents"   # the prefix of the experiment's event files in the log folder
HParamValue = bool | int | float | str       # what TensorBoard takes as a hyperparameter's value


def hyperparameters(record: Record) -> dict[str, HParamValue]:
    """A trial's hyperparameters: its `param` fields and its kind (TensorBoard takes bool, number or text)."""
    params = fields.params(record)   # layout and settings: numbers, flags and names (a time is shown as text)
    return {"kind": str(record.kind),
            **{name: v if isinstance(v, bool | int | float | str) else str(v) for name, v in params.items()}}


def _summary_event(summary: object, wall_time: float, step: int = 0) -> object:   # protobufs, passed through
    from tensorboard.compat.proto.event_pb2 import Event

    return Event(wall_time=wall_time, step=step, summary=summary)


def _scalar(tag: str, value: float, wall_time: float, step: int = 0) -> object:
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb

    return _summary_event(scalar_pb(tag, value), wall_time, step)


def _session_end(record: Record, wall_time: float) -> object:
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    status = api_pb2.STATUS_SUCCESS if record.ok else api_pb2.STATUS_FAILURE
    data = plugin_data_pb2.HParamsPluginData(session_end_info=plugin_data_pb2.SessionEndInfo(
        status=status, end_time_secs=wall_time))
    summary = Summary()
    summary.value.add(tag=metadata.SESSION_END_INFO_TAG, metadata=metadata.create_summary_metadata(data),
                      tensor=metadata.NULL_TENSOR)
    return _summary_event(summary, wall_time)


class NotOurs(RunFailed):
    """A path in the log folder that orch did not make: left alone, and the tracker stops saying so."""


def _kind(path: Path) -> int | None:
    """The file type of `path` itself (a link is a link), None when nothing is there."""
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def write_trial(folder: Path, record: Record, *, ours: bool = False) -> None:
    """`record` as one TensorBoard run in `folder`; a folder already there is replaced only when `ours` (the
    manifest lists it) and it is a folder, not a link; anything else there raises NotOurs."""
    from tensorboard.plugins.hparams.summary_v2 import hparams_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    there = _kind(folder)
    if there is not None:
        if not (ours and there == stat.S_IFDIR):
            raise NotOurs(f"{folder} is there but is not a run folder orch wrote ("
                          + ("a link" if there == stat.S_IFLNK else "not in " + MANIFEST) + "): left alone; "
                          "move it away to log this trial")
        shutil.rmtree(folder)
    when = fields.parse_time(record.started_at)
    start = when.timestamp() if when is not None else time.time()
    end = start + (record.wall_s or 0.0)
    writer = EventFileWriter(str(folder))
    try:
        writer.add_event(_summary_event(hparams_pb(hyperparameters(record), trial_id=record.key,
                                                   start_time_secs=start), start))
        for name, value in fields.metrics(record).items():
            writer.add_event(_scalar(name, value, end))
        for s in fields.series(record):
            for step, x, value in zip(s.steps, s.x, s.values):
                writer.add_event(_scalar(s.name, value, end, step))
                writer.add_event(_scalar(s.x_name, x, end, step))
        writer.add_event(_session_end(record, end))
    finally:
        writer.close()


def write_experiment(logdir: Path, records: Iterable[Record]) -> None:
    """The experiment summary in the log folder's own event file (replacing an earlier one): each hyperparameter
    with the values the records took, and every metric a record has."""
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    records = list(records)
    metric_names: dict[str, None] = {f.name: None for f in fields.FIELDS if f.role == fields.Role.METRIC}
    for record in records:
        metric_names.update({name: None for s in fields.series(record) for name in (s.name, s.x_name)})
    hparams = [hp.HParam(name, hp.Discrete(sorted(found))) for name, found in domains(records).items()]
    for old in logdir.glob(f"{EXPERIMENT_EVENTS}*"):
        old.unlink()
    writer = EventFileWriter(str(logdir))
    try:
        now = time.time()
        writer.add_event(_summary_event(hp.hparams_config_pb(hparams, [hp.Metric(m) for m in metric_names], now), now))
    finally:
        writer.close()


def domains(records: Iterable[Record]) -> dict[str, set[HParamValue]]:
    """Each hyperparameter's values over `records`."""
    out: dict[str, set[HParamValue]] = {}
    for record in records:
        for name, value in hyperparameters(record).items():
            out.setdefault(name, set()).add(value)
    return out


class TensorBoardTracker:
    label = "TensorBoard"

    def __init__(self, logdir: Path):
        self.logdir = logdir
        self.written: dict[str, str] = {}      # trial key -> fingerprint of the record written
        self.records: dict[str, Record] = {}   # what the experiment summary covers

    def catch_up_option(self) -> str:
        return "--tensorboard"

    def open(self, results: Results) -> None:
        if _kind(self.logdir) not in (None, stat.S_IFDIR):
            raise NotOurs(f"{self.logdir} is not a folder (a link or a file): TensorBoard logs only into a folder "
                          "of the results folder's own")
        self.logdir.mkdir(exist_ok=True)
        self.written = _manifest(self.logdir / MANIFEST)
        for record in results.records:
            self._write(record, save=False)
        self._save()
        write_experiment(self.logdir, list(self.records.values()))
        log.info("TensorBoard: event files in %s", self.logdir)

    def record(self, record: Record) -> None:
        before = domains(self.records.values())
        self._write(record)
        if domains(self.records.values()) != before:   # a new value of a hyperparameter: the experiment must list it
            write_experiment(self.logdir, list(self.records.values()))

    def finish(self, results: Results, report_files: Sequence[Path], end: End) -> None:
        for record in results.records:
            self._write(record, save=False)
        self._save()
        write_experiment(self.logdir, list(self.records.values()))

    def _write(self, record: Record, save: bool = True) -> None:
        if record.status == Status.INFEASIBLE:
            return
        self.records[record.key] = record
        stamp = fingerprint(record)
        if not is_key(record.key):   # records.parse_lines skips such records: a path is never a run's name
            raise NotOurs(f"trial key {record.key[:40]!r} is not a plain name: no run folder is named after it")
        if self.written.get(record.key) == stamp and _kind(self.logdir / record.key) == stat.S_IFDIR:
            return
        write_trial(self.logdir / record.key, record, ours=record.key in self.written)
        self.written[record.key] = stamp
        if save:
            self._save()

    def _save(self) -> None:
        write_atomic(self.logdir / MANIFEST, json.dumps(self.written, indent=1, sort_keys=True) + "\n")


def _manifest(path: Path) -> dict[str, str]:
    """The run folders orch wrote ({trial key: fingerprint}), read as any input: bounded, a JSON object whose
    keys are trial keys; anything else is an empty manifest (nothing there is known to be orch's)."""
    if _kind(path) is None:
        return {}
    try:
        data = read_json_input(path, MAX_JSON_BYTES) if _kind(path) == stat.S_IFREG else None
    except UnreadableFile:
        data = None
    if not isinstance(data, dict):
        log.warning("TensorBoard: %s is not a manifest orch wrote; run folders there are left alone", path)
        return {}
    return {k: v for k, v in data.items() if is_key(k) and isinstance(v, str)}


def _make(setting: str, place: TrackerPlace) -> TensorBoardTracker:
    return TensorBoardTracker(place.folder / TENSORBOARD_DIR)


# Registered in orchestrator.io.tracking.TRACKERS: `--tensorboard` (no setting: RESULTS/tensorboard).
TRACKER = TrackerKind("tensorboard", _make, package="tensorboard", option="--tensorboard", install=INSTALL_HINT)
