"""orch's step model as a predictor: the compute ⊕ communication fit of `step`, which knows the layout (ranks,
threads, local batch, links) where the baselines only count cores. Fitted once per set of training cells
(`Training.model`), so its fit here is only a lookup. Pure.

>>> from orchestrator.core.predict.predictors import Training
>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> cells = [Cell(Layout(1, 1, b), b / (0.01 + 0.002 * b)) for b in (8, 16, 32)]
>>> round(PREDICTOR.fit(Training(tuple(cells), fit_step_model(cells, {}, [])))(Layout(1, 1, 64)))
464
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.core.predict.predictors import Training
from orchestrator.core.predict.step import Layout

MODEL = "model"


class StepModelPredictor:
    id = MODEL
    label = "orch model"

    def fit(self, training: Training) -> Callable[[Layout], float]:
        return training.model.samples_per_s


PREDICTOR = StepModelPredictor()
