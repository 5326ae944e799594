"""A sweep logged to a real MLflow tracking server (`mlflow server`, SQLite, on loopback) and to TensorBoard, on a
real local Ray, read back with MlflowClient and TensorBoard's own reader. One small sweep in two runs serves
every assertion:

1. `orch sweep --no-convergence --tensorboard --mlflow-uri DOWN` while the server is still starting (DOWN: a port
   nothing listens on): the throughput trials run and are recorded, MLflow is said to be down once;
2. `orch report --mlflow-uri URI` catches up after the fact: the parent run and a child per trial;
3. `orch.sweep(..., mlflow=URI)` (the Python API) resumes: the convergence runs, logged live into the same parent;
4. `orch report --mlflow-uri URI` again: nothing is duplicated, and the report's files are the parent's artifacts.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import read_records, write_sweep

import orch
from orchestrator.cli import main

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]

EXPERIMENT = "orch-test"
SWEEP = f"""
workload: {{name: classifier, params: {{hidden: 64, train_samples: 2048}}}}
grid: {{ranks: [1, 2], threads_per_rank: [1], local_batch: [16]}}
measure: {{warmup_steps: 2, timed_steps: 10, repeats: 2, peak: false, allreduce: false}}
convergence: {{metric: accuracy, target: 0.9, max_epochs: 2, seeds: [0], eval_every_epochs: 0.5,
              base_lr: 0.05, base_batch: 16}}
