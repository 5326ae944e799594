"""Which predictor a layout is predicted with, and its throughput interval: both from held-out errors.

For every way a layout lies outside the measured cells (an `Axis`: more ranks, more threads, a local batch
outside the range, more nodes, more ranks per socket) the matching leave-one-level-out scheme measured how
wrong each predictor was one level beyond the data. The layout is predicted with the predictor whose worst
median error over its axes is smallest (orch's model on a tie), inside the data with the leave-one-cell-out
winner. Its interval's half-width, in log space, is the sum over its axes of that predictor's max held-out
error scaled by the distance (in held-out levels, at least one), plus twice the spread of the bootstrap
refits (orch's model only), and never less than the cells' own repeat noise. Axes with no scheme of their own
borrow one and say so: nodes without a multi-node cell and ranks per socket both borrow the largest-ranks
error (both change only the communication and the sharing terms that scheme exercises). Pure.

>>> from orchestrator.core.predict.step import Cell, Layout
>>> cells = [Cell(Layout(r, t, b), 100.0) for r in (1, 2) for t in (1, 2) for b in (8, 16)]
>>> for axis in extrapolation_axes(Layout(8, 2, 64, nodes=2), cells):
...     print(f"{axis.name}: {axis.doublings:g} doubling(s), {axis.words}")
ranks: 2 doubling(s), far beyond the measured ranks (≤ 2)
nodes: 1 doubling(s), beyond the measured nodes (≤ 1)
local batch: 2 doubling(s), local batch outside the measured 8–16
>>> choose(ErrorBands(), extrapolation_axes(Layout(4, 1, 8), cells)).why   # nothing held out: said, not guessed
'no interval: no held-out error for the largest ranks (only one level measured)'
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.core.predict.step import Cell, Layout
from orchestrator.core.predict.validate import CELL_AXIS, MODEL, PREDICTORS, SchemeResult

RANKS, THREADS, BATCH, NODES, PER_SOCKET = "ranks", "threads", "local batch", "nodes", "ranks per socket"


@dataclass(frozen=True, slots=True)
class Axis:
    """One way a layout lies beyond the measured cells."""

    name: str
    scheme_axis: str          # the validation axis whose error applies
    doublings: float          # log2 distance beyond the measured limit
    words: str                # names the measured limit, so one footnote serves every layout beyond it
    proxy: str = ""           # why another axis's error stands in, when it does


def extrapolation_axes(lay: Layout, cells: Sequence[Cell]) -> list[Axis]:
    """The axes along which `lay` lies outside `cells`; 'far' marks more than twice the limit."""
    out = []
    multi_node = any(c.layout.nodes > 1 for c in cells)
    batches = [c.layout.local_batch for c in cells]

    def far(value: int, limit: int) -> str:
        return "far " if value > 2 * limit else ""

    for name, scheme, value, limit, what in (
            (RANKS, RANKS, lay.ranks, max(c.layout.ranks for c in cells), "ranks"),
            (THREADS, THREADS, lay.threads, max(c.layout.threads for c in cells), "threads per rank"),
            (NODES, NODES if multi_node else RANKS, lay.nodes, max(c.layout.nodes for c in cells), "nodes"),
            (PER_SOCKET, RANKS, lay.ranks_per_socket, max(c.layout.ranks_per_socket for c in cells),
             "ranks per socket")):
        if value > limit:
            proxy = "" if scheme == name else (f"no held-out level for {what}: the largest-ranks error stands in")
            out.append(Axis(name, scheme, math.log2(value / limit),
                            f"{far(value, limit)}beyond the measured {what} (≤ {limit})", proxy))
    if lay.local_batch > max(batches) or lay.local_batch < min(batches):
        end = max(batches) if lay.local_batch > max(batches) else min(batches)
        out.append(Axis(BATCH, BATCH, abs(math.log2(lay.local_batch / end)),
                        f"local batch outside the measured {min(batches)}–{max(batches)}"))
    return out


@dataclass(frozen=True, slots=True)
class ErrorBands:
    """The held-out results by axis, and the cells' own noise (log of 1 + the median repeat CV)."""

    results: Mapping[str, SchemeResult] = field(default_factory=dict)
    noise_log: float = 0.0

    @staticmethod
    def from_validation(results: Sequence[SchemeResult], cells: Sequence[Cell] = ()) -> ErrorBands:
        noise = statistics.median(c.cv for c in cells) if cells else 0.0
        return ErrorBands({r.axis: r for r in results}, math.log1p(max(noise, 0.0)))


@dataclass(frozen=True, slots=True)
class Choice:
    predictor: str
    width_log: float | None     # held-out part of the half-width; None when no honest one exists
    why: str                    # the choice in words, or why there is no interval


def choose(bands: ErrorBands, axes: Sequence[Axis]) -> Choice:
    """The predictor that validated best on the layout's axes, and the held-out part of its interval."""
    keys = list(dict.fromkeys(a.scheme_axis for a in axes)) or [CELL_AXIS]
    missing = [k for k in keys if k not in bands.results]
    if missing:
        what = "one cell held out" if missing == [CELL_AXIS] else " and ".join(f"the largest {k}" for k in missing)
        return Choice(MODEL, None, f"no interval: no held-out error for {what} (only one level measured)")

    def worst(p: str) -> float:
        values = [bands.results[k].scores[p].median_abs_pct for k in keys]
        return max(values) if all(math.isfinite(v) for v in values) else math.inf

    predictor = min(PREDICTORS, key=lambda p: (worst(p), PREDICTORS.index(p)))
    if axes:
        width = sum(math.log1p(bands.results[a.scheme_axis].scores[predictor].max_abs_pct / 100)
                    * max(1.0, a.doublings / max(bands.results[a.scheme_axis].step_log2, 1e-9)) for a in axes)
    else:
        width = math.log1p(bands.results[CELL_AXIS].scores[predictor].max_abs_pct / 100)
    schemes = ", ".join(bands.results[k].scheme for k in keys)
    why = (f"predicted by {predictor}: best held-out median error on {schemes} "
           f"({worst(predictor):.1f}% against orch model {worst(MODEL):.1f}%)") if predictor != MODEL else ""
    return Choice(predictor, width, why)
