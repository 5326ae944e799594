"""The prediction's tables (`orchestrator.core.text.table.Table`), rendered like every report table. Pure.

A predicted value reads with its interval, or says it has none:

>>> _interval(72.1, 27.1, 103.2), _interval(3.36, None, None, "{:.2f}")
('72.1 [27.1–103.2]', '3.36 (no interval)')
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from orchestrator.core.predict.capacity import Prediction, Recommendation
from orchestrator.core.predict.comm import link_words
from orchestrator.core.predict.epochs import EXTRAPOLATED, MEASURED
from orchestrator.core.predict.fit import Fitted
from orchestrator.core.predict.predictors import ids, label
from orchestrator.core.predict.predictors.gemm_proxy import GEMM_PROXY
from orchestrator.core.predict.step import TIES
from orchestrator.core.predict.validate import MODEL, SchemeResult
from orchestrator.core.text.table import BEST, DASH, Cell, Footnotes, Table
from orchestrator.core.text.units import human_duration

_PARAM_WORDS = {"a_s": ("a", "s per step, fixed"), "c_s": ("c", "s per sample"),
                "sigma": ("σ", "serial fraction over threads (per-sample part)"),
                "sigma_a": ("σ_a", "serial fraction over threads (fixed part)"), "kappa": ("κ", "USL contention"),
                "mu": ("μ", "slow-down per extra rank on a socket"),
                "rho": ("ρ", "all-reduce in training ÷ as calibrated"), "gamma": ("γ", "compute ⊕ comm overlap norm")}


def model_table(f: Fitted) -> Table:
    rows = []
    for name, (symbol, meaning) in _PARAM_WORDS.items():
        # a parameter at its lower bound comes out of the solver as 1e-18 or so: round such dust to 0 so that
        # the table does not depend on the machine's floating-point path
        value = round(f.model.params[name], 12)
        why = f.model.frozen.get(name)
        how = "fitted" if why is None else f"{'tied' if name in TIES else 'frozen'}: {why}"
        rows.append((symbol, (Cell(f"{value:.4g}", value), Cell(meaning), Cell(how))))
    if f.links and f.model.buckets:
        comm = (f"comm from the all-reduce calibration over DDP's {len(f.model.buckets)} gradient bucket(s) "
                f"({sum(f.model.buckets) / 2**20:.2f} MiB)")
    else:
        comm = "comm not modelled (no all-reduce calibration or gradient sizes in the records)"
    caption = (f"Step time = ((a·U(T;σ_a) + c·b·U(T;σ))·(1 + μ(k−1)))^γ ⊕ (ρ·comm)^γ, fitted in log space to "
               f"{len(f.cells)} cells (rms log error {f.model.rms_log_error:.3f}); b local batch, T threads, "
               f"k ranks per socket; {comm}.")
    return Table(name="prediction-model", title="Prediction: fitted step-time model", corner="parameter",
                 columns=("value", "meaning", "how"), rows=tuple(rows), caption=caption)


def calibration_table(f: Fitted) -> Table:
    rows = []
    for link, fit in f.links.items():
        rows.append((link_words(link), (Cell(f"{fit.alpha_s * 1e6:.1f}", fit.alpha_s * 1e6),
                                        Cell(f"{fit.bandwidth_gb_per_s:.2f}", fit.bandwidth_gb_per_s),
                                        Cell(str(fit.points), fit.points),
                                        Cell(f"{100 * (math.exp(fit.rms_log_error) - 1):.1f}%",
                                             fit.rms_log_error))))
    caption = ("Ring all-reduce t = 2(n−1)·α + 2(n−1)/n·bytes·β fitted per link class to the calibration "
               "(4 KiB–64 MiB, every multi-rank count of the grid); bandwidth = 1/β.")
    return Table(name="allreduce-calibration", title="All-reduce calibration", corner="link",
                 columns=("α (µs)", "bandwidth (GB/s)", "points", "rms error"), rows=tuple(rows), caption=caption)


def _coverage_cells(r: SchemeResult, computed: bool) -> list[Cell]:
    """The printed estimate's error, the held-out cells inside their printed intervals, the median width."""
    printed, width = r.printed, r.median_width_pct
    if not computed or printed is None:
        return [Cell(DASH), Cell(DASH), Cell(DASH)]
    return [Cell(f"{printed.median_abs_pct:.1f}% / {printed.max_abs_pct:.1f}% ({printed.bias_pct:+.1f}%)",
                 printed.median_abs_pct),
            Cell(f"{r.inside}/{len(r.held_out)}", r.inside / len(r.held_out) if r.held_out else None),
            Cell(f"±{width / 2:.1f}%" if width is not None else DASH, width)]


