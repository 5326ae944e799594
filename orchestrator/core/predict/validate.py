"""How good the predictions are, measured on cells the fit did not see, beside naive baselines.

Hold-out schemes (each refits from scratch without the held-out cells):
- leave one cell out: every measured cell in turn (interpolation);
- one level out: for ranks, threads and local batch, every level in turn: the largest (extrapolation one
  step beyond the data), the smallest (one step below it) and each one between (interpolation of a level);
  a level whose removal leaves no 1-rank cell to fit is skipped and said;
- all levels but one: on an axis with 3 levels or more, every level but the smallest held out together, as
  the first cells of a sweep leave it (the axis then has one measured level, which the prediction bounds);
- the multi-node cells, when present.

Every scored predictor (`predictors.validated()`: orch's model, then the baselines, by id) is fitted to the same
training cells and scored on the same held-out cells:
- linear: the 1-rank, fewest-threads cell at the nearest local batch, scaled by cores;
- Amdahl: the same base cell scaled by Amdahl's law in total cores, its serial fraction fitted to the
  training cells' speed-ups.

With a `Printer` (`interval.printed`), each held-out cell also gets what `orch predict` would print for it
from the training cells alone, central estimate and interval: the scheme then reports the printed estimate's
error, the share of held-out cells inside their printed intervals and the median interval width.

An error no larger than the held-out cell's own repeat CV is noise, not model error: counted apart.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from orchestrator.core.predict.comm import LinkFit
from orchestrator.core.predict.edge import EdgeCurve
from orchestrator.core.predict.epochs import BatchPoint, fit_epochs
from orchestrator.core.predict.noise_prior import BCritPrior
from orchestrator.core.predict.predictors import Training, ids, validated
from orchestrator.core.predict.predictors.amdahl import AMDAHL as AMDAHL
from orchestrator.core.predict.predictors.amdahl import amdahl_sigma as amdahl_sigma
from orchestrator.core.predict.predictors.linear import LINEAR as LINEAR
from orchestrator.core.predict.predictors.step_model import MODEL as MODEL
from orchestrator.core.predict.step import Cell, StepModel, fit_step_model

# MODEL, LINEAR, AMDAHL and amdahl_sigma are re-exported: the names callers and tests have always imported from here.


CELL_AXIS = "cell"     # leave one cell out: interpolation, no axis
RANKS, THREADS, BATCH, NODES = "ranks", "threads", "local batch", "nodes"
ABOVE, INSIDE, BELOW = 1, 0, -1           # where a held-out level lies against the levels left to train on
LEVEL, ALL_BUT_ONE, CELL_KIND = "level", "all but one", "cell"


@dataclass(frozen=True, slots=True)
class Scheme:
    name: str
    groups: tuple[tuple[Cell, ...], ...]      # each group is held out together
    axis: str = CELL_AXIS                      # RANKS, THREADS, BATCH, NODES or CELL_AXIS
    step_log2: float = 0.0                     # |log2(held-out level ÷ the nearest level left to train on)|
    direction: int = INSIDE                    # ABOVE, BELOW or INSIDE the levels left
    kind: str = CELL_KIND                      # CELL_KIND, LEVEL or ALL_BUT_ONE

    @property
    def key(self) -> tuple[str, int]:
        """What error band the scheme measures: (axis, direction); only single-level schemes at an end and
        leave one cell out feed the bands (`bands.ErrorBands`)."""
        return (self.axis, self.direction)


@dataclass(frozen=True, slots=True)
class Printed:
    """What `orch predict` prints for a cell: the central estimate, its interval (None, None when it has
    none) and the id of the predictor that gave it."""

    samples_per_s: float
    low: float | None
    high: float | None
    predictor: str
    no_interval: str = ""        # why low and high are None


@dataclass(frozen=True, slots=True)
class HeldOut:
    cell: Cell
    predicted: Mapping[str, float]            # predictor id → samples/s
    printed: Printed | None = None            # what `orch predict` prints from the training cells

    def value(self, predictor: str) -> float:
        """The predictor's samples/s for the cell, by its id (PRINTED: what `orch predict` prints; nan without
        it)."""
        if predictor == PRINTED:
            return self.printed.samples_per_s if self.printed else math.nan
        return self.predicted[predictor]

    def error_pct(self, predictor: str) -> float:
        return 100.0 * (self.value(predictor) - self.cell.samples_per_s) / self.cell.samples_per_s

    @property
    def within_noise(self) -> bool:
        return abs(self.error_pct(MODEL)) <= 100.0 * self.cell.cv

    @property
    def inside(self) -> bool | None:
        """The measured value inside the printed interval; None without one."""
        p = self.printed
        if p is None or p.low is None or p.high is None:
            return None
        return p.low <= self.cell.samples_per_s <= p.high

    @property
    def width_pct(self) -> float | None:
        """The printed interval's width over its central estimate, in %."""
        p = self.printed
        if p is None or p.low is None or p.high is None:
            return None
        return 100.0 * (p.high - p.low) / p.samples_per_s


