"""Tracking without Ray (orchestrator.io.tracking): TensorBoard event files written from a committed results
folder and read back with TensorBoard's own reader; an MLflow server that is down is said once and fails
nothing; a missing package is a clear message (exit 2) before anything runs; where a sweep is logged never
refuses a resume. The live sweep against a real MLflow server is tests/run/test_tracking_sweep.py."""

from __future__ import annotations

import doctest
import json
import logging
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest

import orch
from orchestrator.cli import main
from orchestrator.core.measured import record_fields
from orchestrator.io import tracking
from orchestrator.io.store import load_results, spec_changes
from orchestrator.io.sweepfile import load_sweep
from orchestrator.io.tracking import mlflow_tracker

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "results" / "example-classifier"
TINY = """name: tiny
workload: {name: classifier, params: {hidden: 16, train_samples: 256}}
grid: {ranks: [1], threads_per_rank: [1], local_batch: [16]}
"""


@pytest.mark.parametrize("module", [tracking, mlflow_tracker])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


@pytest.fixture
def example(tmp_path) -> Path:
    """A copy of the committed classifier results (never written into the repository's own folder)."""
    folder = tmp_path / "classifier"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("report"))
    return folder


def read_run(folder: Path):
    """A TensorBoard run read back with TensorBoard's own reader: (accumulator, {tag: [(step, value)]})."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(folder), size_guidance={"tensors": 0})   # 0: keep every event, no sampling
    acc.Reload()
    scalars = {tag: [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
               for tag in acc.Tags()["tensors"] if acc.SummaryMetadata(tag).plugin_data.plugin_name == "scalars"}
    return acc, scalars


def hparams_data(acc, tag: str):
    from tensorboard.plugins.hparams import plugin_data_pb2

    return plugin_data_pb2.HParamsPluginData.FromString(acc.PluginTagToContent("hparams")[tag])


def test_tensorboard_event_files_read_back_with_tensorboards_reader(example):
    from tensorboard.plugins.hparams import api_pb2, metadata

    assert orch.track(example, tensorboard=True)
    logdir = example / "tensorboard"
    records = [r for r in load_results(example).records if r.status != "infeasible"]
    assert sorted(p.name for p in logdir.iterdir() if p.is_dir()) == sorted(r.key for r in records)
    for record in records:
        acc, scalars = read_run(logdir / record.key)
        start = hparams_data(acc, metadata.SESSION_START_INFO_TAG).session_start_info
        assert start.group_name == record.key
        hparams = {k: v.number_value if v.HasField("number_value") else v.string_value for k, v in start.hparams.items()}
        assert hparams == {"kind": record.kind, **record_fields.params(record)}
        for name, value in record_fields.metrics(record).items():
            assert scalars[name] == [(0, pytest.approx(value, rel=1e-6))]   # float32 on disk
        end = hparams_data(acc, metadata.SESSION_END_INFO_TAG).session_end_info
        assert end.status == (api_pb2.STATUS_SUCCESS if record.ok else api_pb2.STATUS_FAILURE)
    run = next(r for r in records if r.kind == "convergence" and r.ok)
    _, scalars = read_run(logdir / run.key)
    c = run.convergence
    assert scalars["accuracy"] == [(round(e * c.steps_per_epoch), pytest.approx(v, rel=1e-6)) for e, v in c.curve]
    assert [x for _, x in scalars["epoch"]] == pytest.approx([e for e, _ in c.curve])
    acc, _ = read_run(logdir)   # the log folder's own events: the experiment (hyperparameters and metrics)
    experiment = hparams_data(acc, metadata.EXPERIMENT_TAG).experiment
    domains = {h.name: [v.number_value or v.string_value for v in h.domain_discrete.values] for h in experiment.hparam_infos}
    assert domains["ranks"] == [1, 2] and domains["threads_per_rank"] == [1, 2] and domains["kind"] == [
        "convergence", "peak", "throughput"]
    assert {"samples_per_s", "step_ms", "cv", "peak_private_mib", "ok", "accuracy"} <= {
        m.name.tag for m in experiment.metric_infos}


def test_tensorboard_writes_only_what_changed(example):
    assert orch.track(example, tensorboard=True)
    logdir = example / "tensorboard"
    before = {p.relative_to(logdir): p.stat().st_mtime_ns for p in logdir.rglob("events.out.tfevents*")
              if p.parent != logdir}
    record = json.loads(next(line for line in (example / "trials.jsonl").read_text().splitlines()
                             if '"key":"r1-t1-b32"' in line))
    record["throughput"]["samples_per_s"] = 123.0     # the trial run again (--rerun appends its new record)
    record["started_at"] = "2027-01-01T00:00:00Z"
    with open(example / "trials.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")
    time.sleep(0.01)
    assert orch.track(example, tensorboard=True)
    after = {p.relative_to(logdir): p.stat().st_mtime_ns for p in logdir.rglob("events.out.tfevents*")
             if p.parent != logdir}
    changed = {p.parts[0] for p in set(before) ^ set(after)} | {p.parts[0] for p in before
                                                                 if p in after and before[p] != after[p]}
    assert changed == {"r1-t1-b32"}
    assert read_run(logdir / "r1-t1-b32")[1]["samples_per_s"] == [(0, 123.0)]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]   # closed again when the block ends: nothing listens there


def test_an_mlflow_server_that_is_down_is_said_once_and_fails_nothing(example, caplog):
    uri = f"http://127.0.0.1:{closed_port()}"
    trackers = tracking.open_tracking(tracking.choose(None, mlflow=uri), example, "classifier", live=True)
    results = load_results(example)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="orchestrator.io.tracking"):
        trackers.open(results)
        for record in results.records:
            trackers.record(record)
        trackers.finish(results, (), tracking.End.FINISHED)
    # Connection refused is said at once: not MLflow's 7 retries with a growing back-off (minutes).
    assert time.monotonic() - started < 30
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"no tracking server answers at {uri}" in warnings[0]
    assert f"`orch report {example} --mlflow-uri {uri}` logs what is missing later" in warnings[0]
    assert not trackers.ok and trackers.trackers == []


def test_orch_report_mlflow_to_a_server_that_is_down_exits_1(example, capsys):
    uri = f"http://127.0.0.1:{closed_port()}"
    assert main(["report", str(example), "--format", "json", "--mlflow-uri", uri]) == 1
    assert f"warning: MLflow: no tracking server answers at {uri}" in capsys.readouterr().err


@pytest.mark.parametrize("argv, package", [
    (["--mlflow-uri", "http://127.0.0.1:9"], "mlflow"),
    (["--tensorboard"], "tensorboard"),
    ([], "tensorboard"),     # the sweep file's tracking section asks for it
])
def test_tracking_without_its_package_is_exit_2_before_anything_runs(tmp_path, monkeypatch, capsys, argv, package):
    sweep = tmp_path / "tiny.yaml"
    sweep.write_text(TINY + ("tracking: {tensorboard: true}\n" if not argv else ""))
    monkeypatch.setitem(sys.modules, package, None)   # import fails, as where the package is not installed
    results = tmp_path / "results"
    assert main(["sweep", str(sweep), "--results", str(results), *argv]) == 2
    err = capsys.readouterr().err
    assert f"needs the {package} package" in err and ".venv/bin/pip install -e '.[tracking]'" in err
    assert "Traceback" not in err and not results.exists()   # nothing ran: no Ray, no folder


def test_orch_report_tracking_without_its_package_is_exit_2(example, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    assert main(["report", str(example), "--mlflow"]) == 2
    assert "needs the mlflow package" in capsys.readouterr().err
    assert not (example / "report").exists()   # refused before writing anything


def test_a_changed_tracking_section_never_refuses_a_resume(tmp_path):
    def frozen(tracking_section: str) -> dict:
        path = tmp_path / "tiny.yaml"
        path.write_text(TINY + tracking_section)
        return load_sweep(path).frozen_spec()

    plain = frozen("")
    logged = frozen("tracking: {mlflow: 'http://mlflow:5000', experiment: e, tensorboard: true}\n")
    assert logged["tracking"] == {"mlflow": "http://mlflow:5000", "experiment": "e", "tensorboard": True}
    assert spec_changes(plain, logged, {}, {}) == [] and spec_changes(logged, plain, {}, {}) == []


def test_a_tracker_call_never_waits_on_a_server_that_never_answers(example, monkeypatch, caplog):
    """Tracker calls run on a thread of their own: the driver's `record` returns at once although the server
    answers one header line every 2 s for ever (no socket timeout fires), and `finish` waits at most
    $ORCH_TRACKING_WAIT_S, then says what was not logged."""
    from hostile_servers import DripServer

    monkeypatch.setenv("ORCH_TRACKING_WAIT_S", "2")
    results = load_results(example)
    with DripServer() as server, caplog.at_level(logging.WARNING, logger="orchestrator.io.tracking"):
        trackers = tracking.open_tracking(tracking.choose(None, mlflow=server.uri), example, "c", live=True)
        started = time.monotonic()
        trackers.open(results)
        for record in results.records:
            trackers.record(record)
        queued_s = time.monotonic() - started
        trackers.finish(results, (), tracking.End.FINISHED)
        ended_s = time.monotonic() - started
    assert queued_s < 1.0 and ended_s < 30, (queued_s, ended_s)
    assert not trackers.ok and "MLflow: still not done after 2 s" in caplog.text
