"""`orch predict`'s model plots: predicted throughput against cores and against ranks (lines with their
intervals as bands, the measured cells and the held-out predictions drawn over them), and epochs against the
global batch (the fitted curve with its band, the convergence or RCP points, pruned RCP points apart).

Every plotted series is taken from the report's own predictions and fits (the figures' lines carry a `gid`
naming what they show), so the plots say exactly what the tables say.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from orchestrator.core.predict.capacity import Prediction
from orchestrator.core.predict.validate import CELL_AXIS
from orchestrator.report.plots import _figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from orchestrator.core.predict.fit import Fitted


class PredictionReport(Protocol):
    """What the plots read of a prediction (report.prediction.PredictionReport, whose module imports this one:
    named here by what it holds, so the two modules do not import each other)."""

    @property
    def fitted(self) -> Fitted: ...
    @property
    def predictions(self) -> tuple[Prediction, ...]: ...
    @property
    def target_words(self) -> str: ...

EPOCHS_CURVE_POINTS = 60


@dataclass(frozen=True, slots=True)
class Series:
    gid: str                               # what the line shows, e.g. 'predicted-t28' or 'fastest-per-cores'
    label: str
    x: tuple[int, ...]
    rows: tuple[Prediction, ...]           # the predicted layouts plotted, in x order


def plotted_batch(report: PredictionReport) -> int:
    """The local batch the throughput plots show: the largest predicted one that was also measured (so the
    measured cells sit on the lines), else the largest predicted."""
    predicted = {p.layout.local_batch for p in report.predictions}
    measured = {c.layout.local_batch for c in report.fitted.cells} & predicted
    return max(measured or predicted)


def _packed(rows: Sequence[Prediction]) -> dict[tuple[int, int], Prediction]:
    """(ranks, threads) → the layout on the fewest nodes (the same ranks spread wider is another layout)."""
    out: dict[tuple[int, int], Prediction] = {}
    for p in sorted(rows, key=lambda p: p.layout.nodes, reverse=True):
        out[(p.layout.ranks, p.layout.threads)] = p
    return out


def throughput_series(report: PredictionReport) -> tuple[Series, list[Series]]:
    """(fastest layout per total core count, one line per threads per rank over ranks) at `plotted_batch`."""
    batch = plotted_batch(report)
    packed = _packed([p for p in report.predictions if p.layout.local_batch == batch])
    by_cores: dict[int, Prediction] = {}
    for p in packed.values():
        best = by_cores.get(p.layout.cores)
        if best is None or p.samples_per_s > best.samples_per_s:
            by_cores[p.layout.cores] = p
    cores = sorted(by_cores)
    fastest = Series("fastest-per-cores", "fastest layout per core count", tuple(cores),
                     tuple(by_cores[c] for c in cores))
    lines = []
    for t in sorted({t for _, t in packed}):
        ranks = sorted(r for r, tt in packed if tt == t)
        lines.append(Series(f"predicted-t{t}", f"{t} thread(s) per rank", tuple(ranks),
                            tuple(packed[(r, t)] for r in ranks)))
    return fastest, lines


def _line(ax: Axes, series: Series) -> None:
    values = [p.samples_per_s for p in series.rows]
    line = ax.plot(series.x, values, marker=".", label=series.label, gid=series.gid)[0]
    banded = [(x, p.samples_per_s_low, p.samples_per_s_high) for x, p in zip(series.x, series.rows)
              if p.samples_per_s_low is not None and p.samples_per_s_high is not None]
    if banded:
        ax.fill_between([b[0] for b in banded], [b[1] for b in banded], [b[2] for b in banded],
                        color=line.get_color(), alpha=0.15, linewidth=0, gid=f"{series.gid}-band")


def _measured(ax: Axes, report: PredictionReport, batch: int, x_of: str) -> None:
    """The measured cells at the plotted batch (black dots) and their leave-one-cell-out predictions (red ×)
    by the predictor used inside the data (the best on that scheme, as `bands.choose` picks it)."""
    cells = [c for c in report.fitted.cells if c.layout.local_batch == batch]
    if not cells:
        return
    x = [getattr(c.layout, x_of) for c in cells]
    ax.scatter(x, [c.samples_per_s for c in cells], color="black", zorder=3, s=18, label="measured", gid="measured")
    loo = next((r for r in report.fitted.validation if r.axis == CELL_AXIS), None)
    held = [h for h in (loo.held_out if loo else ()) if h.cell.layout.local_batch == batch]
    if loo is not None and held:
        used = loo.best()
        ax.scatter([getattr(h.cell.layout, x_of) for h in held], [h.predicted[used] for h in held], marker="x",
                   color="tab:red", zorder=4, s=24, label="held out (predicted without it)", gid="held-out")


def throughput_figure(report: PredictionReport) -> Figure | None:
    """samples/s against total cores (the fastest layout per core count) and against ranks (a line per
    threads per rank), both at one local batch, on the fewest nodes that host each layout."""
    if not report.predictions:
        return None
    fastest, lines = throughput_series(report)
    batch = plotted_batch(report)
    fig = _figure(10.0, 4.0)
    ax_c, ax_r = fig.subplots(1, 2)
    _line(ax_c, fastest)
    _measured(ax_c, report, batch, "cores")
    for series in lines:
        _line(ax_r, series)
    _measured(ax_r, report, batch, "ranks")
    for ax, xlabel in ((ax_c, "total cores (ranks × threads per rank)"), (ax_r, "ranks")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("samples/s")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Predicted throughput at local batch {batch} on {report.target_words}"[:120], fontsize=9)
    return fig


def epochs_grid(report: PredictionReport) -> list[int]:
    """Global batches the E(B) curve is drawn at: a log grid over the data and every predicted global batch,
    with the data's own batches in it (so the curve can be read off at each point)."""
    f = report.fitted
    batches = [p.global_batch for p in (*f.points, *f.pruned_points)] + [p.layout.global_batch
                                                                          for p in report.predictions]
    low, high = max(1, min(batches)), max(batches)
    grid = {round(low * (high / low) ** (i / (EPOCHS_CURVE_POINTS - 1))) for i in range(EPOCHS_CURVE_POINTS)}
    return sorted(grid | {p.global_batch for p in f.points})


