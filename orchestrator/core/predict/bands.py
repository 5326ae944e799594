"""Which predictor a layout is predicted with, and its throughput interval, from held-out errors.

For every way a layout lies outside the measured cells (an `Axis`: more ranks, more threads, a local batch
outside the range, more nodes, more ranks per socket, or more or fewer cores than any cell with every axis
inside its levels) the matching one-level-out scheme at that end (the largest level for a layout beyond it,
the smallest for one below) measured how wrong each predictor was one level beyond the data. The layout is
predicted with the predictor whose worst median error over its axes is smallest (orch's model on a tie),
inside the data with the leave-one-cell-out winner. Its interval's half-width, in log space, is the sum over
its axes of that predictor's max held-out error scaled by the distance (in held-out levels, at least one),
plus twice the spread of the bootstrap refits (orch's model, beyond the data), and never less than the
cells' own repeat noise. Axes with no scheme of their own borrow one and say so: nodes without a multi-node
cell and ranks per socket both borrow the largest-ranks error (both change only the communication and the
sharing terms that scheme exercises); nodes whose link is known (calibrated across nodes, or stated by
the target's topology) are costed from the link instead (`interval`, `network`). Where no scheme exists for an
axis (one measured level) `choose` says so and `interval` bounds the layout instead. Pure.

>>> from orchestrator.core.predict.step import Cell, Layout
>>> cells = [Cell(Layout(r, t, b), 100.0) for r in (1, 2) for t in (1, 2) for b in (8, 16)]
>>> for axis in extrapolation_axes(Layout(8, 2, 64, nodes=2), cells):
...     print(f"{axis.name}: {axis.doublings:g} doubling(s), {axis.words}")
ranks: 2 doubling(s), far beyond the measured ranks (≤ 2)
nodes: 1 doubling(s), beyond the measured nodes (≤ 1)
local batch: 2 doubling(s), local batch outside the measured 8–16
>>> choose(ErrorBands(), extrapolation_axes(Layout(4, 1, 8), cells)).why   # nothing held out: said, not guessed
'no held-out error for the largest ranks (one measured level)'
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.core.predict.predictors import ids, label
from orchestrator.core.predict.step import Cell, Layout
from orchestrator.core.predict.validate import (
    ABOVE,
    BELOW,
    CELL_AXIS,
    INSIDE,
    MODEL,
    SchemeResult,
)
from orchestrator.core.predict.validate import BATCH as BATCH_AXIS
from orchestrator.core.predict.validate import NODES as NODES_AXIS
from orchestrator.core.predict.validate import RANKS as RANKS_AXIS
from orchestrator.core.predict.validate import THREADS as THREADS_AXIS

RANKS, THREADS, BATCH, NODES, PER_SOCKET = RANKS_AXIS, THREADS_AXIS, BATCH_AXIS, NODES_AXIS, "ranks per socket"
CORES = "cores"          # ranks × threads outside the measured range, every axis inside its own
SchemeKey = tuple[str, int]          # (validation axis, ABOVE or BELOW); (CELL_AXIS, INSIDE) inside the data


@dataclass(frozen=True, slots=True)
class Axis:
    """One way a layout lies beyond the measured cells."""

    name: str
    scheme_axis: str          # the validation axis whose error applies
    doublings: float          # log2 distance beyond the measured limit
    words: str                # names the measured limit, so one footnote serves every layout beyond it
    proxy: str = ""           # why another axis's error stands in, when it does
    direction: int = ABOVE    # ABOVE the largest measured level, or BELOW the smallest

    @property
    def key(self) -> SchemeKey:
        return (self.scheme_axis, self.direction)


def extrapolation_axes(lay: Layout, cells: Sequence[Cell]) -> list[Axis]:
    """The axes along which `lay` lies outside `cells`, above the largest level or below the smallest;
    'far' marks more than twice (or under half) the limit."""
    out = []
    multi_node = any(c.layout.nodes > 1 for c in cells)

    def far(value: int, limit: int) -> str:
        return "far " if value > 2 * limit or 2 * value < limit else ""

    for name, scheme, value, levels, what in (
            (RANKS, RANKS, lay.ranks, [c.layout.ranks for c in cells], "ranks"),
            (THREADS, THREADS, lay.threads, [c.layout.threads for c in cells], "threads per rank"),
            (NODES, NODES if multi_node else RANKS, lay.nodes, [c.layout.nodes for c in cells], "nodes"),
            (PER_SOCKET, RANKS, lay.ranks_per_socket, [c.layout.ranks_per_socket for c in cells],
             "ranks per socket"),
            (BATCH, BATCH, lay.local_batch, [c.layout.local_batch for c in cells], "local batch")):
        low, high = min(levels), max(levels)
        if low <= value <= high or (name in (NODES, PER_SOCKET) and value < low):
            continue
        above = value > high
        limit = high if above else low
        proxy = "" if scheme == name else f"no held-out level for {what}: the largest-ranks error stands in"
        words = (f"{far(value, limit)}{'beyond' if above else 'below'} the measured {what} "
                 f"({'≤' if above else '≥'} {limit})")
        if name == BATCH:
            words = f"local batch outside the measured {low}–{high}"
        out.append(Axis(name, scheme, abs(math.log2(value / limit)), words, proxy, ABOVE if above else BELOW))
    cores = [c.layout.cores for c in cells]
    if not any(a.name in (RANKS, THREADS, NODES) for a in out) and not min(cores) <= lay.cores <= max(cores):
        # every axis inside its measured levels, but not this many cores (2×2 from 1×2 and 2×1, or 1×1 from
        # them): no scheme held out a core count, so the prediction is bounded (`interval`)
        above = lay.cores > max(cores)
        limit = max(cores) if above else min(cores)
        out.append(Axis(CORES, CORES, abs(math.log2(lay.cores / limit)),
                        f"{'beyond' if above else 'below'} the measured cores per layout ({'≤' if above else '≥'} "
                        f"{limit}), though within each axis's levels", "", ABOVE if above else BELOW))
    return out


@dataclass(frozen=True, slots=True)
class ErrorBands:
    """The held-out results by (axis, direction), and the cells' own noise (log of 1 + the median repeat CV)."""

    results: Mapping[SchemeKey, SchemeResult] = field(default_factory=dict)
    noise_log: float = 0.0

    @staticmethod
    def from_validation(results: Sequence[SchemeResult], cells: Sequence[Cell] = ()) -> ErrorBands:
        noise = statistics.median(c.cv for c in cells) if cells else 0.0
        return ErrorBands({r.key: r for r in results if r.feeds_bands}, math.log1p(max(noise, 0.0)))