def validation_table(f: Fitted) -> Table:
    rows = []
    predictors = ids()        # a column each, in the registry's order, headed by its label
    for r in f.validation:
        cells = []
        for p in predictors:
            s = r.scores[p]
            cells.append(Cell(f"{s.median_abs_pct:.1f}% / {s.max_abs_pct:.1f}%", s.median_abs_pct))
        model = r.scores[MODEL]
        best = min(predictors, key=lambda p: (r.scores[p].median_abs_pct if not math.isnan(r.scores[p].median_abs_pct)
                                               else math.inf))
        cells = [Cell(c.text, c.value, BEST if p == best else None) for c, p in zip(cells, predictors)]
        tau = f"{model.kendall_tau:.2f}" if model.kendall_tau is not None else DASH
        used = r.scores[r.best()]
        cells += [Cell(f"{model.bias_pct:+.1f}%", model.bias_pct), Cell(tau, model.kendall_tau),
                  Cell(f"{r.within_noise}/{len(r.held_out)}", r.within_noise),
                  Cell(f"{label(r.best())} ({used.bias_pct:+.1f}%)") if r.feeds_bands else Cell(DASH)]
        rows.append((r.scheme, tuple(cells + _coverage_cells(r, f.coverage))))
    median_cv = sorted(c.cv for c in f.cells)[len(f.cells) // 2] if f.cells else 0.0
    skipped = "".join(f" Not run: {s.scheme} ({s.why})." for s in f.skipped)
    coverage = ("'printed' is the error (median / max, and bias) of what `orch predict` prints for the held-out "
                "cells from the training cells alone (the predictor it would choose, bounded where an axis is left "
                "with one level), "
                "'inside' how many lie inside their printed interval, 'width' the median interval's half-width."
                if f.coverage else "'printed', 'inside' and 'width' need a prediction per held-out group: "
                                   "`orch predict --validate` and `orch report` compute them.")
    caption = ("Each scheme refits without its held-out cells and predicts them: median / max absolute % error of "
               "throughput for orch's model and two naive baselines on the same cells (best in bold); bias and "
               "Kendall τ of the ranking are orch's model's; 'within noise' counts held-out cells whose error is "
               f"no larger than their own repeats' CV (median CV of the cells: {100 * median_cv:.1f}%): noise, "
               "not model error. 'used' is the predictor `orch predict` uses for layouts beyond that level (the "
               f"best median here), with its bias. {coverage}{skipped}")
    return Table(name="prediction-validation", title="Prediction: held-out validation", corner="held out",
                 columns=(*map(label, predictors), "bias", "Kendall τ", "within noise", "used (bias)", "printed",
                          "inside", "width"),
                 rows=tuple(rows), caption=caption, key_columns=(label(MODEL), "printed", "inside", "width"))


def epochs_table(f: Fitted) -> Table:
    m = f.epochs_model
    rows = []
    held = {h.global_batch: h for h in f.epochs_validation}
    for p in f.points:
        h = held.get(p.global_batch)
        measured = Cell(f"{p.mean:.2f} ± {p.sd:.2f}", p.mean) if p.converged else Cell("did not converge")
        fitted = Cell(f"{m.curve(p.global_batch):.2f}", m.curve(p.global_batch)) if m else Cell(DASH)
        left_out = Cell(f"{h.predicted:.2f} ({h.error_pct():+.1f}%)", h.error_pct()) if h else Cell(DASH)
        rcp = Cell(f"{h.linear_interp:.2f} ({h.error_pct('rcp'):+.1f}%)", h.error_pct("rcp")) if h else Cell(DASH)
        rows.append((str(p.global_batch), (measured, fitted, left_out, rcp)))
    if m is None:
        caption = "No global batch converged: no epochs model."
    else:
        form = ("the form that knows the sweep's learning-rate rule" if m.rule is not None else
                "epochs(B) = E_min·(1 + B/B_crit), the sweep's learning-rate rule unknown")
        caption = (f"{form}, fitted to every converged seed ({f.epochs_source}): {m.words()}. 'left out' refits "
                   "without that global batch and predicts it; 'RCP rule' is MLPerf's checker's linear interpolation "
                   "between the others (flat beyond the ends).")
    return Table(name="prediction-epochs", title="Prediction: epochs to target", corner="global batch",
                 columns=("measured", "fitted", "left out", "RCP rule (left out)"), rows=tuple(rows), caption=caption)


def _interval(value: float, low: float | None, high: float | None, fmt: str = "{:,.1f}") -> str:
    if low is None or high is None:
        return f"{fmt.format(value)} (no interval)"
    return f"{fmt.format(value)} [{fmt.format(low)}–{fmt.format(high)}]"


def _num(value: float | None, fmt: str = "{:.4g}") -> Cell:
    return Cell(fmt.format(value), value) if value is not None else Cell(DASH)


def flags(p: Prediction) -> tuple[str, ...]:
    """Short machine-readable tags of a row (the notes say them in full)."""
    e = p.epochs
    out = [tag for tag, on in (
        ("extrapolated", bool(p.extrapolated)), ("far", any(w.startswith("far ") for w in p.extrapolated)),
        ("stand-in link", any("were not calibrated" in n for n in p.notes)),
        ("cpu assumed", any(n.startswith("CPU assumed") for n in p.notes)),
        ("cpu what-if", any(n.startswith("CPU what-if") for n in p.notes)),
        ("capped", any(n.startswith("capped") for n in p.notes)),
        ("baseline predictor", p.predictor not in (MODEL, GEMM_PROXY)),
        ("bounded", any(n.startswith("bounded (") for n in p.notes)),
        ("epochs extrapolated", e is not None and e.status == EXTRAPOLATED),
        ("no interval", bool(p.no_interval))) if on]
    return tuple(out)


def predictions_table(predictions: Sequence[Prediction], *, name: str = "prediction-layouts",
                      title: str = "Prediction: layouts", compact: bool = False) -> Table:
    """Every layout with its prediction; `compact` keeps the columns a terminal has room for. The full table
    also carries each interval's ends, the predictor, flags and notes as their own columns (CSV, JSON)."""
    notes = Footnotes()
    rows = []
    for p in predictions:
        lay = p.layout
        letters = f" {notes.letters(list(p.caveats))}" if p.caveats else ""
        measured = (Cell(f"{p.measured_samples_per_s:,.1f}", p.measured_samples_per_s) if p.measured_samples_per_s
                    else Cell(DASH))
        e = p.epochs
        if e is None:
            epochs = Cell(DASH)
        elif e.epochs is None:
            epochs = Cell(e.status)
        else:
            tag = "" if e.status == MEASURED else f" ({e.status})"
            epochs = Cell(f"{e.epochs:.2f}{tag}", e.epochs)
        hours = Cell(DASH)
        if p.hours is not None:
            hours = Cell(_interval(p.hours, p.hours_low, p.hours_high, "{:.3g}") + " h", p.hours,
                         BEST if "fastest" in p.marks else None)
        cells = [Cell(str(lay.nodes), lay.nodes), Cell(str(lay.global_batch), lay.global_batch),
                 Cell(_interval(p.samples_per_s, p.samples_per_s_low, p.samples_per_s_high) + letters, p.samples_per_s),
                 measured, epochs, hours, _num(p.node_hours, "{:.3g}"), _num(p.runs_per_day, "{:.3g}"),
                 Cell(", ".join(p.marks))]
        if not compact:
            cells += [Cell(label(p.predictor)), _num(p.samples_per_s_low), _num(p.samples_per_s_high),
                      _num(e.low if e else None), _num(e.high if e else None), _num(p.hours_low), _num(p.hours_high),
                      Cell(", ".join(flags(p))), Cell(" | ".join(p.caveats))]
        else:
            del cells[3]
            del cells[1]
        rows.append((f"{lay.ranks}×{lay.threads}×{lay.local_batch}", tuple(cells)))
    caption = ("Predicted samples/s with an interval from held-out errors (leave one cell out inside the measured "
               "range; beyond it the matching leave-one-level-out error times the distance in levels), the bootstrap "
               "spread of the fit and the cells' noise, by the predictor that validated best on the row's axes; where "
               "an axis has one measured level, from bounds instead (linear scaling at one end, the worst efficiency "
               "the measured cells and GEMM peaks allow at the other), the central estimate the GEMM peaks' scaling "
               "corrected by the measured step ÷ GEMM efficiency; the notes say what set each end; "
               "epochs from the epochs model; time-to-train = epochs × samples per epoch ÷ samples/s ÷ 3600 "
               "(interval from both); node-hours = hours × nodes; runs/day on the whole target. Lettered notes say "
               "where a prediction is extrapolated or rests on an assumption.")
    columns: tuple[str, ...] = ("nodes", "global batch", "samples/s [interval]", "measured", "epochs",
                                "time to train", "node-hours", "runs/day", "marks")
    if compact:
        columns = tuple(c for c in columns if c not in ("global batch", "measured"))
    else:
        columns += ("predictor", "samples/s low", "samples/s high", "epochs low", "epochs high", "hours low",
                    "hours high", "flags", "notes")
    return Table(name=name, title=title, corner="r×t×b", columns=columns, rows=tuple(rows),
                 footnotes=notes.lines(), caption=caption, key_columns=("samples/s [interval]", "time to train"))


def summary_predictions(predictions: Sequence[Prediction], rec: Recommendation | None) -> list[Prediction]:
    """What the terminal shows: fastest per node count, the Pareto set and the recommendation."""
    picked = rec.prediction if rec else None
    return [p for p in predictions if p.marks or p is picked]


def recommendation_lines(rec: Recommendation | None, predictions: Sequence[Prediction]) -> list[str]:
    lines = []
    timed = [p for p in predictions if p.hours is not None]
    if timed:
        fastest = min(timed, key=lambda p: p.hours or math.inf)
        lines.append(f"fastest: {fastest.layout.label} in {human_duration(fastest.hours or 0.0)} "
                     f"({fastest.node_hours:.3g} node-hours)")
    if rec is not None:
        lines.append(f"recommendation ({rec.rule}): {rec.why}")
    return lines
