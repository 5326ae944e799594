"""PNG plots of `orch profile`: stacked bars per target (oneDNN kinds, operator categories, layers), a
layer bar chart and a roofline per target. matplotlib's object API on the Agg canvas, as in plots.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.profile import analysis as pa
from orchestrator.core.profile.result import ProfiledTarget
from orchestrator.report.plots import _figure, save

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TOP_SEGMENTS = 9


def _save(fig: Figure, path: Path) -> Path:
    return save(fig, path)   # atomically, never through a link (report.plots.save)


def _stacked(values: Sequence[Mapping[str, float]], labels: Sequence[str], title: str, ylabel: str,
             path: Path, last: Sequence[str] = ()) -> Path:
    """One bar per target, one segment per key (the largest TOP_SEGMENTS keys; the rest merged)."""
    totals: dict[str, float] = {}
    for v in values:
        for k, x in v.items():
            totals[k] = max(totals.get(k, 0.0), x)
    ordered = [k for k in sorted(totals, key=lambda k: -totals[k]) if k not in last]
    keep = ordered[:TOP_SEGMENTS]
    merged = [{**{k: v.get(k, 0.0) for k in keep + list(last)},
               "rest": sum(x for k, x in v.items() if k not in keep and k not in last)} for v in values]
    keys = keep + (["rest"] if any(m["rest"] > 0 for m in merged) else []) + [k for k in last if k in totals]
    labels_for = {"rest": "rest (smaller segments)"}
    fig = _figure(max(5.0, 1.3 * len(values) + 4.5), 4.8)
    ax = fig.add_subplot()
    cmap = __import__("matplotlib").colormaps["tab20"]
    bottoms = [0.0] * len(values)
    for i, k in enumerate(keys):
        heights = [m.get(k, 0.0) for m in merged]
        color = "#999999" if k in last else "#dddddd" if k == "rest" else cmap(i % 20)
        ax.bar(range(len(values)), heights, bottom=bottoms, label=labels_for.get(k, k), color=color,
               edgecolor="white", linewidth=0.5)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    ax.set_xticks(range(len(values)), labels, rotation=20 if len(values) > 3 else 0)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def _layer_shares(t: ProfiledTarget) -> dict[str, float]:
    profiler = t.results[0].profiler
    step = profiler.coverage.step_ms
    out = {r.layer: 100 * (r.forward_ms + r.backward_ms) / step for r in profiler.layers}
    out["outside every layer"] = max(0.0, 100.0 - sum(out.values()))
    return out


def layer_bars(t: ProfiledTarget, path: Path, top: int = 15) -> Path:
    rows = pa.layers(t, top)[::-1]
    fig = _figure(8.0, 0.32 * len(rows) + 1.4)
    ax = fig.add_subplot()
    ys = range(len(rows))
    fwd = [r.forward_ms for r in rows]
    ax.barh(ys, fwd, label="forward", color="#4c72b0")
    ax.barh(ys, [r.backward_ms for r in rows], left=fwd, label="backward", color="#dd8452")
    ax.set_yticks(ys, [r.layer[-45:] for r in rows], fontsize=7)
    ax.set_xlabel("ms per step (rank 0, profiler pass)")
    ax.set_title(f"{t.label}: top layers, forward and backward", fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, path)


def roofline_plot(t: ProfiledTarget, path: Path) -> Path | None:
    points = pa.roofline_points(t)
    flop_points = [p for p in points if p.gflop_per_call > 0]
    r0 = t.results[0]
    if not flop_points or r0.peak is None:
        return None
    peak, bw = r0.peak.gflops, r0.stream_triad_gbs
    fig = _figure(7.0, 4.8)
    ax = fig.add_subplot()
    xs = [p.flop_per_byte for p in flop_points]
    lo, hi = min(xs + [peak / bw]) / 4, max(xs + [peak / bw]) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(peak, x * bw) for x in grid], color="black", linewidth=1.2,
            label=f"roof: peak {peak:.0f} GFLOP/s (best of GEMMs, convs), DRAM triad {bw:.1f} GB/s")
    for level, style in (("L3", "--"), ("L2", ":")):     # the cache levels' roofs, for working sets that fit
        gbs = next((r.gbs for r in r0.level_roofs or () if r.level == level and r.gbs), None)
        if gbs:
            ax.plot(grid, [min(peak, x * gbs) for x in grid], color="black", linewidth=0.8, linestyle=style,
                    label=f"{level} roof, triad {gbs:.0f} GB/s (working sets that fit in {level})")
    kinds = sorted({(p.kind, p.direction) for p in flop_points})
    for kind in kinds:
        sel = [p for p in flop_points if (p.kind, p.direction) == kind]
        sizes = [max(8.0, 300 * p.ms_per_call * p.calls / max(q.ms_per_call * q.calls for q in flop_points))
                 for p in sel]
        ax.scatter([p.flop_per_byte for p in sel], [p.achieved_gflops for p in sel], s=sizes, alpha=0.6,
                   label=" ".join(k for k in kind if k != "undef"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, lower bound on traffic)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"{t.label}: oneDNN primitives on the roofline (marker area ∝ time per step)", fontsize=10)
    ax.legend(fontsize=7)
    return _save(fig, path)


def write_plots(ok: Sequence[ProfiledTarget], out: Path) -> list[tuple[Path, str]]:
    labels = [t.label for t in ok]
    plots = [
        (_stacked([pa.onednn_breakdown(t) for t in ok], labels, "oneDNN primitives per step (rank 0, verbose pass)",
                  "ms per step", out / "onednn-breakdown.png", last=(pa.OUTSIDE_ONEDNN,)),
         "oneDNN primitive breakdown"),
        (_stacked([pa.categories(t) for t in ok], labels, "operator categories per step (rank 0, profiler self time)",
                  "ms per step", out / "categories.png", last=(pa.OTHER,)), "operator categories"),
        (_stacked([_layer_shares(t) for t in ok], labels, "layers' share of the step (forward + backward, rank 0)",
                  "% of profiled step", out / "layers.png", last=("outside every layer",)), "layer shares"),
    ]
    for t in ok:
        plots.append((layer_bars(t, out / f"layers-{t.label}.png"), f"{t.label} top layers"))
        roof = roofline_plot(t, out / f"roofline-{t.label}.png")
        if roof is not None:
            plots.append((roof, f"{t.label} roofline"))
    return plots
