"""A sweep in MLflow: one parent run per results folder, one nested child run per trial record.

- The parent (run name: the sweep's) carries the spec, the topology and the environment as parameters and
  as artifacts (`sweep/spec.json`, ...), the counts of trials and the best throughput as metrics, and at the
  end trials.jsonl and the report (`report/`: report.md, the PNG plots, every table as CSV and JSON).
- A child (run name: the trial key) carries the trial's layout and settings and what took effect (`applied.*`)
  as parameters, its figures as metrics (`orchestrator.core.measured.record_fields`: samples/s, step time, spread,
  memory, `ok` for its status), a convergence run's metric per evaluation as a step series (the step is the
  global training step; `epoch` is logged at the same steps), and an all-reduce calibration's time per
  message size (the step is the size in bytes). A trial that did not end ok is a FAILED run with its reason.
  Infeasible grid points never ran: they are not runs (the report lists them).

Runs are found again by their tags: the parent by `orch.folder_id` (a hash of the results folder's absolute
path) in the experiment, a child by its parent and `orch.key`, with `orch.fingerprint` (a hash of the
record's JSON) telling whether it is the same record. So a resumed sweep goes on in the same parent, and
`orch report --mlflow` adds only what is missing; a trial run again (`--rerun`) replaces its child.

Only MlflowClient is used (explicit run ids, no active run): nothing leaks into a notebook's own MLflow runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from orchestrator.constants import (
    DEFAULT_MLFLOW_RETRIES,
    DEFAULT_MLFLOW_TIMEOUT_S,
    MLFLOW_EXPERIMENT_ENV_VAR,
    MLFLOW_MAX_SEARCH_PAGES,
    MLFLOW_RETRIES_ENV_VAR,
    MLFLOW_SEARCH_S,
    MLFLOW_TIMEOUT_ENV_VAR,
)
from orchestrator.core.measured import record_fields as fields
from orchestrator.core.measured.environment import Environment
from orchestrator.core.measured.records import Kind, Record, Status
from orchestrator.io.files import read_nofollow
from orchestrator.io.store import ENVIRONMENT_FILE, SPEC_FILE, TOPOLOGY_FILE, TRIALS_FILE, Results
from orchestrator.io.tracking import INSTALL_HINT, End, TrackerKind, TrackerPlace, fingerprint

log = logging.getLogger(__name__)

HEALTH_TIMEOUT_S = 5.0     # a tracking server that does not answer its health check within this is down
MAX_PARAM_CHARS = 500      # what every MLflow server takes (newer ones take 6000)
BATCH_PARAMS, BATCH_METRICS = 100, 1000   # MLflow's limits per log_batch
TAG_ROLE, TAG_FOLDER, TAG_FOLDER_ID, TAG_KEY = "orch.role", "orch.folder", "orch.folder_id", "orch.key"
TAG_FINGERPRINT, TAG_KIND, TAG_STATUS = "orch.fingerprint", "orch.kind", "orch.status"
PARENT_TAG = "mlflow.parentRunId"
KEY_RE = re.compile(r"[^A-Za-z0-9_\-. /]")


def folder_id(folder: Path) -> str:
    """The parent run's identity: a hash of the results folder's absolute path (no quoting in a filter)."""
    return hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:20]


def mlflow_key(name: str) -> str:
    """A parameter or metric name MLflow takes: letters, digits and `_-. /`; anything else becomes `_`.

    >>> mlflow_key("applied.ipex (cpu)"), mlflow_key("grid.ranks")
    ('applied.ipex _cpu_', 'grid.ranks')
    """
    return KEY_RE.sub("_", name)


def flat_params(data: object, prefix: str = "") -> dict[str, str]:
    """Nested JSON as MLflow parameters: dotted keys, values as text (lists as JSON-ish text), cut to what
    every server takes.

    >>> flat_params({"grid": {"ranks": [1, 2]}, "backend": "auto", "convergence": None})
    {'grid.ranks': '[1, 2]', 'backend': 'auto', 'convergence': 'None'}
    """
    if isinstance(data, dict):
        out: dict[str, str] = {}
        for key, value in data.items():
            out.update(flat_params(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    text = str(data)
    return {prefix: text if len(text) <= MAX_PARAM_CHARS else text[:MAX_PARAM_CHARS - 1] + "…"}


@contextlib.contextmanager
def client_settings() -> Iterator[None]:
    """MLflow's retries and request timeout as orch wants them for its calls, unless the environment sets them
    (constants.py says why); put back afterwards, so that a notebook's own MLflow calls keep their settings."""
    added = [name for name in (MLFLOW_RETRIES_ENV_VAR, MLFLOW_TIMEOUT_ENV_VAR) if name not in os.environ]
    os.environ.update({name: {MLFLOW_RETRIES_ENV_VAR: DEFAULT_MLFLOW_RETRIES,
                              MLFLOW_TIMEOUT_ENV_VAR: DEFAULT_MLFLOW_TIMEOUT_S}[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def check_reachable(uri: str) -> None:
    """ConnectionError when nothing answers at an http(s) tracking URI (any HTTP answer counts as up: a server
    behind a proxy may refuse the health check and still take runs). Other URIs (sqlite:, file:, databricks)
    are not checked."""
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=HEALTH_TIMEOUT_S):
            pass
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise ConnectionError(f"no tracking server answers at {uri} ({reason})") from None


def _ms(seconds: float | None) -> int:
    return int((seconds if seconds is not None else time.time()) * 1000)


def _started_s(record: Record) -> float | None:
    when = fields.parse_time(record.started_at)
    return when.timestamp() if when is not None else None


class MlflowTracker:
    label = "MLflow"

    def __init__(self, uri: str, experiment: str | None, folder: Path, sweep_name: str, *, live: bool = True):
        import mlflow

        self.uri = uri or mlflow.get_tracking_uri()
        self.client: Any = None   # made in `open`, where a URI MLflow cannot use is a guarded failure
        self.experiment = experiment or os.environ.get(MLFLOW_EXPERIMENT_ENV_VAR) or sweep_name
        self.folder, self.sweep_name, self.live = folder, sweep_name, live
        self.experiment_id = ""
        self.parent_id = ""
        self.created_parent = False
        self.children: dict[str, tuple[str, str]] = {}   # trial key -> (run id, fingerprint)

    def catch_up_option(self) -> str:
        return f"--mlflow-uri {self.uri}"

    # --- the sweep's run ------------------------------------------------------------------------------
    def open(self, results: Results) -> None:
        from mlflow.tracking import MlflowClient

        with client_settings():
            check_reachable(self.uri)
            self.client = MlflowClient(tracking_uri=self.uri)
            self.experiment_id = self._experiment_id()
            self.parent_id = self._find_parent() or self._create_parent()
            if self.live and not self.created_parent:   # a sweep resumed: running again
                self.client.update_run(self.parent_id, status="RUNNING")
            self._log_sweep(results)
            self.children = self._find_children()
            for record in results.records:
                self._log_record(record)
        log.info("MLflow: logging to run %s of experiment %r at %s", self.parent_id, self.experiment, self.uri)

    def record(self, record: Record) -> None:
        with client_settings():
            self._log_record(record)

    def finish(self, results: Results, report_files: Sequence[Path], end: End) -> None:
        with client_settings():
            for record in results.records:   # anything the hook missed; a record logged already is skipped
                self._log_record(record)
            self._log_counts(results)
            self._upload([results.path / TRIALS_FILE], "sweep")
            self._upload(report_files, "report")
            if end != End.REPORT or self.created_parent:
                self.client.set_terminated(self.parent_id, "KILLED" if end == End.INTERRUPTED else "FINISHED")

    def _experiment_id(self) -> str:
        found = self.client.get_experiment_by_name(self.experiment)
        if found is not None:
            return str(found.experiment_id)
        # A model-training experiment: MLflow's UI then opens on its runs, not on the GenAI (traces) view.
        return str(self.client.create_experiment(self.experiment, tags={
            "orch.created_by": "orch", "mlflow.experimentKind": "custom_model_development"}))

    def _find_parent(self) -> str | None:
        runs = self.client.search_runs([self.experiment_id], f"tags.`{TAG_FOLDER_ID}` = '{folder_id(self.folder)}' "
                                       f"and tags.`{TAG_ROLE}` = 'sweep'", max_results=1,
                                       order_by=["attributes.start_time ASC"])
        return str(runs[0].info.run_id) if runs else None

    def _create_parent(self) -> str:
        tags = {TAG_ROLE: "sweep", TAG_FOLDER: str(self.folder.resolve()), TAG_FOLDER_ID: folder_id(self.folder),
                "orch.sweep": self.sweep_name, "mlflow.source.name": "orch sweep", "mlflow.source.type": "LOCAL",
                "mlflow.note.content": f"orch sweep `{self.sweep_name}`: one child run per trial. Results folder: "
                                       f"`{self.folder.resolve()}`."}
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=self.sweep_name)   # RUNNING
        self.created_parent = True
        return str(run.info.run_id)

    def _log_sweep(self, results: Results) -> None:
        """The spec, topology and environment: parameters logged once (MLflow refuses a changed value; a
        resumed sweep may have changed a setting that does not change results, whose new value is in the
        `sweep/spec.json` artifact), and the files as artifacts, replaced each time."""
        # the spec as stored (its keys are the parameters' names); where it is logged is no setting
        spec = {k: v for k, v in results.stored_spec.items() if k != "tracking"}
        topology = results.topology
        wanted = {mlflow_key(k): v for k, v in flat_params(
            {**spec, "env": _env_params(results.environment),
             "topology": topology.describe() if topology else "unknown"}).items()}
        have = self.client.get_run(self.parent_id).data.params
        changed = sorted(k for k, v in wanted.items() if k in have and have[k] != v)
        if changed:
            log.debug("MLflow: parameters kept at their first value (see sweep/spec.json): %s", ", ".join(changed))
        self._log_batch(self.parent_id, params={k: v for k, v in wanted.items() if k not in have})
        self._upload([results.path / name for name in (SPEC_FILE, TOPOLOGY_FILE, ENVIRONMENT_FILE)], "sweep")

    def _upload(self, files: Sequence[Path], where: str) -> None:
        """Upload exactly `files` into the parent's `where/`: each read once, never through a link, and only a
        regular file (a link in a results folder someone handed over may point at the user's keys), copied into
        a private folder that MLflow uploads from; a file that is not there is skipped."""
        with tempfile.TemporaryDirectory(prefix="orch-upload-") as staging:
            count = 0
            for path in files:
                try:
                    data = read_nofollow(path)
                except OSError:   # absent, a link, a FIFO, a folder: not one of the files orch wrote
                    continue
                with open(Path(staging) / path.name, "wb") as fh:
                    fh.write(data)
                count += 1
            if count:
                self.client.log_artifacts(self.parent_id, staging, where)

    def _log_counts(self, results: Results) -> None:
        records = results.records
        ok = records.ok(Kind.THROUGHPUT)
        counts: dict[str, float] = {"trials_ok": len(records.ok()), "trials_failed": len(records.failed()),
                                    "trials_infeasible": sum(1 for r in records if r.status == Status.INFEASIBLE)}
        if ok:
            counts["best_samples_per_s"] = max(r.throughput.samples_per_s for r in ok if r.throughput is not None)
        self._log_batch(self.parent_id, metrics=[(k, float(v), 0, None) for k, v in counts.items()])

    # --- the trials' runs -----------------------------------------------------------------------------
    def _find_children(self) -> dict[str, tuple[str, str]]:
        """{trial key: (run id, fingerprint)} of the parent's children; a key found twice (two processes logged
        it at once) keeps its latest run and deletes the others, so that no trial has two children."""
        found: dict[str, tuple[str, str]] = {}
        for page in self._pages(f"tags.`{PARENT_TAG}` = '{self.parent_id}'"):
            for run in page:
                key = run.data.tags.get(TAG_KEY)
                if key is None:
                    continue
                if key in found:
                    self.client.delete_run(found[key][0])
                found[key] = (str(run.info.run_id), run.data.tags.get(TAG_FINGERPRINT, ""))
        return found

    def _pages(self, query: str) -> Iterator[Any]:
        """The pages of a run search, bounded: at most MLFLOW_MAX_SEARCH_PAGES pages and MLFLOW_SEARCH_S seconds,
        and a page token seen before ends it (a server that hands out tokens for ever must not hold the sweep);
        past a bound, RuntimeError (the tracker stops, said once)."""
        token, seen = None, set()
        started = time.monotonic()
        for _ in range(MLFLOW_MAX_SEARCH_PAGES):
            page = self.client.search_runs([self.experiment_id], query, max_results=1000,
                                           order_by=["attributes.start_time ASC"], page_token=token)
            yield page
            token = page.token
            if not token:
                return
            if token in seen or time.monotonic() - started > MLFLOW_SEARCH_S:
                break
            seen.add(token)
        raise RuntimeError(f"the search for this sweep's runs at {self.uri} did not end (more than "
                           f"{MLFLOW_MAX_SEARCH_PAGES} pages, {MLFLOW_SEARCH_S:g} s, or a page token repeated)")

    def _log_record(self, record: Record) -> None:
        if record.status == Status.INFEASIBLE:
            return
        stamp = fingerprint(record)
        known = self.children.get(record.key)
        if known is not None and known[1] == stamp:
            return
        if known is not None:   # the trial ran again (--rerun): its new record replaces the old child
            self.client.delete_run(known[0])
        start_s = _started_s(record)
        tags = {PARENT_TAG: self.parent_id, TAG_ROLE: "trial", TAG_KEY: record.key, TAG_KIND: str(record.kind),
                TAG_STATUS: str(record.status), TAG_FINGERPRINT: stamp, TAG_FOLDER_ID: folder_id(self.folder)}
        if not record.ok and record.reason:
            tags["mlflow.note.content"] = record.reason
        run_id = str(self.client.create_run(self.experiment_id, start_time=_ms(start_s), tags=tags,
                                            run_name=record.key).info.run_id)
        end_ms = _ms(start_s + record.wall_s if start_s is not None and record.wall_s is not None else None)
        params = {**{k: str(v) for k, v in fields.params(record).items()}, "kind": str(record.kind),
                  **flat_params({"applied": record.applied or {}})}
        metrics: list[tuple[str, float, int, int | None]] = [(k, v, 0, end_ms)
                                                             for k, v in fields.metrics(record).items()]
        for s in fields.series(record):
            metrics += [(s.name, v, step, end_ms) for step, v in zip(s.steps, s.values)]
            metrics += [(s.x_name, x, step, end_ms) for step, x in zip(s.steps, s.x)]
        self._log_batch(run_id, params=params, metrics=metrics)
        self.client.set_terminated(run_id, "FINISHED" if record.ok else "FAILED", end_time=end_ms)
        self.children[record.key] = (run_id, stamp)

    def _log_batch(self, run_id: str, *, params: dict[str, str] | None = None,
                   metrics: list[tuple[str, float, int, int | None]] | None = None) -> None:
        """Parameters and metrics (name, value, step, timestamp ms) in batches within MLflow's limits."""
        from mlflow.entities import Metric, Param

        items = [Param(mlflow_key(k), v) for k, v in (params or {}).items()]
        for start in range(0, len(items), BATCH_PARAMS):
            self.client.log_batch(run_id, params=items[start:start + BATCH_PARAMS], synchronous=True)
        points = [Metric(mlflow_key(k), v, when if when is not None else _ms(None), step)
                  for k, v, step, when in metrics or ()]
        for start in range(0, len(points), BATCH_METRICS):
            self.client.log_batch(run_id, metrics=points[start:start + BATCH_METRICS], synchronous=True)


def _env_params(env: Environment) -> dict[str, str | int | None]:
    """What the sweep's parent run logs of its environment: versions, host, CPU, nodes, backend and precision."""
    given = {"orch": env.orch, "python": env.python, "torch": env.torch, "ray": env.ray, "hostname": env.hostname,
             "cpu_model": env.cpu_model, "ray_nodes": env.ray_nodes}
    return {**{k: v for k, v in given.items() if v is not None},
            "backend": env.backend.chosen if env.backend is not None else None, "precision": env.precision_chosen}


def _make(setting: str, place: TrackerPlace) -> MlflowTracker:
    return MlflowTracker(setting, place.experiment, place.folder, place.sweep_name, live=place.live)


# Registered in orchestrator.io.tracking.TRACKERS: `--mlflow`, `--mlflow-uri URI` (its setting: the tracking URI).
TRACKER = TrackerKind("mlflow", _make, package="mlflow", option="--mlflow", install=INSTALL_HINT)
