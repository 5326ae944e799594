"""Linear scaling, the naive baseline: the 1-rank, fewest-threads training cell at the nearest local batch, scaled
by cores (efficiency 1 at any size). Pure.

>>> from orchestrator.core.predict.predictors import Training
>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> cells = (Cell(Layout(1, 1, 8), 100.0), Cell(Layout(1, 2, 8), 160.0), Cell(Layout(1, 1, 32), 300.0))
>>> predict = PREDICTOR.fit(Training(cells, fit_step_model(cells, {}, [])))
>>> predict(Layout(2, 2, 8)), predict(Layout(1, 1, 64))      # 4 cores; the nearest batch's base stands in
(400.0, 300.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from orchestrator.core.predict.predictors import Training
from orchestrator.core.predict.step import Cell, Layout

LINEAR = "linear"


def base_cell(train: Sequence[Cell], local_batch: int) -> Cell | None:
    """The 1-rank, fewest-threads training cell at the local batch nearest (in log) to `local_batch`; None without
    a 1-rank cell. The baselines scale from it."""
    singles = [c for c in train if c.layout.ranks == 1]
    if not singles:
        return None
    fewest = min(c.layout.threads for c in singles)
    bases = [c for c in singles if c.layout.threads == fewest]
    return min(bases, key=lambda c: (abs(math.log(c.layout.local_batch / local_batch)), c.layout.local_batch))


def scaled_from_base(cells: Sequence[Cell], scale: Callable[[float, float], float]) -> Callable[[Layout], float]:
    """samples/s of a layout as `scale(base samples/s, its cores ÷ the base's)` from its base cell (nan without
    one): how both baselines predict, differing only in `scale`."""
    def samples_per_s(lay: Layout) -> float:
        base = base_cell(cells, lay.local_batch)
        if base is None:
            return math.nan
        return scale(base.samples_per_s, lay.cores / base.layout.cores)
    return samples_per_s


class LinearScaling:
    id = LINEAR
    label = "linear scaling"

    def fit(self, training: Training) -> Callable[[Layout], float]:
        return scaled_from_base(training.cells, lambda base, cores_ratio: base * cores_ratio)


PREDICTOR = LinearScaling()