tracking: {{experiment: {EXPERIMENT}}}
"""
THROUGHPUT = {"r1-t1-b16", "r2-t1-b16"}
CONVERGENCE = {"conv-g16-s0", "conv-g32-s0"}
SERVER_START_S = 300     # a cold `mlflow server` on a loaded 2-vCPU machine took a minute


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    """`mlflow server` with a SQLite backend and proxied artifacts, on loopback, in its own process group."""

    def __init__(self, folder: Path):
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = open(folder / "mlflow-server.log", "w")   # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
             "--artifacts-destination", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "1"], stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            assert self.proc.poll() is None, f"mlflow server exited: {Path(self.log.name).read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=5):
                    return
            except OSError:
                assert time.monotonic() < deadline, f"mlflow server not up after {SERVER_START_S} s"
                time.sleep(0.5)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:   # uvicorn's graceful shutdown can take long; the data is on disk already
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


@dataclass
class Runs:
    """The experiment's runs at one moment: the sweep's parent(s) and their children by trial key."""

    parents: list
    children: list

    @property
    def keys(self) -> list[str]:
        return sorted(run.data.tags["orch.key"] for run in self.children)

    def child(self, key: str):
        (run,) = [r for r in self.children if r.data.tags["orch.key"] == key]
        return run


def runs(uri: str) -> Runs:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    every = client.search_runs([experiment.experiment_id], max_results=1000)
    return Runs([r for r in every if r.data.tags.get("orch.role") == "sweep"],
                [r for r in every if r.data.tags.get("orch.role") == "trial"])


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def tracked(ray_local, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tracked")
    server = MlflowServer(folder)
    sweep = write_sweep(folder, "tracked", SWEEP)
    results = folder / "results"
    warnings = Collect()
    logging.getLogger("orchestrator").addHandler(warnings)
    try:
        down = f"http://127.0.0.1:{free_port()}"
        first = main(["sweep", str(sweep), "--results", str(results), "--no-convergence", "--tensorboard",
                      "--mlflow-uri", down])
        said, recorded = list(warnings.lines), read_records(results)
        server.wait_ready()
        caught_up = main(["report", str(results), "--format", "md", "--mlflow-uri", server.uri])
        after_report = runs(server.uri)
        resumed = orch.sweep(sweep, results=results, mlflow=server.uri, tensorboard=True)
        after_resume = runs(server.uri)
        again = main(["report", str(results), "--mlflow-uri", server.uri])
        final = runs(server.uri)
        yield dict(uri=server.uri, down=down, results=results, first=first, said=said, recorded=recorded,
                   caught_up=caught_up,
                   after_report=after_report, resumed=resumed, after_resume=after_resume, again=again, final=final,
                   warnings=warnings.lines)
    finally:
        logging.getLogger("orchestrator").removeHandler(warnings)
        server.stop()
        if os.environ.get("ORCH_KEEP_MLFLOW"):   # docs/tracking.md's screenshot is taken from such a copy
            shutil.copytree(folder, os.environ["ORCH_KEEP_MLFLOW"], dirs_exist_ok=True)


def test_a_server_that_is_down_fails_nothing_and_is_said_once(tracked):
    assert tracked["first"] == 0
    records = {r["key"]: r for r in tracked["recorded"]}
    assert set(records) == THROUGHPUT and all(r["status"] == "ok" for r in records.values())
    assert len(tracked["said"]) == 1 and f"no tracking server answers at {tracked['down']}" in tracked["said"][0]
    assert f"--mlflow-uri {tracked['down']}` logs what is missing later" in tracked["said"][0]


def test_orch_report_mlflow_catches_up_after_the_fact(tracked):
    assert tracked["caught_up"] == 0
    logged = tracked["after_report"]
    assert len(logged.parents) == 1 and logged.keys == sorted(THROUGHPUT)
    parent = logged.parents[0]
    assert parent.info.run_name == "tracked" and parent.info.status == "FINISHED"
    assert parent.data.tags["orch.folder"] == str(tracked["results"].resolve())
    assert parent.data.params["grid.ranks"] == "[1, 2]" and parent.data.params["env.backend"] == "gloo"
    assert "topology" in parent.data.params and "tracking" not in str(sorted(parent.data.params))
    assert all(child.data.tags["mlflow.parentRunId"] == parent.info.run_id for child in logged.children)


def test_a_resumed_sweep_logs_live_into_the_same_parent(tracked):
    results = tracked["resumed"]
    assert results.summary.ran == 2 and results.summary.skipped == 2 and results.summary.failed == ()
    logged = tracked["after_resume"]
    assert [p.info.run_id for p in logged.parents] == [tracked["after_report"].parents[0].info.run_id]
    assert logged.parents[0].info.status == "FINISHED"
    assert logged.keys == sorted(THROUGHPUT | CONVERGENCE)
    records = {r.key: r for r in results.records}
    for key in THROUGHPUT:
        child, record = logged.child(key), records[key]
        assert child.info.run_name == key and child.info.status == "FINISHED"
        assert child.data.params["ranks"] == str(record.ranks) and child.data.params["local_batch"] == "16"
        assert child.data.params["kind"] == "throughput" and child.data.params["backend"] == "gloo"
        assert child.data.metrics["samples_per_s"] == pytest.approx(record.throughput.samples_per_s)
        assert child.data.metrics["step_ms"] == pytest.approx(max(record.throughput.step_ms_median))
        assert {"cv", "peak_private_mib", "ok", "wall_s"} <= set(child.data.metrics)


def test_a_convergence_run_is_a_step_series(tracked):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracked["uri"])
    records = {r.key: r for r in tracked["resumed"].records}
    for key in CONVERGENCE:
        record, child = records[key], tracked["after_resume"].child(key)
        assert child.data.params["global_batch"] == key.split("-")[1][1:] and child.data.params["seed"] == "0"
        c = record.convergence
        history = client.get_metric_history(child.info.run_id, "accuracy")
        assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
            (round(e * c.steps_per_epoch), pytest.approx(v)) for e, v in c.curve]
        epochs = client.get_metric_history(child.info.run_id, "epoch")
        assert sorted(m.value for m in epochs) == pytest.approx([e for e, _ in c.curve])
        assert child.data.metrics["epochs_run"] == pytest.approx(c.epochs_run)


def test_report_again_duplicates_nothing_and_uploads_the_report(tracked):
    from mlflow.tracking import MlflowClient

    assert tracked["again"] == 0
    final = tracked["final"]
    assert len(final.parents) == 1 and final.keys == sorted(THROUGHPUT | CONVERGENCE)
    assert {c.info.run_id for c in final.children} == {c.info.run_id for c in tracked["after_resume"].children}
    parent = final.parents[0]
    assert parent.info.status == "FINISHED"   # a report after the fact leaves the sweep's status as it was
    assert parent.data.metrics["trials_ok"] == 4 and parent.data.metrics["best_samples_per_s"] > 0
    client = MlflowClient(tracking_uri=tracked["uri"])
    sweep_files = {f.path for f in client.list_artifacts(parent.info.run_id, "sweep")}
    assert {"sweep/spec.json", "sweep/topology.json", "sweep/environment.json", "sweep/trials.jsonl"} <= sweep_files
    report_files = {f.path for f in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report/report.md", "report/scalability-b16.png", "report/convergence.csv"} <= report_files
    assert len(tracked["warnings"]) == 1   # the server that was down in the first run, and nothing since


def test_the_tensorboard_runs_cover_both_sweeps(tracked):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    logdir = tracked["results"] / "tensorboard"
    assert sorted(p.name for p in logdir.iterdir() if p.is_dir()) == sorted(THROUGHPUT | CONVERGENCE)
    records = {r.key: r for r in tracked["resumed"].records}
    acc = EventAccumulator(str(logdir / "r2-t1-b16"), size_guidance={"tensors": 0})
    acc.Reload()
    (event,) = acc.Tensors("samples_per_s")
    assert float(tensor_util.make_ndarray(event.tensor_proto)) == pytest.approx(
        records["r2-t1-b16"].throughput.samples_per_s, rel=1e-6)


def test_the_api_results_are_the_records(tracked):
    frame = tracked["resumed"].to_frame()
    lines = {r["key"]: r for r in read_records(tracked["results"])}
    assert sorted(frame["key"]) == sorted(lines)
    by_key = frame.set_index("key")
    for key in THROUGHPUT:
        assert by_key.loc[key, "samples_per_s"] == lines[key]["throughput"]["samples_per_s"]
    assert by_key.loc["conv-g16-s0", "kind"] == "convergence"
