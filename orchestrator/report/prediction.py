"""`orch predict`'s output: the prediction for a target, its tables (terminal, Markdown, CSV, JSON) and
plots (time-to-train and node-hours against nodes; throughput against cores and ranks and epochs against the
global batch, in `prediction_plots`; the all-reduce calibration with its fitted lines)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict, cast

from orchestrator.core.json.values import JsonReadable
from orchestrator.core.predict import tables as ptab
from orchestrator.core.predict.capacity import Prediction, Recommendation, Target
from orchestrator.core.predict.comm import link_words
from orchestrator.core.predict.deadline import DeadlineRisk, deadline_risk
from orchestrator.core.predict.fit import Fitted
from orchestrator.core.predict.predictors import label as predictor_label
from orchestrator.core.predict.predictors.step_model import MODEL
from orchestrator.core.predict.saved import SavedPrediction
from orchestrator.core.predict.saved import to_json as saved_to_json
from orchestrator.core.text.table import Table
from orchestrator.io.files import write_atomic
from orchestrator.report.plots import _figure, save
from orchestrator.report.prediction_plots import epochs_figure, throughput_figure
from orchestrator.report.render import to_csv, to_json, to_markdown, to_rich

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import RenderableType

MD_FILE = "prediction.md"


class EpochsModelFigures(TypedDict):
    """The epochs model's figures in `orch predict --json` (`epochs_model`)."""

    epochs_form: str
    epochs_words: str
    epochs_lr_rule: str | None
    epochs_a: float | None
    epochs_k: float | None
    epochs_k_mode: str | None
    e_min: float | None
    b_crit: float | None
    b_crit_low: float | None
    b_crit_high: float | None
    b_crit_mode: str
    b_crit_words: str
    b_crit_without_b_simple: float | None
    b_simple: float | None
    b_simple_low: float | None
    b_simple_high: float | None
    b_simple_runs: int | None
    eval_every_epochs: float | None
    edge_2_eps_max: float | None
    edge_b_noise: float | None
    edge_words: str | None


class LayoutFigures(TypedDict):
    """One predicted layout in `orch predict --json` (`layouts`)."""

    ranks: int
    threads_per_rank: int
    local_batch: int
    nodes: int
    global_batch: int
    ranks_per_socket: int
    link: str | None
    predictor: str
    samples_per_s: float
    samples_per_s_low: float | None
    samples_per_s_high: float | None
    measured_samples_per_s: float | None
    epochs: float | None
    epochs_low: float | None
    epochs_high: float | None
    epochs_status: str | None
    p_converge: float | None
    hours: float | None
    hours_low: float | None
    hours_high: float | None
    node_hours: float | None
    runs_per_day: float | None
    marks: list[str]
    flags: list[str]
    no_interval: str | None
    notes: list[str]
    p_over_deadline: float | None
    p_over_deadline_fast: float | None
    p_over_deadline_slow: float | None


class RecommendationFigures(TypedDict):
    """The recommended layout in `orch predict --json` (`recommendation`): the rule, the answer, the layout."""

    rule: str
    answer: str
    layout: str | None


class PredictionFigures(TypedDict):
    """Exactly what `orch predict --json` prints: the saved part first (`saved.SAVED_KEYS`, the contract `orch score`
    reads; docs/validation.md#the-saved-prediction), then the display part."""

    format: NotRequired[str]
    format_version: NotRequired[int]
    provenance: NotRequired[JsonReadable]
    inputs: NotRequired[JsonReadable]
    subject: NotRequired[JsonReadable]
    target_machine: NotRequired[JsonReadable]
    cells: NotRequired[JsonReadable]
    epochs_by_batch: NotRequired[JsonReadable]
    target: str
    node_counts: list[int]
    samples_per_epoch: int | None
    deadline_h: float | None
    epochs_model: EpochsModelFigures | None
    sources: list[str]
    recommendation: RecommendationFigures | None
    warnings: list[str]
    layouts: list[LayoutFigures]
    tables: list[dict[str, JsonReadable]]


