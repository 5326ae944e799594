"""`orch score`'s output: a saved prediction against what ran, as tables (terminal at 80 columns, Markdown) and JSON."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypedDict

from orchestrator.core.json.values import JsonReadable
from orchestrator.core.predict.saved import BASELINE_WORDS
from orchestrator.core.predict.score import CONVERGENCE, EPOCHS, LATE, AxisScore, Row
from orchestrator.core.tabulate.throughput import format_quantity
from orchestrator.core.text.table import DASH, Cell, Table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from orchestrator.core.predict.score import ScoreReport

MODEL_COLUMN = "orch"


def num(value: float | None) -> str:
    """A measured or predicted figure at the precision a reader compares: 3 significant digits, no exponent.

    >>> num(1234.5), num(191.37), num(10.44), num(2.391), num(0.0123), num(None)
    ('1,234', '191', '10.4', '2.39', '0.0123', '–')
    """
    if value is None or not math.isfinite(value):
        return DASH
    return format_quantity(value)


def _pct(value: float | None, points: bool = False) -> str:
    if value is None:
        return DASH
    return f"{value:+.0f} pt" if points else f"{value:+.1f}%"


def _label(row: Row) -> str:
    if row.what == EPOCHS:
        return f"{row.label.replace('global batch ', 'B=')} epochs"
    if row.what == CONVERGENCE:
        return f"{row.label.replace('global batch ', 'B=')} P(conv)"
    if row.what == LATE:
        return f"{row.label.replace('global batch ', 'B=')} P(late)"
    return row.label.replace(" on ", " ").replace(" nodes", "n")


def rows_table(report: ScoreReport) -> Table:
    """Each prediction against its measurement."""
    rows = []
    for r in report.card.rows:
        conv = r.what in (CONVERGENCE, LATE)
        interval = "" if r.low is None or r.high is None else f" [{num(r.low)}–{num(r.high)}]"
        predicted = DASH if r.predicted is None else (f"{r.predicted:.2f}" if conv else num(r.predicted) + interval)
        inside = "yes" if r.inside else ("no" if conv or r.low is not None else "no interval")
        rows.append((_label(r), (Cell(f"{r.measured:.2f}" if conv else num(r.measured), r.measured),
                                 Cell(predicted, r.predicted), Cell(_pct(r.error_pct, conv), r.error_pct),
                                 Cell(inside))))
    caption = ("samples/s per layout (ranks×threads×local batch, n: nodes), epochs per global batch B where most seeds "
               "converged, P(converge) against the share of seeds that did, and P(late): the predicted chance of a "
               "time-to-train past the one that happened (covered between 0.05 and 0.95; errors in points)")
    return Table("score-rows", "Each prediction against what ran", "prediction", ("measured", "predicted [interval]",
                 "error", "inside"), tuple(rows), caption=caption, key_columns=("measured", "error"))


def axes_table(report: ScoreReport) -> Table:
    """Per axis: the model's error, its intervals' coverage and width, and the best baseline."""
    rows = []
    for a in report.card.axes:
        width = DASH if a.median_width is None else f"×{a.median_width:.2f}"
        inside = f"{a.inside}/{a.with_interval}" if a.with_interval else DASH
        rows.append((a.axis, (Cell(str(a.rows), a.rows), Cell(_abs(a.median_abs_pct), a.median_abs_pct),
                              Cell(_abs(a.max_abs_pct), a.max_abs_pct), Cell(inside, a.coverage), Cell(width,
                              a.median_width), Cell(_best(a)))))
    caption = ("per axis the rows lie beyond the prediction's inputs (a row beyond two counts in both): orch's median "
               "and largest |error|, the share inside its intervals, their median width (high ÷ low), and the naive "
               "baseline with the smallest median |error| on the same rows")
    return Table("score-axes", "Scored per axis", "axis", ("rows", "median", "max", "inside", "width",
                 "best baseline"), tuple(rows), caption=caption, key_columns=("median", "inside"))


def _abs(value: float | None, points: bool = False) -> str:
    return DASH if value is None else (f"{value:.0f} pt" if points else f"{value:.1f}%")


def _best(a: AxisScore) -> str:
    """The baseline with the smallest median |error|, and whether it beats the model."""
    if not a.baselines:
        return DASH
    name, (median, _) = min(a.baselines.items(), key=lambda kv: kv[1][0])
    verdict = " better" if a.median_abs_pct is not None and median < a.median_abs_pct else ""
    return f"{name} {median:.1f}%{verdict}"


def header_lines(report: ScoreReport) -> list[str]:
    """What was scored against what: the prediction's code and inputs, the folders, and what did not match."""
    s, card = report.saved, report.card
    p = s.provenance
    commit = (p.commit or "no commit")[:12] + (" (uncommitted changes)" if p.commit_dirty else "")
    lines = [f"prediction: {report.prediction_path}", f"  made {p.made_at} by orch {p.orch_version} at {commit}",
             f"  of {s.subject.workload} ({s.subject.precision})", f"  on {s.target_machine.words}",
             f"scored against: {', '.join(report.folders)}: {len(card.rows)} row(s)"]
    if card.not_measured:
        lines.append(f"  {card.not_measured} predicted layout(s) or batch(es) not measured there")
    if card.not_predicted:
        lines.append(f"  measured but not predicted: {', '.join(card.not_predicted[:8])}"
                     + (" …" if len(card.not_predicted) > 8 else ""))
    if report.changed_inputs:
        lines.append("  warning: input files changed since the prediction: " + ", ".join(report.changed_inputs))
    beaten = [(a.axis, a.beaten_by()) for a in card.axes if a.beaten_by()]
    for axis, names in beaten:
        lines.append(f"on {axis}, a naive baseline did better than orch:")
        lines += [f"  {n}: {BASELINE_WORDS.get(n, n)}" for n in names]
    return lines


