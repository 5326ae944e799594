"""`orch predict` / `orch.predict`: the step-time and epochs models fitted to a results folder, and every
feasible layout of a target topology predicted at each node count, with intervals from held-out error. Reads
records, fits, plans: imports neither torch nor Ray."""

from __future__ import annotations

from orchestrator.app.options import PredictOptions
from orchestrator.core.planning.plan import PlanTooLarge
from orchestrator.errors import InputError
from orchestrator.report.prediction import PredictionReport


def predict(options: PredictOptions) -> PredictionReport:
    """The prediction `options` ask for. InputError for what cannot be read or predicted (PredictInputError,
    NoFeasibleLayout), and for a target and lists that make more layouts than one plan holds."""
    from orchestrator.io.predict_inputs import load_inputs
    from orchestrator.report.prediction import prediction_report

    try:
        return prediction_report(load_inputs(options))
    except PlanTooLarge as bad:
        raise InputError(f"--nodes/--local-batch on this target: {bad}") from None