@dataclass(frozen=True, slots=True)
class PredictionReport:
    fitted: Fitted
    target: Target
    predictions: tuple[Prediction, ...]
    recommendation: Recommendation | None
    target_words: str
    warnings: tuple[str, ...] = ()           # every warning: the inputs' and the fit's
    deadline_h: float | None = None
    sources: tuple[str, ...] = ()            # where each figure of time-to-train came from
    saved: SavedPrediction | None = None     # the scored part, written into prediction.json (`orch score`)

    def risk(self, p: Prediction) -> DeadlineRisk | None:
        """P(missing the deadline) of one layout, its epochs counted at the runs' evaluations (None: no deadline,
        or epochs without a band)."""
        if self.deadline_h is None:
            return None
        return deadline_risk(p.epochs, deadline_h=self.deadline_h, samples_per_epoch=self.target.samples_per_epoch,
                             samples_per_s=p.samples_per_s, samples_per_s_low=p.samples_per_s_low,
                             samples_per_s_high=p.samples_per_s_high, eval_every_epochs=self.fitted.eval_every_epochs)

    def epochs_lines(self) -> list[str]:
        """The epochs model in words: B_crit and where it came from (B_simple's prior, the epochs, or both), and
        the recommended layout's chance of missing the deadline."""
        m = self.fitted.epochs_model
        lines = [] if m is None else [f"epochs model: {m.words()}"]
        lines += list(self.sources)
        rec = self.recommendation
        risk = self.risk(rec.prediction) if rec is not None and rec.prediction is not None else None
        if risk is not None:
            lines.append(f"deadline: {rec.prediction.layout.label}: {risk.words()}")   # type: ignore[union-attr]
        return lines

    def tables(self) -> list[Table]:
        f = self.fitted
        out = [ptab.model_table(f)]
        if f.links:
            out.append(ptab.calibration_table(f))
        out.append(ptab.validation_table(f))
        if f.points:
            out.append(ptab.epochs_table(f))
        out.append(ptab.predictions_table(self.predictions))
        return out

    def to_dict(self) -> PredictionFigures:
        """The display part (`PredictionFigures`) after the saved part (`saved.SAVED_KEYS`), when there is one."""
        rec = self.recommendation
        shown: PredictionFigures = {
            "target": self.target_words, "node_counts": list(self.target.node_counts),
            "samples_per_epoch": self.target.samples_per_epoch, "deadline_h": self.deadline_h,
            "epochs_model": _epochs_model_dict(self.fitted), "sources": list(self.sources),
            "recommendation": None if rec is None else {
                "rule": rec.rule, "answer": rec.why,
                "layout": None if rec.prediction is None else rec.prediction.layout.label},
            "warnings": list(self.warnings),
            "layouts": [_layout_dict(p, self.risk(p)) for p in self.predictions],
            "tables": [t.to_dict() for t in self.tables()]}
        if self.saved is None:
            return shown
        return cast(PredictionFigures, {**saved_to_json(self.saved), **shown})


def _epochs_model_dict(f: Fitted) -> EpochsModelFigures | None:
    """The epochs model's figures: its form; E_min, or the rule's A and k; B_crit (the rule's form: B_noise) with
    its 90% interval and how it was had; and B_simple's prior."""
    m = f.epochs_model
    if m is None:
        return None
    finite = not math.isinf(m.b_crit)
    prior, rule = m.prior, m.rule
    # the rule's form: B_crit is its B_noise, and E_min (the epochs at the optimal rate) is not what it predicts
    return {"epochs_form": m.form, "epochs_words": m.words(),
            "epochs_lr_rule": None if rule is None else rule.scaling.rule,
            "epochs_a": None if rule is None else rule.a, "epochs_k": None if rule is None else rule.k,
            "epochs_k_mode": None if rule is None else rule.mode,
            "e_min": m.e_min if rule is None else None, "b_crit": m.b_crit if finite else None,
            "b_crit_low": m.b_crit_low if finite else None, "b_crit_high": m.b_crit_high if finite else None,
            "b_crit_mode": m.b_crit_mode, "b_crit_words": m.b_crit_words(),
            "b_crit_without_b_simple": m.data_only_b_crit,
            "b_simple": None if prior is None else prior.b_simple,
            "b_simple_low": None if prior is None else prior.measured_low,
            "b_simple_high": None if prior is None else prior.measured_high,
            "b_simple_runs": None if prior is None else prior.runs,
            "eval_every_epochs": f.eval_every_epochs,
            "edge_2_eps_max": None if m.edge is None else m.edge.edge2,
            "edge_b_noise": None if m.edge is None else m.edge.b_noise,
            "edge_words": None if m.edge is None else m.edge.agreement()}


