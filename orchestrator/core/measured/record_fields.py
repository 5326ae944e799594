"""A record as one flat row: the columns of the Python API's `Results.to_frame()` and what a tracker (MLflow,
TensorBoard) logs of a trial, read from one table of fields (`FIELDS`) so that the two cannot disagree.

Each field has a value type (the column's dtype), a role and a help text (docs/tracking.md lists them):

- ``id``: names the record (key, kind, status): a tracker's tags;
- ``param``: the trial's setting (its layout, seed, backend, precision): a tracker's parameters, TensorBoard's
  hyperparameters;
- ``metric``: a figure it measured (samples/s, step time, spread, memory, convergence): a tracker's metrics;
- ``info``: context (when it started, why it failed, its memory budget): a column, and a tag or nothing in a
  tracker.

A figure kept per rank is one number in the row, the one that bounds the trial: the slowest rank's step time,
the largest rank's memory. Series (a convergence run's metric per evaluation, an all-reduce's time per message
size) are not columns: `series` gives them, as a tracker's step series.

    >>> r = Record(kind=Kind.THROUGHPUT, key="r2-t1-b16", status=Status.OK, ranks=2, threads_per_rank=1,
    ...            local_batch=16, global_batch=32, throughput=ThroughputSection(samples_per_s=640.0, cv=0.02,
    ...            step_ms_median=[48.0, 50.0]))
    >>> params(r)
    {'ranks': 2, 'threads_per_rank': 1, 'local_batch': 16, 'global_batch': 32, 'cores': 2}
    >>> metrics(r)
    {'ok': 1.0, 'samples_per_s': 640.0, 'cv': 0.02, 'step_ms': 50.0}
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from orchestrator.core.measured.records import (
    KINDS,
    STATUSES,
    ConvergenceSection,
    Kind,
    NoiseScaleSection,
    Record,
    Status,
    ThroughputSection,
)

__all__ = ["FIELDS", "Field", "Role", "ValueType", "columns_markdown", "metrics", "params", "row", "series",
           "parse_time"]


class Role(StrEnum):
    ID = "id"
    PARAM = "param"
    METRIC = "metric"
    INFO = "info"


class ValueType(StrEnum):
    """A column's type; the API maps each to a pandas dtype (nullable integers and booleans, float64 with NaN,
    strings, categoricals, UTC timestamps)."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STR = "str"
    CATEGORY = "category"
    TIME = "time"


# A field's value in a record: what its ValueType says (TIME: a datetime), None where it does not apply.
Value: TypeAlias = str | int | float | bool | dt.datetime | None


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: ValueType
    role: Role
    help: str
    read: Callable[[Record], Value]      # the field's value in a record
    categories: tuple[str, ...] = ()     # a CATEGORY's values, in order


def _largest(values: Sequence[float | None] | None) -> float | None:
    known = [v for v in values or () if v is not None]
    return max(known) if known else None


def _smallest(values: Sequence[float | None] | None) -> float | None:
    known = [v for v in values or () if v is not None]
    return min(known) if known else None


def parse_time(text: str | None) -> dt.datetime | None:
    """A record's `started_at` as an aware UTC datetime (None when absent or unreadable).

    >>> parse_time("2025-11-20T09:03:00Z"), parse_time("2026-11-21T06:35:35+00:00").hour, parse_time("soon")
    (datetime.datetime(2025, 11, 20, 9, 3, tzinfo=datetime.timezone.utc), 6, None)
    """
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)
    except ValueError:
        return None


def _cores(r: Record) -> int | None:
    return r.ranks * r.threads_per_rank if r.ranks is not None and r.threads_per_rank is not None else None


def _precision(r: Record) -> str | None:
    """What the trial computed in: the workload's `applied` precision, or the GEMM peak's."""
    value = (r.applied or {}).get("precision") or (r.peak.precision if r.peak is not None else None)
    return str(value) if value is not None else None


def _throughput(get: Callable[[ThroughputSection], Value]) -> Callable[[Record], Value]:
    return lambda r: get(r.throughput) if r.throughput is not None else None


def _convergence(get: Callable[[ConvergenceSection], Value]) -> Callable[[Record], Value]:
    return lambda r: get(r.convergence) if r.convergence is not None else None


def _noise(get: Callable[[NoiseScaleSection], Value]) -> Callable[[Record], Value]:
    def read(r: Record) -> Value:
        n = r.convergence.noise_scale if r.convergence is not None else None
        return get(n) if n is not None and n.b_simple is not None else None
    return read


def _first_line(r: Record) -> str | None:
    lines = r.reason_lines()
    return lines[0] if lines else None


