"""`orch predict` / `orch.predict`, whole: read the inputs (io), fit the step-time and epochs models (core), predict
every feasible layout of the target at each node count with intervals (core), recommend, and say what it was
made from (the saved part of prediction.json: inputs with their hashes, orch's commit). Imports neither torch nor
Ray; report/ only renders what this returns."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from orchestrator import __version__
from orchestrator.app.options import PredictOptions
from orchestrator.core.planning.plan import PlanTooLarge
from orchestrator.core.predict.artifact import cell_forecasts, epochs_forecasts, node_shapes
from orchestrator.core.predict.capacity import NoFeasibleLayout, Target, predict_layouts, recommend, why_nothing_fits
from orchestrator.core.predict.fit import Fitted, NotFittable, fit_all
from orchestrator.core.predict.saved import InputFolder, Machine, Provenance, SavedPrediction, Subject
from orchestrator.errors import InputError
from orchestrator.io.predict_inputs import PredictInputError, PredictInputs, read_inputs
from orchestrator.io.provenance import code_commit, folder_hashes, sha256_of
from orchestrator.report.prediction import PredictionReport


def predict(options: PredictOptions, *, command: Sequence[str] | None = None) -> PredictionReport:
    """The prediction `options` ask for. InputError for what cannot be read or predicted (PredictInputError,
    NoFeasibleLayout), and for a target and lists that make more layouts than one plan holds. `command`: the
    command line to record in the saved part (default: this process's)."""
    inputs = read_inputs(options)
    fitted = fit(inputs)
    try:
        report = predicted(inputs, fitted)
    except PlanTooLarge as bad:
        raise InputError(f"--nodes/--local-batch on this target: {bad}") from None
    return replace(report, saved=_saved(inputs, report, options, sys.argv if command is None else command))


def fit(inputs: PredictInputs, *, coverage: bool = False) -> Fitted:
    """Every model the inputs allow (`core.predict.fit.fit_all`); PredictInputError when the cells cannot support
    a step-time fit."""
    rcp = inputs.rcp
    try:
        return fit_all(inputs.results.records, extra_calibration=inputs.calibration,
                       rcp_points=None if rcp is None else rcp.points, rcp_source="" if rcp is None else rcp.source,
                       rcp_pruned=() if rcp is None else rcp.pruned, coverage=coverage)
    except NotFittable as err:
        raise PredictInputError(f"{inputs.results.path}: {err}") from None


def predicted(inputs: PredictInputs, f: Fitted) -> PredictionReport:
    """Every feasible layout of the target predicted and the recommendation; NoFeasibleLayout when the workload
    fits nowhere on it."""
    target = Target(inputs.topology, inputs.node_counts, inputs.local_batches, inputs.samples_per_epoch,
                    inputs.same_machine, inputs.machine)
    memory = inputs.memory          # the folder's recorded figures; unknown: no memory rule
    predictions = predict_layouts(target, inputs.spec, f.basis, f.epochs_model, memory.need_mib,
                                  inputs.ccl_available, memory.library_mib)
    if not predictions:
        raise NoFeasibleLayout(why_nothing_fits(target, inputs.spec, memory.need_mib, memory.library_mib))
    rec = recommend(predictions, deadline_h=inputs.deadline_h, budget_node_h=inputs.budget_node_h)
    if rec is not None and inputs.rcp_mismatch:   # said in the answer itself, not only in a warning above it
        rec = replace(rec, why=f"{rec.why}; and {inputs.rcp_mismatch}")
    return PredictionReport(f, target, tuple(predictions), rec, inputs.topology.describe(),
                            tuple(dict.fromkeys([*inputs.warnings, *f.warnings])), inputs.deadline_h,
                            inputs.sources)


def _saved(inputs: PredictInputs, report: PredictionReport, options: PredictOptions,
           command: Sequence[str]) -> SavedPrediction:
    """The scored part of the prediction: what it predicted, from what, by which code."""
    commit, dirty = code_commit()
    made_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    folders = [InputFolder(role="results", path=options.results, sha256=folder_hashes(inputs.results.path))]
    folders += [InputFolder(role="calibration", path=c, sha256=folder_hashes(Path(c))) for c in options.calibration]
    if options.rcp:
        folders.append(InputFolder(role="rcp", path=options.rcp, sha256={Path(options.rcp).name:
                                                                           sha256_of(Path(options.rcp))}))
    source = inputs.source_cpu
    source_precision = source.precision if source is not None else "fp32"
    params = dict(inputs.spec.workload.params)
    f = report.fitted
    return SavedPrediction(
        provenance=Provenance(orch_version=__version__, commit=commit, commit_dirty=dirty, made_at=made_at,
                              command=tuple(str(c) for c in command)),
        inputs=tuple(folders),
        subject=Subject(workload=inputs.workload, params=params, precision=inputs.machine.precision or
                        source_precision, source_precision=source_precision,
                        source_cpu=source.name if source is not None else "unknown"),
        target_machine=Machine(words=report.target_words, same_machine=inputs.same_machine,
                               node_groups=node_shapes(inputs.topology),
                               network=None if inputs.topology.link is None else dict(inputs.topology.link.to_dict()),
                               node_counts=inputs.node_counts, local_batches=inputs.local_batches),
        cells=cell_forecasts(report.predictions, f.basis, inputs.same_machine),
        epochs_by_batch=epochs_forecasts(report.predictions, f.epochs_model, f.points))