def _layout_dict(p: Prediction, risk: DeadlineRisk | None = None) -> LayoutFigures:
    """One predicted layout with every figure as its own field (intervals included: never only in text)."""
    lay, e = p.layout, p.epochs
    return {"ranks": lay.ranks, "threads_per_rank": lay.threads, "local_batch": lay.local_batch, "nodes": lay.nodes,
            "global_batch": lay.global_batch, "ranks_per_socket": lay.ranks_per_socket, "link": lay.link,
            "predictor": predictor_label(p.predictor), "samples_per_s": p.samples_per_s,
            "samples_per_s_low": p.samples_per_s_low, "samples_per_s_high": p.samples_per_s_high,
            "measured_samples_per_s": p.measured_samples_per_s,
            "epochs": None if e is None else e.epochs, "epochs_low": None if e is None else e.low,
            "epochs_high": None if e is None else e.high, "epochs_status": None if e is None else e.status,
            "p_converge": None if e is None else e.p_converge,
            "hours": p.hours, "hours_low": p.hours_low, "hours_high": p.hours_high, "node_hours": p.node_hours,
            "runs_per_day": p.runs_per_day, "marks": list(p.marks), "flags": list(ptab.flags(p)),
            "no_interval": p.no_interval or None, "notes": list(p.caveats),
            "p_over_deadline": None if risk is None else risk.p_miss,
            "p_over_deadline_fast": None if risk is None else risk.p_miss_fast,
            "p_over_deadline_slow": None if risk is None else risk.p_miss_slow}


def _summary_table(report: PredictionReport) -> Table:
    shown = ptab.summary_predictions(report.predictions, report.recommendation)
    title = "Prediction: fastest per node count and the Pareto set (all layouts in the files)"
    return ptab.predictions_table(shown, name="prediction-summary", compact=True, title=title)


def terminal_prediction(report: PredictionReport, *, full_validation: bool = False) -> list[RenderableType]:
    from rich.text import Text

    f = report.fitted
    parts: list[RenderableType] = [Text(f"target: {report.target_words}", style="bold")]
    tables = [ptab.model_table(f)] + ([ptab.calibration_table(f)] if f.links else [])
    loo = next((r for r in f.validation if r.scheme == "leave one cell out"), None)
    if full_validation or loo is None:
        tables.append(ptab.validation_table(f))
    if f.points and full_validation:
        tables.append(ptab.epochs_table(f))
    tables.append(_summary_table(report))
    for table in tables:
        parts += [Text(""), to_rich(table)]
    if loo is not None and not full_validation:
        s = loo.scores[MODEL]
        parts.append(Text(f"\nheld-out error (leave one cell out, {len(loo.held_out)} cells): median "
                          f"{s.median_abs_pct:.1f}%, max {s.max_abs_pct:.1f}%; --validate shows every scheme and "
                          "the baselines"))
    parts += [Text(line) for line in report.epochs_lines()]
    parts += [Text(line, style="bold") for line in ptab.recommendation_lines(report.recommendation, report.predictions)]
    return parts


