"""What the Python API returns: a `Plan`, a sweep's `Results` and a `Prediction`, each typed, each with
`to_frame()` (a pandas DataFrame with typed columns) and `to_dict()` or `tables()` giving exactly what the
matching command prints or writes (`orch plan --json`, `orch report`'s table files, `orch predict --json`).

pandas is an optional dependency (`.venv/bin/pip install -e '.[notebook]'`): only `to_frame()` and `tables()` need it.

Column types: whole numbers are pandas' nullable `Int64`, measured figures `float64` (NaN where a record has
none), flags `boolean`, words `string`, the record's kind and status `category`, times UTC timestamps.
docs/python-api.md lists every column.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from orchestrator.app.sweep import SweepSummary
from orchestrator.core.machine.topology import Topology
from orchestrator.core.measured import record_fields
from orchestrator.core.measured.environment import Environment
from orchestrator.core.measured.record_fields import ValueType
from orchestrator.core.measured.records import Record, Records, Status
from orchestrator.core.planning.spec import SweepSpec
from orchestrator.core.text.table import Table

if TYPE_CHECKING:   # pandas is imported by the methods that need it: an optional dependency
    import pandas as pd

    from orchestrator.core.planning.plan import Plan as CorePlan
    from orchestrator.core.predict.score import ScoreReport
    from orchestrator.io.store import Results as StoredResults
    from orchestrator.report.prediction import PredictionReport

__all__ = ["Plan", "Prediction", "Results", "SweepSummary", "table_frame"]

# One cell of a frame's rows: a record's field (a datetime in a TIME column), a plan's or a prediction's.
Value = str | int | float | bool | dt.datetime | None
PANDAS_HINT = ".venv/bin/pip install -e '.[notebook]' in orch's folder (bash scripts/setup.sh --dev installs it)"


def _pandas() -> ModuleType:
    try:
        import pandas
    except ImportError as err:
        raise ModuleNotFoundError(f"orch's DataFrames need pandas, which does not import here ({err}): "
                                  f"{PANDAS_HINT}") from None
    return pandas


def _column(pd: ModuleType, kind: ValueType, values: Sequence[Value], categories: Sequence[str] = ()) -> object:
    """One typed column (see the module docstring for the types)."""
    if kind == ValueType.INT:
        return pd.array(values, dtype="Int64")
    if kind == ValueType.FLOAT:
        # A FLOAT column holds numbers (None: not applicable); a datetime is only ever a TIME column's.
        return pd.array([float("nan") if v is None or isinstance(v, dt.datetime) else float(v) for v in values],
                        dtype="float64")
    if kind == ValueType.BOOL:
        return pd.array(values, dtype="boolean")
    if kind == ValueType.CATEGORY:
        return pd.Categorical(values, categories=list(categories))
    if kind == ValueType.TIME:
        return pd.to_datetime(pd.Series(values, dtype=object), utc=True)
    return pd.array(values, dtype="string")


def frame(columns: Sequence[tuple[str, ValueType]], rows: Sequence[Mapping[str, Value]],
          categories: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """A DataFrame of `rows` (dicts) with the typed `columns`, in that order."""
    pd = _pandas()
    cats = categories or {}
    return pd.DataFrame({name: _column(pd, kind, [row.get(name) for row in rows], cats.get(name, ()))
                         for name, kind in columns})


def _cells(figures: Mapping[str, object]) -> dict[str, Value]:
    """A JSON object's single values, as a frame's row takes them (its lists left out: they are joined apart)."""
    return {k: v for k, v in figures.items() if v is None or isinstance(v, (str, int, float, bool))}


def records_frame(records: Iterable[Record]) -> pd.DataFrame:
    """One row per record, one column per `orchestrator.core.measured.record_fields.FIELDS` entry."""
    fields = record_fields.FIELDS
    return frame([(f.name, f.type) for f in fields], [record_fields.row(r) for r in records],
                 {f.name: f.categories for f in fields if f.categories})


def table_frame(table: Table) -> pd.DataFrame:
    """A report table as a DataFrame: its row labels as the index (named by the table's corner), a column per
    table column. A column with a number in any cell holds the numbers behind the cells (`Int64` when they are
    all whole, else float64; NaN where a cell has none: infeasible, failed, missing); a column without numbers
    holds the cells' text. `attrs` keeps the table's name, title, caption, footnotes and every cell's text."""
    pd = _pandas()
    rows = [cells for _, cells in table.rows]
    data = {}
    for i, name in enumerate(table.columns):
        cells = [row[i] for row in rows]
        values = [c.value for c in cells]
        known = [v for v in values if v is not None]
        if not known:
            data[name] = pd.array([c.text for c in cells], dtype="string")
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in known):
            data[name] = pd.array(values, dtype="Int64")
        else:
            data[name] = pd.array([float("nan") if v is None else float(v) for v in values], dtype="float64")
    out = pd.DataFrame(data, index=pd.Index([label for label, _ in table.rows], name=table.corner))
    out.attrs.update(name=table.name, title=table.title, caption=table.caption, footnotes=list(table.footnotes),
                     text=[[c.text for c in cells] for cells in rows])
    return out


