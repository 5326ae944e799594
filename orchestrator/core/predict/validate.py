"""How good the predictions are, measured on cells the fit did not see, beside naive baselines.

Hold-out schemes (each refits from scratch without the held-out cells):
- leave one cell out: every measured cell in turn (interpolation);
- leave one level out: all cells at the largest ranks, the largest threads, the largest local batch, and
  the multi-node cells when present (extrapolation one step beyond the data).

Baselines, fitted on the same training cells and scored on the same held-out cells:
- linear: the 1-rank, fewest-threads cell at the nearest local batch, scaled by cores;
- Amdahl: the same base cell scaled by Amdahl's law in total cores, its serial fraction fitted to the
  training cells' speed-ups.

An error no larger than the held-out cell's own repeat CV is noise, not model error: counted apart.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import kendalltau

from orchestrator.core.predict.comm import LinkFit
from orchestrator.core.predict.epochs import BatchPoint, fit_epochs
from orchestrator.core.predict.step import Cell, Layout, fit_step_model

MODEL, LINEAR, AMDAHL = "orch model", "linear scaling", "Amdahl (total cores)"
PREDICTORS = (MODEL, LINEAR, AMDAHL)


CELL_AXIS = "cell"     # leave one cell out: interpolation, no axis


@dataclass(frozen=True, slots=True)
class Scheme:
    name: str
    groups: tuple[tuple[Cell, ...], ...]      # each group is held out together
    axis: str = CELL_AXIS                      # 'ranks', 'threads', 'local batch', 'nodes' or CELL_AXIS
    step_log2: float = 0.0                     # log2(held-out level ÷ the largest level left to train on)


@dataclass(frozen=True, slots=True)
class HeldOut:
    cell: Cell
    predicted: Mapping[str, float]            # predictor → samples/s

    def error_pct(self, predictor: str) -> float:
        return 100.0 * (self.predicted[predictor] - self.cell.samples_per_s) / self.cell.samples_per_s

    @property
    def within_noise(self) -> bool:
        return abs(self.error_pct(MODEL)) <= 100.0 * self.cell.cv


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
    scores: Mapping[str, Score]
    axis: str = CELL_AXIS
    step_log2: float = 0.0

    def best(self) -> str:
        """The predictor with the smallest median error here (orch's model on a tie: it knows the layout)."""
        finite = [p for p in PREDICTORS if math.isfinite(self.scores[p].median_abs_pct)]
        return min(finite, key=lambda p: (self.scores[p].median_abs_pct, PREDICTORS.index(p)), default=MODEL)

    @property
    def within_noise(self) -> int:
        return sum(h.within_noise for h in self.held_out)


def schemes(cells: Sequence[Cell]) -> list[Scheme]:
    """The hold-out schemes these cells allow (a level with nothing left to train on is skipped)."""
    out = [Scheme("leave one cell out", tuple((c,) for c in cells))] if len(cells) > 1 else []
    levels: list[tuple[str, str, Callable[[Cell], float]]] = [
        ("largest ranks", "ranks", lambda c: c.layout.ranks),
        ("largest threads", "threads", lambda c: c.layout.threads),
        ("largest local batch", "local batch", lambda c: c.layout.local_batch)]
    for name, axis, key in levels:
        values = sorted({key(c) for c in cells})
        if len(values) > 1:
            top, below = values[-1], values[-2]
            out.append(Scheme(f"{name} ({top:g})", (tuple(c for c in cells if key(c) == top),), axis,
                              math.log2(top / below)))
    multi = tuple(c for c in cells if c.layout.nodes > 1)
    if multi and len(multi) < len(cells):
        single = max(c.layout.nodes for c in cells if c.layout.nodes == 1)
        out.append(Scheme("multi-node cells", (multi,), "nodes",
                          math.log2(min(c.layout.nodes for c in multi) / single)))
    return out


def _base(train: Sequence[Cell], local_batch: int) -> Cell | None:
    """The 1-rank, fewest-threads training cell at the local batch nearest (in log) to `local_batch`."""
    singles = [c for c in train if c.layout.ranks == 1]
    if not singles:
        return None
    fewest = min(c.layout.threads for c in singles)
    bases = [c for c in singles if c.layout.threads == fewest]
    return min(bases, key=lambda c: (abs(math.log(c.layout.local_batch / local_batch)), c.layout.local_batch))


def amdahl_sigma(train: Sequence[Cell]) -> float:
    """Serial fraction of Amdahl's law in total cores, fitted to the training cells' speed-ups over their
    base cell (bounded least squares on log speed-up)."""
    pairs = []
    for c in train:
        base = _base(train, c.layout.local_batch)
        if base is not None and c is not base and c.layout.cores != base.layout.cores:
            pairs.append((c.layout.cores / base.layout.cores, c.samples_per_s / base.samples_per_s))
    if not pairs:
        return 0.0
    n = np.array([p[0] for p in pairs])
    s = np.array([p[1] for p in pairs])
    result = least_squares(lambda x: np.log(1 / (x[0] + (1 - x[0]) / n)) - np.log(s), [0.1], bounds=([0.0], [1.0]))
    return float(result.x[0])


def baseline(train: Sequence[Cell], lay: Layout, sigma: float) -> tuple[float, float]:
    """(linear, Amdahl) predictions of a layout's samples/s from the training cells."""
    base = _base(train, lay.local_batch)
    if base is None:
        return math.nan, math.nan
    n = lay.cores / base.layout.cores
    return base.samples_per_s * n, base.samples_per_s / (sigma + (1 - sigma) / n)


def _score(held: Sequence[HeldOut], predictor: str) -> Score:
    errors = [h.error_pct(predictor) for h in held]
    finite = [e for e in errors if math.isfinite(e)]
    if not finite:
        return Score(math.nan, math.nan, math.nan, None)
    tau = None
    if len(held) >= 3:
        value = kendalltau([h.predicted[predictor] for h in held], [h.cell.samples_per_s for h in held]).statistic
        tau = None if value is None or math.isnan(value) else float(value)
    return Score(statistics.median(abs(e) for e in finite), max(abs(e) for e in finite),
                 statistics.fmean(finite), tau)


def validate_step(cells: Sequence[Cell], links: Mapping[str, LinkFit], buckets: Sequence[int],
                  thread_prior: Mapping[int, float] | None = None) -> list[SchemeResult]:
    """Refit without each scheme's held-out cells and score the model and both baselines on them."""
    results = []
    for scheme in schemes(cells):
        held: list[HeldOut] = []
        for group in scheme.groups:
            train = [c for c in cells if c not in group]
            model = fit_step_model(train, links, buckets, thread_prior)
            sigma = amdahl_sigma(train)
            for c in group:
                linear, amdahl = baseline(train, c.layout, sigma)
                held.append(HeldOut(c, {MODEL: model.samples_per_s(c.layout), LINEAR: linear, AMDAHL: amdahl}))
        results.append(SchemeResult(scheme.name, tuple(held), {p: _score(held, p) for p in PREDICTORS}, scheme.axis,
                                    scheme.step_log2))
    return results


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


def validate_epochs(points: Sequence[BatchPoint]) -> list[EpochsHeldOut]:
    """Leave one global batch out: refit without it, predict it (needs 3 converged batches)."""
    good = [p for p in points if p.converged]
    if len({p.global_batch for p in good}) < 3:
        return []
    out = []
    for p in good:
        rest = [q for q in good if q is not p]
        model = fit_epochs(rest)
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
