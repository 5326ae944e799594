"""Typed records keep the bytes of trials.jsonl: every committed line, read into a `Record` and written back,
is the same line, old layouts (keys added later absent, another key order) and unknown keys included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.core.measured import records as rec

REPO = Path(__file__).resolve().parents[2]
TRIALS_FILES = sorted([*(REPO / "results").rglob("trials.jsonl"), *(REPO / "tests" / "data").rglob("trials.jsonl")])


def _record_lines(path: Path) -> list[str]:
    """The lines of a trials file that are JSON (the golden sweep's torn line is not)."""
    lines = []
    for line in path.read_text().splitlines():
        try:
            json.loads(line)
        except json.JSONDecodeError:
            continue
        lines.append(line)
    return lines


def test_the_committed_trials_files_are_found():
    assert len(TRIALS_FILES) >= 6


@pytest.mark.parametrize("path", TRIALS_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_record_reads_and_writes_back_byte_for_byte(path):
    lines = _record_lines(path)
    assert lines
    for line in lines:
        records, errors = rec.parse_lines([line])
        assert errors == [] and len(records) == 1
        assert rec.dumps(records.items[0]) == line


def test_absent_keys_stay_absent_and_unknown_keys_are_kept():
    line = ('{"schema":1,"kind":"peak","key":"peak-t2-fp32","status":"ok","ranks":1,"threads_per_rank":2,'
            '"peak":{"precision":"fp32","gflops":100.5,"gemm_size":4096,"from_the_future":[1,2]},"new_key":{"a":1}}')
    (record,), errors = rec.parse_lines([line])
    assert errors == [] and record.peak is not None
    assert record.peak.concurrent is False and not record.peak.has("concurrent")
    assert record.peak.json_extra == {"from_the_future": [1, 2]}
    assert rec.dumps(record) == line


def test_a_record_built_in_code_has_every_key_in_order():
    record = rec.Record(kind=rec.Kind.THROUGHPUT, key="r1-t1-b8", status=rec.Status.OK)
    assert tuple(record.to_json()) == rec.RECORD_KEYS


def test_a_line_that_is_not_a_record_is_skipped_with_a_message():
    records, errors = rec.parse_lines(['{"schema":1,"key":"x","kind":"throughput","status":"unknown"}',
                                       '{"schema":1,"key":"y","kind":"peak","status":"ok"}'])
    assert [r.key for r in records] == ["y"] and errors == ["line 1: not an orch record of schema 1; skipped"]


def test_an_adaptive_sweeps_choice_is_written_after_every_other_key_and_read_back():
    record = rec.Record(kind=rec.Kind.THROUGHPUT, key="r1-t1-b8", status=rec.Status.OK,
                        choice=rec.ChoiceSection(reason="cold start: a 1-rank cell", estimated_core_s=12.5))
    line = rec.dumps(record)
    assert tuple(json.loads(line)) == (*rec.RECORD_KEYS, "choice")
    (back,), errors = rec.parse_lines([line])
    assert errors == [] and back.choice is not None and back.choice.reason == "cold start: a 1-rank cell"
    assert back.choice.estimated_core_s == 12.5 and rec.dumps(back) == line