PRINTED = "printed"       # the estimate `orch predict` prints (HeldOut.printed), scored like a predictor


@dataclass(frozen=True, slots=True)
class Score:
    median_abs_pct: float
    max_abs_pct: float
    bias_pct: float              # mean signed error: > 0 over-predicts
    kendall_tau: float | None    # rank agreement over the held-out cells; None for fewer than 3


@dataclass(frozen=True, slots=True)
class SchemeResult:
    scheme: str
    held_out: tuple[HeldOut, ...]
    scores: Mapping[str, Score]               # predictor id → its score
    axis: str = CELL_AXIS
    step_log2: float = 0.0
    direction: int = INSIDE
    kind: str = CELL_KIND
    printed: Score | None = None              # the printed estimate's; None when validated without a Printer

    @property
    def key(self) -> tuple[str, int]:
        return (self.axis, self.direction)

    @property
    def feeds_bands(self) -> bool:
        """Leave one cell out, a single level at an end of its axis, or the multi-node cells."""
        return self.kind == CELL_KIND or (self.kind == LEVEL and self.direction != INSIDE)

    def best(self) -> str:
        """The id of the predictor with the smallest median error here (orch's model on a tie: it knows the
        layout)."""
        order = ids()
        finite = [p for p in order if math.isfinite(self.scores[p].median_abs_pct)]
        return min(finite, key=lambda p: (self.scores[p].median_abs_pct, order.index(p)), default=MODEL)

    @property
    def within_noise(self) -> int:
        return sum(h.within_noise for h in self.held_out)

    @property
    def with_interval(self) -> int:
        return sum(h.inside is not None for h in self.held_out)

    @property
    def inside(self) -> int:
        return sum(bool(h.inside) for h in self.held_out)

    @property
    def median_width_pct(self) -> float | None:
        widths = [w for w in (h.width_pct for h in self.held_out) if w is not None]
        return statistics.median(widths) if widths else None


@dataclass(frozen=True, slots=True)
class Skipped:
    scheme: str
    why: str


def _level_schemes(cells: Sequence[Cell], axis: str, key: Callable[[Cell], int]) -> list[Scheme]:
    """Every level of one axis held out in turn, then every level but the smallest (3 levels or more)."""
    values = sorted({key(c) for c in cells})
    if len(values) < 2:
        return []
    out = []
    for i, level in enumerate(values):
        if i == len(values) - 1:
            name, direction, near = f"largest {axis} ({level:g})", ABOVE, values[i - 1]
        elif i == 0:
            name, direction, near = f"smallest {axis} ({level:g})", BELOW, values[1]
        else:
            name, direction = f"{axis} {level:g}", INSIDE
            near = min(values[i - 1], values[i + 1], key=lambda v: abs(math.log2(v / level)))
        out.append(Scheme(name, (tuple(c for c in cells if key(c) == level),), axis,
                          abs(math.log2(level / near)), direction, LEVEL))
    if len(values) >= 3:
        out.append(Scheme(f"{axis}: all but {values[0]:g}", (tuple(c for c in cells if key(c) != values[0]),),
                          axis, math.log2(values[1] / values[0]), ABOVE, ALL_BUT_ONE))
    return out