@dataclass(frozen=True, slots=True)
class Choice:
    predictor: str              # its id (`predictors.label` prints it)
    width_log: float | None     # held-out part of the half-width; None when no held-out error covers the layout
    why: str                    # the choice in words, or which axis has no held-out level
    schemes: tuple[str, ...] = ()   # the schemes whose errors set the width


def needed(axes: Sequence[Axis]) -> list[SchemeKey]:
    """The held-out errors a layout beyond `axes` needs (leave one cell out inside the data)."""
    return list(dict.fromkeys(a.key for a in axes)) or [(CELL_AXIS, INSIDE)]


def choose(bands: ErrorBands, axes: Sequence[Axis], predictors: Sequence[str] | None = None) -> Choice:
    """The predictor (of the ids `predictors`; None: every scored one) that validated best on the layout's axes, and
    the held-out part of its interval; with no held-out error for one of its axes (one measured level), width None
    (`interval` then bounds it)."""
    order = ids()
    keys = needed(axes)
    missing = [k for k in keys if k not in bands.results]
    if missing:
        what = " and ".join("one cell held out" if k[0] == CELL_AXIS else
                            f"the {'largest' if k[1] == ABOVE else 'smallest'} {k[0]}" for k in missing)
        return Choice(MODEL, None, f"no held-out error for {what} (one measured level)")

    def worst(p: str) -> float:
        values = [bands.results[k].scores[p].median_abs_pct for k in keys]
        return max(values) if all(math.isfinite(v) for v in values) else math.inf

    predictor = min(order if predictors is None else predictors, key=lambda p: (worst(p), order.index(p)))
    if axes:
        width = sum(math.log1p(bands.results[a.key].scores[predictor].max_abs_pct / 100)
                    * max(1.0, a.doublings / max(bands.results[a.key].step_log2, 1e-9)) for a in axes)
    else:
        width = math.log1p(bands.results[keys[0]].scores[predictor].max_abs_pct / 100)
    schemes = tuple(bands.results[k].scheme for k in keys)
    why = (f"predicted by {label(predictor)}: best held-out median error on {', '.join(schemes)} "
           f"({worst(predictor):.1f}% against {label(MODEL)} {worst(MODEL):.1f}%)") if predictor != MODEL else ""
    return Choice(predictor, width, why, schemes)


def reach_note(bands: ErrorBands, axes: Sequence[Axis]) -> str:
    """How far the held-out errors reach, where a layout lies farther beyond the data than one held-out level: its
    band there is that level's error scaled by the distance, not an error measured so far out ("" otherwise)."""
    out = []
    for a in axes:
        reach = bands.results[a.key].step_log2 if a.key in bands.results else 0.0
        if reach > 0 and a.doublings > reach + 1e-9:
            out.append(f"{a.words}: {a.doublings:g} doubling(s) out, held-out errors measured {reach:g} out; the band "
                       "beyond is that error scaled by the distance")
    return "; ".join(out)