FIELDS: tuple[Field, ...] = (
    Field("key", ValueType.STR, Role.ID, "the record's key, unique in the sweep (r2-t1-b16, conv-g32-s0, ...)",
          lambda r: r.key),
    Field("kind", ValueType.CATEGORY, Role.ID, "what it measured: throughput, convergence, peak or allreduce",
          lambda r: str(r.kind), tuple(str(k) for k in KINDS)),
    Field("status", ValueType.CATEGORY, Role.ID, "ok, infeasible, failed, oom or timeout",
          lambda r: str(r.status), tuple(str(s) for s in STATUSES)),
    Field("ranks", ValueType.INT, Role.PARAM, "data-parallel ranks", lambda r: r.ranks),
    Field("threads_per_rank", ValueType.INT, Role.PARAM, "compute threads (cores) per rank",
          lambda r: r.threads_per_rank),
    Field("local_batch", ValueType.INT, Role.PARAM, "samples per rank per step", lambda r: r.local_batch),
    Field("global_batch", ValueType.INT, Role.PARAM, "ranks × local batch", lambda r: r.global_batch),
    Field("cores", ValueType.INT, Role.PARAM, "ranks × threads per rank", _cores),
    Field("seed", ValueType.INT, Role.PARAM, "a convergence run's seed", lambda r: r.seed),
    Field("backend", ValueType.STR, Role.PARAM, "torch.distributed backend that ran (gloo or ccl)",
          lambda r: r.backend),
    Field("precision", ValueType.STR, Role.PARAM, "fp32 or bf16, as it took effect", _precision),
    Field("ok", ValueType.BOOL, Role.METRIC, "the trial ended ok (a tracker logs 1 or 0)",
          lambda r: r.status == Status.OK if r.status != Status.INFEASIBLE else None),
    Field("samples_per_s", ValueType.FLOAT, Role.METRIC, "global throughput: median over the timed repeats",
          _throughput(lambda t: t.samples_per_s)),
    Field("cv", ValueType.FLOAT, Role.METRIC, "spread of the repeats' throughput (coefficient of variation, "
          "a fraction)", _throughput(lambda t: t.cv)),
    Field("step_ms", ValueType.FLOAT, Role.METRIC, "the slowest rank's median step time, ms",
          _throughput(lambda t: _largest(t.step_ms_median))),
    Field("step_ms_p90", ValueType.FLOAT, Role.METRIC, "the slowest rank's 90th-percentile step time, ms",
          _throughput(lambda t: _largest(t.step_ms_p90))),
    Field("data_wait_share", ValueType.FLOAT, Role.METRIC, "share of the timed steps spent waiting for data",
          _throughput(lambda t: t.data_wait_share)),
    Field("peak_private_mib", ValueType.FLOAT, Role.METRIC, "the largest rank's peak private memory (resident "
          "less file-backed), MiB", lambda r: _largest(r.memory.peak_private_mib) if r.memory is not None else None),
    Field("peak_uss_mib", ValueType.FLOAT, Role.METRIC, "older records: the largest rank's peak unique memory "
          "(USS), MiB", lambda r: _largest(r.memory.peak_uss_mib) if r.memory is not None else None),
    Field("epochs_to_target", ValueType.FLOAT, Role.METRIC, "a convergence run's epochs to reach the target "
          "(empty when it did not)", _convergence(lambda c: c.epochs_to_target)),
    Field("converged", ValueType.BOOL, Role.METRIC, "a convergence run reached the target",
          _convergence(lambda c: c.converged)),
    Field("epochs_run", ValueType.FLOAT, Role.METRIC, "epochs a convergence run trained",
          _convergence(lambda c: c.epochs_run)),
    Field("train_s", ValueType.FLOAT, Role.METRIC, "a convergence run's training time, s",
          _convergence(lambda c: c.train_s)),
    Field("b_simple", ValueType.FLOAT, Role.METRIC, "a convergence run's gradient noise scale B_simple where it "
          "stopped, samples (empty when not measured or not resolved)", _noise(lambda n: n.b_simple)),
    Field("b_simple_low", ValueType.FLOAT, Role.METRIC, "the low end of B_simple's 90% interval",
          _noise(lambda n: n.low)),
    Field("b_simple_high", ValueType.FLOAT, Role.METRIC, "the high end of B_simple's 90% interval (empty: "
          "unbounded)", _noise(lambda n: n.high)),
    Field("gflops", ValueType.FLOAT, Role.METRIC, "a GEMM peak record's rate, summed over its ranks, GFLOP/s",
          lambda r: r.peak.gflops if r.peak is not None else None),
    Field("wall_s", ValueType.FLOAT, Role.METRIC, "from reservation to release, s", lambda r: r.wall_s),
    Field("startup_s", ValueType.FLOAT, Role.METRIC, "from reservation until every rank had built its model, s",
          lambda r: r.startup_s),
    Field("started_at", ValueType.TIME, Role.INFO, "when the trial started (UTC)", lambda r: parse_time(r.started_at)),
    Field("reason", ValueType.STR, Role.INFO, "why it is not ok: the first line", _first_line),
    Field("memory_budget_mib", ValueType.FLOAT, Role.INFO, "the smallest rank's memory budget, MiB",
          lambda r: _smallest(r.memory.budget_mib) if r.memory is not None else None),
    Field("memory_estimate_mib", ValueType.FLOAT, Role.INFO, "private memory one rank was planned to need, MiB",
          lambda r: r.memory.estimate_mib if r.memory is not None else None),
    Field("shared_mib", ValueType.FLOAT, Role.INFO, "the largest rank's file-backed pages (its libraries, which "
          "a node holds once), MiB", lambda r: _largest(r.memory.shared_mib) if r.memory is not None else None),
    Field("convergence_metric", ValueType.STR, Role.INFO, "the metric a convergence run trained to",
          _convergence(lambda c: c.metric)),
    Field("convergence_target", ValueType.FLOAT, Role.INFO, "the value it had to reach",
          _convergence(lambda c: c.target)),
    Field("lr", ValueType.FLOAT, Role.INFO, "a convergence run's scaled learning rate",
          _convergence(lambda c: c.lr)),
    Field("allreduce_link", ValueType.STR, Role.INFO, "an all-reduce calibration's link class",
          lambda r: r.allreduce.link if r.allreduce is not None else None),
)