def schemes(cells: Sequence[Cell]) -> tuple[list[Scheme], list[Skipped]]:
    """The hold-out schemes these cells allow, and those skipped with the reason (a scheme whose training
    cells hold no 1-rank cell cannot be fitted)."""
    out = [Scheme("leave one cell out", tuple((c,) for c in cells))] if len(cells) > 1 else []
    out += _level_schemes(cells, RANKS, lambda c: c.layout.ranks)
    out += _level_schemes(cells, THREADS, lambda c: c.layout.threads)
    out += _level_schemes(cells, BATCH, lambda c: c.layout.local_batch)
    multi = tuple(c for c in cells if c.layout.nodes > 1)
    if multi and len(multi) < len(cells):
        single = max(c.layout.nodes for c in cells if c.layout.nodes == 1)
        out.append(Scheme("multi-node cells", (multi,), NODES,
                          math.log2(min(c.layout.nodes for c in multi) / single), ABOVE, LEVEL))
    kept, skipped = [], []
    for s in out:
        if s.kind != CELL_KIND and not any(c.layout.ranks == 1 for c in cells if c not in s.groups[0]):
            skipped.append(Skipped(s.name, "no 1-rank cell left to fit"))
        else:
            kept.append(s)
    return kept, skipped


def kendall_tau(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Kendall's τ-b of two rankings (ties counted as scipy.stats.kendalltau counts them, without importing
    scipy.stats, which costs `orch predict` half a second); None when either side is all ties or a value is
    not finite.

    >>> kendall_tau([1, 2, 3, 4], [10, 20, 40, 30]), kendall_tau([1, 2, 3], [3, 2, 1]), kendall_tau([1, 1], [1, 2])
    (0.6666666666666666, -1.0, None)
    """
    if not all(math.isfinite(v) for v in (*xs, *ys)):
        return None
    concordant = discordant = x_ties = y_ties = pairs = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            pairs += 1
            x_ties += dx == 0
            y_ties += dy == 0
            sign = dx * dy
            concordant += sign > 0
            discordant += sign < 0
    denominator = math.sqrt((pairs - x_ties) * (pairs - y_ties))
    return (concordant - discordant) / denominator if denominator > 0 else None


def _score(held: Sequence[HeldOut], predictor: str) -> Score:
    errors = [h.error_pct(predictor) for h in held]
    finite = [e for e in errors if math.isfinite(e)]
    if not finite:
        return Score(math.nan, math.nan, math.nan, None)
    tau = None
    if len(held) >= 3:
        tau = kendall_tau([h.value(predictor) for h in held], [h.cell.samples_per_s for h in held])
    return Score(statistics.median(abs(e) for e in finite), max(abs(e) for e in finite),
                 statistics.fmean(finite), tau)


# What `orch predict` prints for each held-out cell of a group, from the training cells alone (`interval.printer`):
# called with the training cells, the group, the scheme's fit to the training cells and every scheme's results
# without printed estimates (a nested validation may reuse them). Validation without one scores the predictors.
Printer = Callable[[Sequence[Cell], Sequence[Cell], StepModel, Sequence[SchemeResult]], Sequence[Printed]]


def scored(result: SchemeResult, held: Sequence[HeldOut]) -> SchemeResult:
    """`result` with these held-out cells, scored again."""
    printed = _score(held, PRINTED) if any(h.printed is not None for h in held) else None
    return replace(result, held_out=tuple(held), scores={p: _score(held, p) for p in ids()}, printed=printed)


def validate_step(cells: Sequence[Cell], links: Mapping[str, LinkFit], buckets: Sequence[int],
                  thread_prior: Mapping[int, float] | None = None, *, printer: Printer | None = None,
                  only: Callable[[Scheme], bool] | None = None) -> list[SchemeResult]:
    """Refit without each scheme's held-out cells and score every scored predictor on them; with a
    `printer`, also what `orch predict` prints for them (error, and whether the cell lies in its interval).
    `only` restricts the schemes run (a nested validation needs only the schemes its prediction uses)."""
    results: list[SchemeResult] = []
    fits: list[tuple[int, tuple[Cell, ...], list[Cell], StepModel]] = []
    for scheme in schemes(cells)[0]:
        if only is not None and not only(scheme):
            continue
        held: list[HeldOut] = []
        for group in scheme.groups:
            train = [c for c in cells if c not in group]
            model = fit_step_model(train, links, buckets, thread_prior)
            fits.append((len(results), group, train, model))
            training = Training(tuple(train), model)
            fitted = [(p.id, p.fit(training)) for p in validated()]
            held += [HeldOut(c, {name: predict(c.layout) for name, predict in fitted}) for c in group]
        results.append(scored(SchemeResult(scheme.name, (), {}, scheme.axis, scheme.step_log2, scheme.direction,
                                           scheme.kind), held))
    if printer is None:
        return results
    shown: list[list[Printed]] = [[] for _ in results]   # per scheme, in the order of its held-out cells
    for index, group, train, model in fits:
        shown[index] += printer(train, group, model, results)
    return [scored(r, [replace(h, printed=p) for h, p in zip(r.held_out, shown[i], strict=True)])
            for i, r in enumerate(results)]


@dataclass(frozen=True, slots=True)
class EpochsHeldOut:
    global_batch: int
    measured: float
    predicted: float
    linear_interp: float        # the RCP checker's rule: linear between neighbours, flat beyond the ends

    def error_pct(self, which: str = MODEL) -> float:
        value = self.predicted if which == MODEL else self.linear_interp
        return 100.0 * (value - self.measured) / self.measured


def rcp_interpolation(points: Sequence[BatchPoint], global_batch: int) -> float:
    """Epochs at a batch by linear interpolation of the olympic means, clamped at the ends.

    >>> pts = [BatchPoint(8, (2.0,)), BatchPoint(32, (5.0,))]
    >>> rcp_interpolation(pts, 16), rcp_interpolation(pts, 64)
    (3.0, 5.0)
    """
    xs = [p.global_batch for p in points]
    return float(np.interp(global_batch, xs, [p.mean for p in points]))


def validate_epochs(points: Sequence[BatchPoint], prior: BCritPrior | None = None,
                    edge: EdgeCurve | None = None) -> list[EpochsHeldOut]:
    """Leave one global batch out: refit without it (with B_simple's prior and the measured edge, where there are
    ones), predict it (needs 3 converged batches)."""
    good = [p for p in points if p.converged]
    if len({p.global_batch for p in good}) < 3:
        return []
    out = []
    for p in good:
        rest = [q for q in good if q is not p]
        model = fit_epochs(rest, prior, edge)
        out.append(EpochsHeldOut(p.global_batch, p.mean, model.curve(p.global_batch),
                                 rcp_interpolation(rest, p.global_batch)))
    return out


def epochs_growth(held: Sequence[EpochsHeldOut]) -> tuple[float | None, float | None]:
    """Log-error per doubling of the batch when the smallest / the largest batch is left out and predicted from
    the others: how fast the epochs model's error grows with distance beyond each end of the data.

    >>> h = [EpochsHeldOut(8, 2.0, 2.0, 2.0), EpochsHeldOut(16, 3.0, 3.0, 3.0), EpochsHeldOut(64, 8.0, 10.0, 3.0)]
    >>> below, above = epochs_growth(h)
    >>> below, round(above, 4)        # 64 is 2 doublings beyond 16; log(10/8) / 2
    (0.0, 0.1116)
    """
    if len(held) < 3:
        return None, None
    ordered = sorted(held, key=lambda h: h.global_batch)

    def rate(end: EpochsHeldOut, neighbour: EpochsHeldOut) -> float:
        return abs(math.log(end.predicted / end.measured)) / abs(math.log2(end.global_batch / neighbour.global_batch))

    return rate(ordered[0], ordered[1]), rate(ordered[-1], ordered[-2])
