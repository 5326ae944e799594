"""The record writer keeps its bytes: a new trial's records, built by run.recording from what its ranks reported
and appended by the store, are the lines orch wrote before records were typed (tests/data/record-writer, written
by that orch from the same runs)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from record_runs import records

from orchestrator.core import records as rec
from orchestrator.io.store import TRIALS_FILE, append_record

EXPECTED = Path(__file__).parent.parent / "data" / "record-writer" / TRIALS_FILE


def test_new_records_are_written_as_before(tmp_path):
    for record in records():
        append_record(tmp_path, record)
    assert (tmp_path / TRIALS_FILE).read_text() == EXPECTED.read_text()


def test_the_plans_precision_reason_is_appended_to_the_peak_section():
    peak = next(r for r in records() if r.kind == rec.PEAK)
    assert peak.peak is not None and '"precision_reason"' not in rec.dumps(peak)
    line = rec.dumps(replace(peak, peak=peak.peak.with_fields(precision_reason="native")))
    assert line.endswith('"concurrent":true,"precision_reason":"native"},"allreduce":null,"applied":null,'
                         '"log_tail":null}')