def write_prediction(report: PredictionReport, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []

    def put(name: str, text: str) -> None:
        write_atomic(out_dir / name, text, durable=False)   # never through a link, never torn
        written.append(out_dir / name)

    tables = report.tables()
    for table in tables:
        put(f"{table.name}.csv", to_csv(table))
        put(f"{table.name}.json", to_json(table))
    put("prediction.json", json.dumps(report.to_dict(), indent=2) + "\n")
    figures = {"prediction.png": time_figure(report), "prediction-throughput.png": throughput_figure(report),
               "prediction-epochs.png": epochs_figure(report), "allreduce.png": calibration_figure(report.fitted)}
    for name, fig in figures.items():
        if fig is not None:
            written.append(save(fig, out_dir / name))
    lines = [f"# Prediction for {report.target_words}", ""]
    lines += [f"- {w}" for w in report.warnings] + ([""] if report.warnings else [])
    lines += [f"- {line}" for line in report.epochs_lines()] + ([""] if report.epochs_lines() else [])
    lines += [f"**{line}**" for line in ptab.recommendation_lines(report.recommendation, report.predictions)] + [""]
    lines += [to_markdown(t) for t in tables]
    lines += [f"![{name}]({name})\n" for name in figures if (out_dir / name) in written]
    put(MD_FILE, "\n".join(lines))
    return written


def time_figure(report: PredictionReport) -> Figure | None:
    """Time-to-train and node-hours of the fastest layout per node count, with the interval as a band and
    measured layouts (throughput measured on this machine) drawn as separate points."""
    best = sorted((p for p in report.predictions if "fastest" in p.marks and p.hours is not None),
                  key=lambda p: p.layout.nodes)
    if not best:
        return None
    fig = _figure(9.0, 3.6)
    ax_t, ax_n = fig.subplots(1, 2)
    nodes = [p.layout.nodes for p in best]
    for ax, key, low, high, label in ((ax_t, "hours", "hours_low", "hours_high", "time to train (h)"),
                                      (ax_n, "node_hours", None, None, "node-hours")):
        values = [getattr(p, key) for p in best]
        ax.plot(nodes, values, marker="o", label="predicted (fastest layout)")
        if low and high:
            lows = [getattr(p, low) if getattr(p, low) is not None else v for p, v in zip(best, values)]
            highs = [getattr(p, high) if getattr(p, high) is not None else v for p, v in zip(best, values)]
            ax.fill_between(nodes, lows, highs, alpha=0.25, label="interval")
        measured = [(p.layout.nodes, getattr(p, key) * p.samples_per_s / p.measured_samples_per_s)
                    for p in report.predictions if p.measured_samples_per_s and getattr(p, key) is not None]
        if measured:
            ax.scatter([m[0] for m in measured], [m[1] for m in measured], marker="x", color="black", zorder=3,
                       label="measured throughput")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("nodes")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    ax_t.legend(fontsize=8)
    fig.suptitle(f"Predicted time to train on {report.target_words}"[:110], fontsize=9)
    return fig


def calibration_figure(f: Fitted) -> Figure | None:
    """All-reduce time against message size per link class and rank count, with the fitted ring model."""
    if not f.samples:
        return None
    import numpy as np

    fig = _figure(6.4, 4.0)
    ax = fig.subplots()
    groups = sorted({(s.link, s.ranks) for s in f.samples})
    for link, ranks in groups:
        pts = sorted((s.message_bytes, s.time_s) for s in f.samples if s.link == link and s.ranks == ranks)
        line = ax.plot([p[0] for p in pts], [p[1] * 1e3 for p in pts], "o", label=f"{link_words(link)}, {ranks} ranks")
        fit = f.links.get(link)
        if fit is not None:
            sizes = np.geomspace(pts[0][0], pts[-1][0], 50)
            ax.plot(sizes, [fit.allreduce_s(ranks, m) * 1e3 for m in sizes], "-", color=line[0].get_color(), alpha=0.7)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message (bytes)")
    ax.set_ylabel("all_reduce time (ms)")
    ax.set_title("All-reduce calibration: measured (points), fitted ring α-β (lines)", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return fig
