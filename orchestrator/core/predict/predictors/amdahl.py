"""Amdahl's law in total cores, the second baseline: linear scaling's base cell (`linear.base_cell`) sped up by
1 / (σ + (1 − σ) / n) for n times its cores, its serial fraction σ fitted to the training cells' speed-ups over
their own base cells. Pure.

>>> from orchestrator.core.predict.predictors import Training
>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> cells = (Cell(Layout(1, 1, 8), 100.0), Cell(Layout(1, 2, 8), 160.0), Cell(Layout(1, 1, 32), 300.0))
>>> round(amdahl_sigma(cells), 6)                   # 1 / (σ + (1 − σ) / 2) = 1.6
0.25
>>> round(PREDICTOR.fit(Training(cells, fit_step_model(cells, {}, [])))(Layout(2, 2, 8)), 2)   # 4 cores
228.57
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

from orchestrator.core.predict.predictors import Training
from orchestrator.core.predict.predictors.linear import base_cell, scaled_from_base
from orchestrator.core.predict.step import Cell, Layout

AMDAHL = "amdahl"


def amdahl_sigma(train: Sequence[Cell]) -> float:
    """Serial fraction of Amdahl's law in total cores, fitted to the training cells' speed-ups over their
    base cell (bounded least squares on log speed-up); computed once per set of cells."""
    return _amdahl_sigma(tuple(train))


@functools.lru_cache(maxsize=256)
def _amdahl_sigma(train: tuple[Cell, ...]) -> float:
    pairs = []
    for c in train:
        base = base_cell(train, c.layout.local_batch)
        if base is not None and c is not base and c.layout.cores != base.layout.cores:
            pairs.append((c.layout.cores / base.layout.cores, c.samples_per_s / base.samples_per_s))
    if not pairs:
        return 0.0

    def cost(sigma: float) -> float:
        return sum((-math.log(sigma + (1 - sigma) / n) - math.log(s)) ** 2 for n, s in pairs)
    return minimise_on_unit(cost)


def minimise_on_unit(cost: Callable[[float], float], grid: int = 64, tolerance: float = 1e-12) -> float:
    """The x in [0, 1] with the least cost: the best of a grid, then golden-section search between its
    neighbours (a one-parameter least squares without scipy's solver and its per-call overhead).

    >>> round(minimise_on_unit(lambda x: (x - 0.3) ** 2), 9), minimise_on_unit(lambda x: x)
    (0.3, 0.0)
    """
    xs = [i / grid for i in range(grid + 1)]
    best = min(range(len(xs)), key=lambda i: (cost(xs[i]), i))
    lo, hi = xs[max(best - 1, 0)], xs[min(best + 1, grid)]
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = cost(a), cost(b)
    while hi - lo > tolerance:
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = cost(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = cost(b)
    found = (lo + hi) / 2
    return min((found, xs[best]), key=lambda x: (cost(x), x))


class AmdahlTotalCores:
    id = AMDAHL
    label = "Amdahl (total cores)"

    def fit(self, training: Training) -> Callable[[Layout], float]:
        sigma = amdahl_sigma(training.cells)        # one least-squares fit per set of cells, not per layout
        return scaled_from_base(training.cells, lambda base, cores_ratio: base / (sigma + (1 - sigma) / cores_ratio))


PREDICTOR = AmdahlTotalCores()