# --- the plan ----------------------------------------------------------------------------------------------

PLAN_COLUMNS = (("key", ValueType.STR), ("ranks", ValueType.INT), ("threads_per_rank", ValueType.INT),
                ("local_batch", ValueType.INT), ("global_batch", ValueType.INT), ("cores", ValueType.INT),
                ("feasible", ValueType.BOOL), ("nodes", ValueType.INT), ("rank_memory_mib", ValueType.FLOAT),
                ("reason_codes", ValueType.STR), ("reasons", ValueType.STR))


@dataclass(frozen=True, slots=True)
class Plan:
    """What `orch plan` shows: every grid point of a sweep checked against a machine (`orch.plan`)."""

    plan: CorePlan = field(repr=False)   # the planner's own plan (internal: may change without notice)
    sweep_path: Path

    @property
    def name(self) -> str:
        return self.plan.spec.name

    @property
    def feasible(self) -> tuple[str, ...]:
        """The keys of the grid points that will run."""
        return tuple(p.trial.key for p in self.plan.feasible)

    @property
    def errors(self) -> tuple[str, ...]:
        """Why the sweep would be refused as planned (a backend or a precision that cannot run here)."""
        return self.plan.errors

    def to_dict(self) -> dict[str, object]:
        """Exactly what `orch plan --json` prints."""
        from orchestrator.core.planning.view import plan_to_dict

        return {**plan_to_dict(self.plan)}

    def to_frame(self) -> pd.DataFrame:
        """One row per grid point: its layout, whether it runs, on how many nodes, and why not."""
        rows = []
        for p in self.plan.trials:
            t = p.trial
            rows.append({"key": t.key, **t.layout(), "cores": t.ranks * t.threads_per_rank, "feasible": p.feasible,
                         "nodes": p.placement.nodes_used if p.placement is not None else None,
                         "rank_memory_mib": p.rank_memory_mib,
                         "reason_codes": ",".join(r.code for r in p.reasons) or None,
                         "reasons": "; ".join(r.message for r in p.reasons) or None})
        return frame(PLAN_COLUMNS, rows)

    def __repr__(self) -> str:
        return (f"Plan({self.name!r}: {len(self.plan.feasible)} of {len(self.plan.trials)} grid points feasible on "
                f"{self.plan.topology.describe()}; {len(self.plan.convergence)} convergence run(s))")