def row(record: Record) -> dict[str, Value]:
    """Every field of `record`, by name (None where it does not apply)."""
    return {f.name: f.read(record) for f in FIELDS}


def params(record: Record) -> dict[str, Value]:
    """The `param` fields that apply to `record` (its layout and settings), by name."""
    return {f.name: value for f in FIELDS if f.role == Role.PARAM and (value := f.read(record)) is not None}


def metrics(record: Record) -> dict[str, float]:
    """The `metric` fields that apply to `record`, as floats (a boolean is 1.0 or 0.0)."""
    out = {}
    for f in FIELDS:
        value = f.read(record) if f.role == Role.METRIC else None
        if isinstance(value, (int, float)):   # a metric is a number or a boolean; None: it does not apply
            out[f.name] = float(value)
    return out


@dataclass(frozen=True, slots=True)
class Series:
    """A step series: `name` at integer `steps` (a tracker's x axis), with the `x` each step stands for."""

    name: str
    x_name: str
    steps: tuple[int, ...]
    x: tuple[float, ...]
    values: tuple[float, ...]


def series(record: Record) -> tuple[Series, ...]:
    """The step series of an ok record: a convergence run's metric per evaluation, at the global training step
    it was taken (epoch × steps per epoch; the evaluation's index where the record does not say), and an
    all-reduce calibration's time per message size (the step is the size in bytes).

    >>> from orchestrator.core.measured.records import ConvergenceSection
    >>> run = Record(kind=Kind.CONVERGENCE, key="conv-g32-s0", status=Status.OK, convergence=ConvergenceSection(
    ...     metric="accuracy", curve=[[0.5, 0.7], [1.0, 0.9]], steps_per_epoch=64))
    >>> [(s.name, s.steps, s.x, s.values) for s in series(run)]
    [('accuracy', (32, 64), (0.5, 1.0), (0.7, 0.9))]
    """
    if not record.ok:
        return ()
    c, a = record.convergence, record.allreduce
    if record.kind == Kind.CONVERGENCE and c is not None and c.curve:
        epochs = tuple(float(point[0]) for point in c.curve)
        steps = (tuple(round(e * c.steps_per_epoch) for e in epochs) if c.steps_per_epoch
                 else tuple(range(len(epochs))))
        return (Series(c.metric or "metric", "epoch", steps, epochs, tuple(float(p[1]) for p in c.curve)),)
    if record.kind == Kind.ALLREDUCE and a is not None and a.sizes_bytes:
        return (Series("allreduce_s", "bytes", tuple(a.sizes_bytes), tuple(float(b) for b in a.sizes_bytes),
                       tuple(float(t) for t in a.time_s)),)
    return ()


DTYPE_NAMES = {ValueType.INT: "Int64", ValueType.FLOAT: "float64", ValueType.BOOL: "boolean",
               ValueType.STR: "string", ValueType.CATEGORY: "category", ValueType.TIME: "datetime64 (UTC)"}


def columns_markdown() -> str:
    """The column table of docs/python-api.md, generated from `FIELDS` so that the page cannot drift.

    >>> columns_markdown().splitlines()[3]
    '| `kind` | category | id | what it measured: throughput, convergence, peak or allreduce |'
    """
    lines = ["| column | dtype | role | meaning |", "|---|---|---|---|"]
    lines += [f"| `{f.name}` | {DTYPE_NAMES[f.type]} | {f.role} | {f.help} |" for f in FIELDS]
    return "\n".join(lines) + "\n"
