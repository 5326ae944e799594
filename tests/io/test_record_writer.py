"""The record writer keeps its bytes: a new trial's records, built by run.driver.recording from what its ranks reported
and appended by the store, are the lines orch wrote before records were typed (tests/data/record-writer, written
by that orch from the same runs; their memory sections since rewritten as private memory and libraries). An
older record's memory section (unique memory) still reads and writes back unchanged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from record_runs import records

from orchestrator.core.measured import records as rec
from orchestrator.io.store import TRIALS_FILE, append_record

EXPECTED = Path(__file__).parent.parent / "data" / "record-writer" / TRIALS_FILE


def test_new_records_are_written_as_before(tmp_path):
    for record in records():
        append_record(tmp_path, record)
    assert (tmp_path / TRIALS_FILE).read_text() == EXPECTED.read_text()


def test_the_plans_precision_reason_is_appended_to_the_peak_section():
    peak = next(r for r in records() if r.kind == rec.Kind.PEAK)
    assert peak.peak is not None and '"precision_reason"' not in rec.dumps(peak)
    line = rec.dumps(replace(peak, peak=peak.peak.with_fields(precision_reason="native")))
    assert line.endswith('"concurrent":true,"precision_reason":"native"},"allreduce":null,"applied":null,'
                         '"log_tail":null}')



def test_an_older_records_unique_memory_still_reads_and_writes_back_unchanged():
    line = ('{"schema":1,"kind":"throughput","key":"r2-t1-b8","status":"ok","ranks":2,"threads_per_rank":1,'
            '"local_batch":8,"memory":{"peak_uss_mib":[512.5,513.5],"budget_mib":[7372.8,7372.8],"estimate_mib":100.0}}')
    [record], errors = rec.parse_lines([line])
    assert errors == [] and record.memory is not None
    assert record.memory.peak_mib == [512.5, 513.5] and record.memory.peak_private_mib is None
    assert rec.dumps(record) == line


def test_a_new_record_keeps_each_ranks_private_peak_and_libraries():
    ok = next(r for r in records() if r.kind == rec.Kind.THROUGHPUT and r.status == rec.Status.OK)
    assert ok.memory is not None and ok.memory.peak_private_mib == [512.5, 513.5] == ok.memory.peak_mib
    assert ok.memory.shared_mib == [0.0, 0.0] and ok.memory.library_mib == 0.0 and ok.memory.peak_uss_mib is None


def test_a_trials_record_says_how_its_flops_were_counted_and_an_older_one_reads_as_torchs_count():
    from record_runs import MEASURE, STARTED_AT, _ok, _throughput, plan

    from orchestrator.core.tabulate.throughput import flops_rule_of
    from orchestrator.run.driver import recording
    from orchestrator.run.driver.trial import TrialRun

    p_plan, topology = plan()
    ranks = [_ok(r, throughput={**_throughput(r), "train_flops_rule": "valid-taps"}) for r in (0, 1)]
    record = recording.throughput_record(p_plan.cell(2, 1, 8), TrialRun("ok", None, ranks, ready_s=1.5, wall_s=3.25),
                                         topology=topology, backend="gloo", measure=MEASURE, started_at=STARTED_AT)
    assert record.throughput.train_flops_rule == "valid-taps" and flops_rule_of(record) == "valid-taps"
    assert '"train_flops_per_sample":1500000.0,"train_flops_rule":"valid-taps"' in rec.dumps(record)
    # a record written before the field: read, written back unchanged, and read as torch's own count
    older = next(r for r in records() if r.kind == rec.Kind.THROUGHPUT and r.status == rec.Status.OK)
    assert '"train_flops_rule"' not in rec.dumps(older) and flops_rule_of(older) == "torch"