def epochs_figure(report: PredictionReport) -> Figure | None:
    """epochs(B) with its band, the measured (or RCP) olympic means with their spread, pruned RCP points
    hollow, and the batches beyond the data shaded as extrapolation."""
    f, model = report.fitted, report.fitted.epochs_model
    if model is None:
        return None
    grid = epochs_grid(report)
    predicted = [model.predict(b) for b in grid]
    fig = _figure(6.4, 4.0)
    ax = fig.subplots()
    label = "fitted A·B/(ε(B)·D(B)), the sweep's rate rule" if model.rule is not None else "fitted E_min·(1 + B/B_crit)"
    ax.plot(grid, [model.curve(b) for b in grid], label=label, gid="epochs-fitted")
    band = [(b, e.low, e.high) for b, e in zip(grid, predicted) if e.low is not None and e.high is not None]
    if band:
        ax.fill_between([x[0] for x in band], [x[1] for x in band], [x[2] for x in band], alpha=0.2,
                        linewidth=0, label="band (1 sd in log)", gid="epochs-band")
    good = [p for p in f.points if p.converged]
    ax.errorbar([p.global_batch for p in good], [p.mean for p in good], yerr=[p.sd for p in good], fmt="o",
                color="black", capsize=2, label=f"olympic mean ± sd ({f.epochs_source})", gid="epochs-points")
    if f.pruned_points:
        ax.scatter([p.global_batch for p in f.pruned_points], [p.mean for p in f.pruned_points],
                   facecolors="none", edgecolors="gray", label="pruned by the RCP checker's rule", gid="epochs-pruned")
    if good:
        bottom, top = min(p.global_batch for p in good), max(p.global_batch for p in good)
        spans = [(lo, hi) for lo, hi in ((grid[0], bottom), (top, grid[-1])) if hi > lo]
        for i, (lo, hi) in enumerate(spans):
            ax.axvspan(lo, hi, color="tab:orange", alpha=0.08, label="extrapolated" if i == 0 else None)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("global batch")
    ax.set_ylabel("epochs to target")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    frozen = ((" (k frozen at 0)" if model.rule is not None else " (B_crit frozen at ∞)")
              if math.isinf(model.b_crit) else "")
    ax.set_title("Epochs to target against the global batch" + frozen, fontsize=9)
    return fig