# --- a sweep's results -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Results:
    """A results folder (`orch.load`, or `orch.sweep` when it ends): its records, spec, topology and
    environment, as `orch report` reads them."""

    stored: StoredResults = field(repr=False)   # the store's own reading (internal)
    summary: SweepSummary | None = None         # set by `orch.sweep`: what that call ran

    @property
    def path(self) -> Path:
        return self.stored.path

    @property
    def name(self) -> str:
        return self.stored.spec.name

    @property
    def records(self) -> Records:
        """The typed records (a later record of a key replaces an earlier one, as every reader sees them)."""
        return self.stored.records

    @property
    def spec(self) -> SweepSpec:
        """The sweep as it ran (spec.json's `spec`), typed as a sweep file reads: `spec.grid.local_batch`,
        `spec.workload.params` (the workload's parameters by name, resolved when the sweep ran). A folder whose spec
        does not read as a sweep of this orch does not load (`NotAResultsFolder`, from `orch.load`)."""
        return self.stored.spec

    @property
    def topology(self) -> Topology | None:
        """The topology the sweep ran on (topology.json), typed; None where the folder holds none."""
        return self.stored.topology

    @property
    def environment(self) -> Environment:
        """What the sweep ran with (environment.json), typed: `cpu_model`, `torch`, `backend.chosen`,
        `precision.chosen`, ...; `to_json()` gives the file's object."""
        return self.stored.environment

    @property
    def warnings(self) -> tuple[str, ...]:
        """Lines of trials.jsonl that could not be read (a torn last line after a crash)."""
        return tuple(self.stored.errors)

    @property
    def failed(self) -> tuple[Record, ...]:
        """Records of trials that ran and did not end ok (failed, oom, timeout)."""
        return self.stored.records.failed()

    def to_frame(self, kind: str | None = None) -> pd.DataFrame:
        """One row per record (of `kind` only: throughput, convergence, peak or allreduce), typed columns."""
        return records_frame(r for r in self.records if kind is None or r.kind == kind)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The report's tables by name (scalability-b32, throughput-b32, convergence, time-to-train, ...): the
        numbers `orch report` writes as <name>.csv / <name>.json."""
        from orchestrator.app.report import analyzed

        return {t.name: table_frame(t) for t in analyzed(self.stored).tables()}

    def write_report(self, out_dir: str | Path | None = None,
                     formats: Sequence[str] = ("md", "csv", "json", "png")) -> list[Path]:
        """Write the report as `orch report` does (default folder: RESULTS/report, refused when it is a link:
        `orchestrator.report.build.LinkedReportFolder`, a ValueError); the files written."""
        from orchestrator.app.report import analyzed
        from orchestrator.report.build import report_folder, write_report

        return write_report(self.stored, analyzed(self.stored), report_folder(self.stored, out_dir), formats)

    def __repr__(self) -> str:
        counts = {s: sum(1 for r in self.records if r.status == s) for s in Status}
        said = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        return f"Results({self.name!r} in {self.path}: {len(self.records)} record(s){': ' + said if said else ''})"


# --- a prediction ------------------------------------------------------------------------------------------

PREDICTION_COLUMNS = tuple(
    [(n, ValueType.INT) for n in ("ranks", "threads_per_rank", "local_batch", "nodes", "global_batch",
                                   "ranks_per_socket")]
    + [(n, ValueType.STR) for n in ("link", "predictor")]
    + [(n, ValueType.FLOAT) for n in ("samples_per_s", "samples_per_s_low", "samples_per_s_high",
                                       "measured_samples_per_s", "epochs", "epochs_low", "epochs_high")]
    + [("epochs_status", ValueType.STR), ("p_converge", ValueType.FLOAT)]
    + [(n, ValueType.FLOAT) for n in ("hours", "hours_low", "hours_high", "node_hours", "runs_per_day")]
    + [(n, ValueType.STR) for n in ("marks", "flags", "no_interval", "notes")]
    + [(n, ValueType.FLOAT) for n in ("p_over_deadline", "p_over_deadline_fast", "p_over_deadline_slow",
                                       "b_crit", "b_crit_low", "b_crit_high", "b_simple", "b_simple_low",
                                       "b_simple_high", "epochs_a", "epochs_k", "edge_2_eps_max", "edge_b_noise")]
    + [(n, ValueType.STR) for n in ("b_crit_mode", "epochs_form", "epochs_lr_rule", "epochs_k_mode")])


@dataclass(frozen=True, slots=True)
class Prediction:
    """What `orch predict` shows: every feasible layout of a target predicted, with intervals and notes."""

    report: PredictionReport = field(repr=False)   # the prediction report (internal)

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.report.warnings

    @property
    def recommendation(self) -> dict[str, object] | None:
        """The recommended layout under a deadline or a node-hour budget, with the rule and the answer."""
        found = self.report.to_dict()["recommendation"]
        return None if found is None else dict(found)

    def to_dict(self) -> dict[str, object]:
        """Exactly what `orch predict --json` prints."""
        return dict(self.report.to_dict())

    def to_frame(self) -> pd.DataFrame:
        """One row per predicted layout: the layout, samples/s, epochs, hours and node-hours with their
        interval ends, the marks (fastest, Pareto, recommended), flags and notes; with a deadline, the chance of
        missing it (at the central samples/s and at the interval's fast and slow ends); and, the same on every
        row, the epochs model: its form (`epochs_form`: 'critical batch', or 'lr rule' where the records carry the
        sweep's learning-rate rule, with its A, k and how k was had), B_crit (the rule's form: B_noise; its 90%
        interval and how it was had) and B_simple's prior."""
        rows: list[dict[str, Value]] = []
        whole = self.report.to_dict()
        model = {k: v for k, v in _cells(whole["epochs_model"] or {}).items()
                 if k.startswith(("b_crit", "b_simple", "epochs_", "edge_"))
                 and k not in ("epochs_words", "edge_words")}
        for layout in whole["layouts"]:
            joined = {"marks": ",".join(layout["marks"]) or None, "flags": ",".join(layout["flags"]) or None,
                      "notes": "; ".join(layout["notes"]) or None}
            no_interval = layout.get("no_interval")
            rows.append({**_cells(layout), **joined, "no_interval": str(no_interval) if no_interval else None,
                         **model})
        return frame(PREDICTION_COLUMNS, rows)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The prediction's tables by name (prediction-model, prediction-validation, predictions, ...)."""
        return {t.name: table_frame(t) for t in self.report.tables()}

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write what `orch predict --out DIR` writes; the files written."""
        from orchestrator.report.prediction import write_prediction

        return write_prediction(self.report, Path(out_dir))


# --- a score -----------------------------------------------------------------------------------------------

SCORE_COLUMNS = tuple(
    [(n, ValueType.STR) for n in ("what", "label", "axes")]
    + [(n, ValueType.FLOAT) for n in ("doublings", "measured", "predicted", "low", "high", "error_pct")]
    + [("inside", ValueType.BOOL), ("width", ValueType.FLOAT), ("note", ValueType.STR)])


@dataclass(frozen=True, slots=True)
class Score:
    """What `orch score` shows: a saved prediction against results folders measured later."""

    report: ScoreReport = field(repr=False)   # the score (internal)

    def to_dict(self) -> dict[str, object]:
        """Exactly what `orch score --json` prints."""
        from orchestrator.report.score import score_dict

        return dict(score_dict(self.report))

    def to_frame(self) -> pd.DataFrame:
        """One row per scored prediction: what (samples/s, epochs, P(converge)), the layout or batch, the axes it
        lies beyond, measured, predicted, the interval, the error and whether it fell inside; a column per
        baseline (`baseline_<id>`) with its value."""
        rows: list[dict[str, Value]] = []
        for r in self.report.card.rows:
            rows.append({"what": r.what, "label": r.label, "axes": ",".join(r.axes), "doublings": r.doublings,
                         "measured": r.measured, "predicted": r.predicted, "low": r.low, "high": r.high,
                         "error_pct": r.error_pct, "inside": r.inside, "width": r.width, "note": r.note or None})
        return frame(SCORE_COLUMNS, rows)

    def axes(self) -> pd.DataFrame:
        """One row per axis: rows, the model's median and largest |error|, coverage, median width, and each
        baseline's median |error| (`<id>_median_abs_pct`)."""
        import pandas as pd

        out = []
        for a in self.report.card.axes:
            row: dict[str, object] = {"axis": a.axis, "rows": a.rows, "median_abs_pct": a.median_abs_pct,
                                      "max_abs_pct": a.max_abs_pct, "coverage": a.coverage,
                                      "median_width": a.median_width}
            row.update({f"{k}_median_abs_pct": m for k, (m, _) in a.baselines.items()})
            out.append(row)
        return pd.DataFrame(out)
