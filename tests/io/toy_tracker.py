"""A tracker of the test's own, registered by name as a package would register one (tests/io/test_tracker_registry.py):
one module, the `Tracker` protocol as orch's trackers keep it, and the `TrackerKind` orch finds by name. It logs
into a real file: one JSON line per sweep, record and end."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from orchestrator.core.measured.records import Record
from orchestrator.io.store import Results
from orchestrator.io.tracking import End, TrackerKind, TrackerPlace, fingerprint

LOG_FILE = "toy-tracker.jsonl"   # in the results folder, unless the setting names another file


class ToyTracker:
    label = "toy"

    def __init__(self, path: Path, sweep_name: str):
        self.path, self.sweep_name = path, sweep_name

    def _write(self, line: dict[str, object]) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")

    def open(self, results: Results) -> None:
        self._write({"open": self.sweep_name, "records": len(results.records)})
        for record in results.records:
            self.record(record)

    def record(self, record: Record) -> None:
        self._write({"record": record.key, "status": record.status, "fingerprint": fingerprint(record)})

    def finish(self, results: Results, report_files: Sequence[Path], end: End) -> None:
        self._write({"end": str(end), "files": sorted(p.name for p in report_files)})

    def catch_up_option(self) -> str:
        return "--track toy"


def _make(setting: str, place: TrackerPlace) -> ToyTracker:
    return ToyTracker(Path(setting) if setting else place.folder / LOG_FILE, place.sweep_name)


TRACKER = TrackerKind("toy", _make, option="--track toy")
