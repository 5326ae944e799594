"""PNG plots of a report, drawn with matplotlib's object API on the Agg canvas.

No pyplot: it keeps global figure state and may pick an interactive backend; a `Figure` rendered by
`FigureCanvasAgg` needs no display, leaks nothing between calls and is safe inside `orch sweep`.
The PNGs carry no "Software" metadata so that the same results give the same bytes.

Each plot function returns None when it has no data, so a partial sweep gets only the plots it can fill.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.measured.convergence import BatchConvergence
from orchestrator.core.measured.records import Record
from orchestrator.core.tabulate.throughput import layout_label, samples_per_s, throughput_index
from orchestrator.core.tabulate.time_to_train import LayoutTime, fastest
from orchestrator.core.text.table import Table
from orchestrator.core.text.units import duration_unit, human_duration

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap
    from matplotlib.figure import Figure

DPI = 110
PNG_METADATA = {"Software": None}     # matplotlib writes its version here by default


def _figure(width_in: float, height_in: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def heatmap_figure(table: Table) -> Figure | None:
    """The normalized scalability table as a heat map: colour is the number, each cell keeps its text
    ('1.90', 'oom a', '– c') so the footnotes of the table still apply. Same orientation as the table."""
    import numpy as np

    values = np.array([[c.value if c.value is not None else np.nan for c in cells] for _, cells in table.rows],
                      dtype=float)
    if values.size == 0 or np.isnan(values).all():
        return None
    fig = _figure(1.6 + 1.1 * len(table.columns), 1.4 + 0.7 * len(table.rows))
    ax = fig.add_subplot()
    masked = np.ma.masked_invalid(values)
    cmap = _colormap("viridis").with_extremes(bad="#dddddd")    # cells without a number: grey
    image = ax.imshow(masked, cmap=cmap, aspect="auto")
    fig.colorbar(image, ax=ax, label="× baseline throughput")
    low, high = np.nanmin(values), np.nanmax(values)
    for i, (_, cells) in enumerate(table.rows):
        for j, cell in enumerate(cells):
            light = cell.value is not None and high > low and (cell.value - low) / (high - low) < 0.6
            ax.text(j, i, cell.text, ha="center", va="center", fontsize=9, color="white" if light else "black")
    ax.set_xticks(range(len(table.columns)), labels=table.columns)
    ax.set_yticks(range(len(table.rows)), labels=[label for label, _ in table.rows])
    ax.set_xlabel("ranks")
    ax.set_ylabel("threads per rank")
    # Wrapped to the figure's width: a small grid makes a narrow figure and a long title would be clipped.
    ax.set_title(textwrap.fill(table.title, width=max(28, int(fig.get_figwidth() * 11))), fontsize=9)
    return fig


def _colormap(name: str) -> Colormap:
    from matplotlib import colormaps

    return colormaps[name]


def throughput_figure(records: Iterable[Record]) -> Figure | None:
    """Samples/s versus total cores (ranks × threads), one line per thread count, one panel per local
    batch. Along a line only the rank count changes."""
    index = throughput_index(records)
    ok = {p: samples_per_s(r) for p, r in index.items() if samples_per_s(r)}
    if not ok:
        return None
    batches = sorted({p.local_batch for p in ok})
    fig = _figure(4.2 * len(batches), 3.6)
    axes = fig.subplots(1, len(batches), squeeze=False)[0]
    for ax, batch in zip(axes, batches):
        for threads in sorted({p.threads_per_rank for p in ok if p.local_batch == batch}):
            points = sorted((p.cores, sps) for p, sps in ok.items()
                            if p.local_batch == batch and p.threads_per_rank == threads)
            ax.plot([c for c, _ in points], [s for _, s in points], marker="o", label=f"{threads} thread(s)/rank")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("total cores (ranks × threads)")
        ax.set_ylabel("samples/s")
        ax.set_title(f"local batch {batch}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        _integer_ticks(ax, sorted({p.cores for p in ok if p.local_batch == batch}))
    fig.suptitle("Throughput versus total cores (more ranks along each line)", fontsize=10)
    return fig


def _integer_ticks(ax: Axes, ticks: Sequence[int]) -> None:
    ax.set_xticks(list(ticks), labels=[str(t) for t in ticks])
    ax.minorticks_off()


def convergence_figure(batches: Sequence[BatchConvergence]) -> Figure | None:
    """Epochs to target versus global batch: every seed as a dot, the olympic mean as a line with the SD
    as error bar, and seeds that did not converge as crosses at the epoch cap."""
    if not batches:
        return None
    fig = _figure(5.6, 3.8)
    ax = fig.add_subplot()
    seeds = [(b.global_batch, r.epochs) for b in batches for r in b.runs if r.epochs is not None]
    seeds_x, seeds_y = [x for x, _ in seeds], [y for _, y in seeds]
    ax.scatter(seeds_x, seeds_y, s=18, color="0.55", zorder=2, label="one seed")
    means = [(b, b.mean_epochs) for b in batches if b.mean_epochs is not None]
    if means:
        ax.errorbar([b.global_batch for b, _ in means], [mean for _, mean in means],
                    yerr=[b.sd_epochs or 0.0 for b, _ in means], marker="o", capsize=4, zorder=3,
                    label="olympic mean ± SD")
    failed = [(b.global_batch, r.max_epochs if r.max_epochs is not None else b.max_epochs or 0.0)
              for b in batches for r in b.runs if not r.converged]
    if failed:
        ax.scatter([x for x, _ in failed], [y for _, y in failed], marker="x", s=50, color="tab:red", zorder=4,
                   label="did not converge (at the epoch cap)")
    ax.set_xscale("log", base=2)
    _integer_ticks(ax, [b.global_batch for b in batches])
    ax.set_xlabel("global batch")
    ax.set_ylabel("epochs to target")
    ax.set_ylim(bottom=0)
    first = batches[0]
    target = f" ({first.metric} {first.target:g})" if first.metric is not None and first.target is not None else ""
    ax.set_title(f"Epochs to target{target} versus global batch", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def time_to_train_figure(times: Sequence[LayoutTime]) -> Figure | None:
    """Hours to train per layout as horizontal bars, fastest at the top; the fastest overall in colour."""
    timed = sorted((t for t in times if t.hours is not None), key=lambda t: t.hours or 0.0)
    if not timed:
        return None
    hours = [t.hours or 0.0 for t in timed]   # every one is set: filtered above
    overall, per_cores = fastest(timed)
    fig = _figure(6.0, 1.2 + 0.32 * len(timed))
    ax = fig.add_subplot()
    labels = [f"{layout_label(t.point)} ({t.cores} core{'s' if t.cores != 1 else ''})" for t in timed]
    colours = ["tab:green" if t is overall else "tab:blue" if per_cores.get(t.cores) is t else "0.65"
               for t in timed]
    # One unit for the whole axis, the one that reads best for the slowest layout (seconds for a toy
    # model, days for a full one): an axis of 0.000025 hours helps nobody.
    unit, factor = duration_unit(max(hours))
    bars = ax.barh(range(len(timed)), [h * factor for h in hours], color=colours)
    ax.bar_label(bars, labels=[human_duration(h) for h in hours], padding=3, fontsize=8)
    ax.margins(x=0.12)
    ax.set_yticks(range(len(timed)), labels=labels, fontsize=8)
    ax.invert_yaxis()
    left_out = len(times) - len(timed)
    names = {"s": "seconds", "min": "minutes", "h": "hours", "d": "days"}
    ax.set_xlabel(f"{names[unit]} to train" + (f" ({left_out} layout(s) without a time left out)" if left_out else ""))
    ax.set_title("Time to train per layout (ranks×threads×local batch)\n"
                 "green: fastest; blue: fastest for its core count", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def save(fig: Figure, path: Path) -> Path:
    """The figure as a PNG at `path`, written atomically (io.files.write_atomic: never through a link, never
    torn by a second writer)."""
    import io

    from orchestrator.io.files import write_atomic

    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=DPI, format="png", metadata=PNG_METADATA)
    write_atomic(path, buffer.getvalue(), durable=False)
    return path
