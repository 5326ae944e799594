"""A toy baseline predictor, the one module a new baseline takes (tests/core/test_predictor_registry.py adds its
registration line): every layout runs as fast as the fastest training cell, whatever its cores."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.core.predict.predictors import Training
from orchestrator.core.predict.step import Layout

FASTEST = "fastest_cell"


class FastestCell:
    id = FASTEST
    label = "constant: the fastest training cell"

    def fit(self, training: Training) -> Callable[[Layout], float]:
        fastest_samples_per_s = max(c.samples_per_s for c in training.cells)
        return lambda lay: fastest_samples_per_s


PREDICTOR = FastestCell()