def terminal_score(report: ScoreReport) -> list[RenderableType]:
    from rich.text import Text

    from orchestrator.report.render import to_rich

    parts: list[RenderableType] = [Text(line) for line in header_lines(report)]
    for table in (rows_table(report), axes_table(report)):
        parts += [Text(""), to_rich(table)]
    return parts


class RowFigures(TypedDict):
    what: str
    label: str
    axes: list[str]
    doublings: float
    measured: float
    predicted: float | None
    low: float | None
    high: float | None
    error_pct: float | None
    inside: bool
    width: float | None
    baselines: dict[str, float]
    baseline_error_pct: dict[str, float | None]
    note: str


class AxisFigures(TypedDict):
    axis: str
    rows: int
    median_abs_pct: float | None
    max_abs_pct: float | None
    inside: int
    with_interval: int
    coverage: float | None
    median_width: float | None
    unpredicted: int
    baselines: dict[str, dict[str, float]]
    beaten_by: list[str]


class ScoreFigures(TypedDict):
    """Exactly what `orch score --json` prints."""

    prediction: str
    provenance: dict[str, JsonReadable]
    folders: list[str]
    changed_inputs: list[str]
    not_measured: int
    not_predicted: list[str]
    rows: list[RowFigures]
    axes: list[AxisFigures]


def score_dict(report: ScoreReport) -> ScoreFigures:
    card = report.card
    p = report.saved.provenance
    return {"prediction": report.prediction_path,
            "provenance": {"orch_version": p.orch_version, "commit": p.commit, "commit_dirty": p.commit_dirty,
                           "made_at": p.made_at},
            "folders": list(report.folders), "changed_inputs": list(report.changed_inputs),
            "not_measured": card.not_measured, "not_predicted": list(card.not_predicted),
            "rows": [_row_dict(r) for r in card.rows], "axes": [_axis_dict(a) for a in card.axes]}


def _row_dict(r: Row) -> RowFigures:
    return {"what": r.what, "label": r.label, "axes": list(r.axes), "doublings": r.doublings, "measured": r.measured,
            "predicted": r.predicted, "low": r.low, "high": r.high, "error_pct": r.error_pct, "inside": r.inside,
            "width": r.width, "baselines": dict(r.baselines),
            "baseline_error_pct": {k: r.baseline_error_pct(k) for k in r.baselines}, "note": r.note}


def _axis_dict(a: AxisScore) -> AxisFigures:
    return {"axis": a.axis, "rows": a.rows, "median_abs_pct": a.median_abs_pct, "max_abs_pct": a.max_abs_pct,
            "inside": a.inside, "with_interval": a.with_interval, "coverage": a.coverage,
            "median_width": a.median_width, "unpredicted": a.unpredicted,
            "baselines": {k: {"median_abs_pct": m, "max_abs_pct": x} for k, (m, x) in a.baselines.items()},
            "beaten_by": a.beaten_by()}
