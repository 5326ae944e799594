"""A sweep in TensorBoard: one run per trial record, `RESULTS/tensorboard/<trial key>/`, with the trial's layout
and settings as hyperparameters (TensorBoard's HParams plugin), so that its table and parallel-coordinates views
show layouts against throughput. `tensorboard --logdir RESULTS/tensorboard` shows one sweep,
`tensorboard --logdir results` every sweep.

- The log folder's own event file holds the experiment: every hyperparameter with the values the records
  took (`orchestrator.core.record_fields`' `param` fields and the record's kind) and every metric.
- A trial's event file holds its hyperparameters (the session's start, its trial id the key), its figures as
  scalars at step 0 (`metric` fields: samples_per_s, step_ms, cv, peak_private_mib, ok, ...), a convergence run's
  metric per evaluation at the global training step (with `epoch` at the same steps), an all-reduce
  calibration's time per message size (the step is the size in bytes), and the session's end with its status.
  Infeasible grid points never ran: they are not runs.

Event files are only appended to, so a trial whose record changed (it ran again) has its folder rewritten.
What was written is kept in `orch-logged.json` ({trial key: fingerprint of the record}), so a resumed sweep or
`orch report --tensorboard` writes only what is missing. Written with TensorBoard's own writer and protocol
buffers: no TensorFlow, no torch.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orchestrator.core import record_fields as fields
from orchestrator.core.records import Record, Status
from orchestrator.io.files import write_atomic
from orchestrator.io.store import Results
from orchestrator.io.tracking import End, fingerprint

log = logging.getLogger(__name__)

MANIFEST = "orch-logged.json"
EXPERIMENT_EVENTS = "events.out.tfevents"   # the prefix of the experiment's event files in the log folder


def hyperparameters(record: Record) -> dict[str, Any]:
    """A trial's hyperparameters: its `param` fields and its kind (TensorBoard takes bool, number or text)."""
    return {"kind": str(record.kind), **fields.params(record)}


def _summary_event(summary: Any, wall_time: float, step: int = 0) -> Any:
    from tensorboard.compat.proto.event_pb2 import Event

    return Event(wall_time=wall_time, step=step, summary=summary)


def _scalar(tag: str, value: float, wall_time: float, step: int = 0) -> Any:
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb

    return _summary_event(scalar_pb(tag, value), wall_time, step)


def _session_end(record: Record, wall_time: float) -> Any:
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    status = api_pb2.STATUS_SUCCESS if record.ok else api_pb2.STATUS_FAILURE
    data = plugin_data_pb2.HParamsPluginData(session_end_info=plugin_data_pb2.SessionEndInfo(
        status=status, end_time_secs=wall_time))
    summary = Summary()
    summary.value.add(tag=metadata.SESSION_END_INFO_TAG, metadata=metadata.create_summary_metadata(data),
                      tensor=metadata.NULL_TENSOR)
    return _summary_event(summary, wall_time)


def write_trial(folder: Path, record: Record) -> None:
    """`record` as one TensorBoard run in `folder` (replaced if it was there)."""
    from tensorboard.plugins.hparams.summary_v2 import hparams_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    shutil.rmtree(folder, ignore_errors=True)
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


def domains(records: Iterable[Record]) -> dict[str, set[Any]]:
    """Each hyperparameter's values over `records`."""
    out: dict[str, set[Any]] = {}
    for record in records:
        for name, value in hyperparameters(record).items():
            out.setdefault(name, set()).add(value)
    return out


class TensorBoardTracker:
    name = "TensorBoard"

    def __init__(self, logdir: Path):
        self.logdir = logdir
        self.written: dict[str, str] = {}      # trial key -> fingerprint of the record written
        self.records: dict[str, Record] = {}   # what the experiment summary covers

    def catch_up_option(self) -> str:
        return "--tensorboard"

    def open(self, results: Results) -> None:
        self.logdir.mkdir(parents=True, exist_ok=True)
        manifest = self.logdir / MANIFEST
        self.written = json.loads(manifest.read_text()) if manifest.is_file() else {}
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

    def finish(self, results: Results, report_dir: Path | None, end: End) -> None:
        for record in results.records:
            self._write(record, save=False)
        self._save()
        write_experiment(self.logdir, list(self.records.values()))

    def _write(self, record: Record, save: bool = True) -> None:
        if record.status == Status.INFEASIBLE:
            return
        self.records[record.key] = record
        stamp = fingerprint(record)
        if self.written.get(record.key) == stamp and (self.logdir / record.key).is_dir():
            return
        write_trial(self.logdir / record.key, record)
        self.written[record.key] = stamp
        if save:
            self._save()

    def _save(self) -> None:
        write_atomic(self.logdir / MANIFEST, json.dumps(self.written, indent=1, sort_keys=True) + "\n")
