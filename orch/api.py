"""orch from a notebook or a script: the use-cases behind `orch plan`, `orch sweep`, `orch report` and
`orch predict`, returning typed results instead of printing them. The commands and these functions are two thin
doors over the same layer (`orchestrator.app`), taking the same options objects, so both give the same answers.

    import orch

    plan = orch.plan("sweeps/classifier.yaml")            # orch plan: no Ray, no rank (imports the workload)
    plan.to_frame()                                        # one row per grid point, feasible or why not
    results = orch.sweep("sweeps/classifier.yaml", mlflow="http://127.0.0.1:5000")   # orch sweep
    results = orch.sweep(orch.SweepOptions(sweep="sweeps/classifier.yaml", max_concurrent=1))   # the same object
    results = orch.load("results/classifier")              # a folder written earlier, finished or partial
    df = results.to_frame()                                # one row per record, typed columns
    df[df.kind == "throughput"].pivot_table(index="threads_per_rank", columns="ranks", values="samples_per_s")
    results.tables()["scalability-b32"]                    # the report's tables, as DataFrames
    orch.predict("results/classifier", nodes=[1, 2, 4]).to_frame()                   # orch predict
    orch.score("plans/cluster/prediction.json", "results/on-the-cluster").axes()      # orch score

Each function takes its command's options object (`orch.PlanOptions`, `orch.SweepOptions`,
`orch.PredictOptions`, `orch.TrackOptions`: every field documented there, with the flag that gives it on the
command line), or the first argument and keyword arguments that build one; an unknown keyword is a TypeError
that lists every option with its default.

Errors: every error orch raises on purpose is an `orch.OrchError`. Bad input is an `orch.InputError` (a
ValueError) whose message is what the command prints before exiting with status 2 (a sweep file's problems are
listed all at once); a run that could not finish (a full disk) is an `orch.RunFailed` (a RuntimeError), status 1.
What a sweep says as it goes (what runs where, the time it expects) is logged at INFO by the `orch.api` logger,
or handed to `notify` (an `orch.Notice` each); warnings go through `logging`. Ctrl-C (a notebook's interrupt)
stops a sweep's running trials, keeps what was recorded and re-raises KeyboardInterrupt; calling `orch.sweep`
again resumes. docs/python-api.md has the details.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from orch.results import Plan, Prediction, Results, Score
from orchestrator.app.notices import Notice, Notify, to_log
from orchestrator.app.options import PlanOptions, PredictOptions, ScoreOptions, SweepOptions, TrackOptions, options_of
from orchestrator.errors import InputError, OrchError, RunFailed

__all__ = ["InputError", "Notice", "OrchError", "RunFailed", "load", "plan", "predict", "results_folder", "score",
           "sweep", "track"]

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)
OptionsT = TypeVar("OptionsT", bound="DataclassInstance")
PathLike = str | os.PathLike[str]


def _options(cls: type[OptionsT], first: str, given: PathLike | OptionsT, more: dict[str, object]) -> OptionsT:
    """`given` if it is an options object already (with `more` replacing its fields), else `cls` built from
    `first=given` and `more`."""
    if isinstance(given, cls):
        if not more:
            return given
        fields = {f.name: getattr(given, f.name) for f in dataclasses.fields(cls)}
        return options_of(cls, {**fields, **more})
    return options_of(cls, {first: given, **more})


def plan(sweep: PathLike | PlanOptions, **options: object) -> Plan:
    """`orch plan`: the sweep file's grid checked against a machine (`topology`: a topology file, default this
    one). Starts no Ray, no rank and no torch, but imports the workload's module and calls its factory, as
    `orch sweep` does (a sweep file is code: docs/trust.md). `Plan.errors` says why `orch sweep` would refuse
    it. Options: `orch.PlanOptions`."""
    from orchestrator.app.plan import plan as plan_of

    chosen = _options(PlanOptions, "sweep", sweep, options)
    return Plan(plan_of(chosen), Path(chosen.sweep))


def load(folder: PathLike) -> Results:
    """A results folder written by `orch sweep`, finished or partial (what `orch report` reads)."""
    from orchestrator.app.report import load as load_folder

    return Results(load_folder(os.fspath(folder)))


def results_folder(sweep_name: str) -> Path:
    """Where a sweep's results go without `results=`: $ORCH_RESULTS (default `results`) / the sweep's name."""
    from orchestrator.app.sweep import results_folder as folder_of

    return folder_of(sweep_name)


def sweep(sweep: PathLike | SweepOptions, *, notify: Notify | None = None, **options: object) -> Results:
    """`orch sweep`: run every feasible grid point of the sweep file as a pinned torch.distributed job on Ray,
    recording each trial as it ends into `results` (default: `results_folder(name)`), resuming what the folder
    holds already (`rerun=True` runs recorded trials again), then writing the report (`report=False`: not).
    Options: `orch.SweepOptions` (topology, address, min_nodes, max_concurrent, mlflow, tensorboard, trackers,
    budget_s, target_width, ...). A tracking server that is down fails nothing: it is said once, and
    `orch.track` catches up later. `notify` hears what the sweep says as it goes (default: logged at INFO).

    Returns the folder's results, with `summary` saying what this call ran and which trials failed."""
    from orchestrator.app.sweep import sweep as run_sweep

    chosen = _options(SweepOptions, "sweep", sweep, options)
    if chosen.replay is not None:
        raise InputError("replay: `orch sweep SWEEP --replay FOLDER` replays the adaptive policy on a folder; "
                         "orch.sweep runs trials")
    swept = run_sweep(chosen, notify or to_log(log))
    return Results(swept.results, swept.summary)


def track(folder: PathLike | TrackOptions, **options: object) -> bool:
    """Log a finished or partial results folder after the fact (`orch report --mlflow / --tensorboard /
    --track`): what a sweep could not log as it ran, into the same MLflow parent run and TensorBoard folder,
    duplicating nothing; and the report's files. `mlflow`: a tracking URI, or True for $MLFLOW_TRACKING_URI
    (else MLflow's default); never the URI the folder's spec.json names (docs/trust.md). Options:
    `orch.TrackOptions`. True when every tracker logged everything; a failure is said as a warning."""
    from orchestrator.app.report import track as track_folder

    return track_folder(_options(TrackOptions, "folder", folder, options))


def predict(folder: PathLike | PredictOptions, **options: object) -> Prediction:
    """`orch predict`: fit the step-time and epochs models to a results folder and predict every feasible
    layout of `topology` (default: the machine the sweep ran on) at each of `nodes`, for each of `local_batch`
    (default: the sweep's), with intervals from held-out error; `rcp` (an MLPerf RCP file) stands in for the
    convergence runs; `calibration` adds other folders' all-reduce timings; `deadline_h` or `budget_node_h`
    picks the recommendation. Options: `orch.PredictOptions`. Imports neither torch nor Ray."""
    from orchestrator.app.predict import predict as predict_from

    return Prediction(predict_from(_options(PredictOptions, "results", folder, options)))


def score(prediction: PathLike | ScoreOptions, *results: PathLike) -> Score:
    """`orch score`: a saved prediction (the prediction.json `orch predict --out DIR` or `Prediction.write(DIR)`
    wrote, or DIR) scored against results folders measured later: per row measured, predicted, interval, error,
    inside; per axis the error, coverage and width beside the naive baselines. A folder that measured another
    workload, parameters, precision or machine is an InputError naming every difference. Options:
    `orch.ScoreOptions`. Imports neither torch nor Ray."""
    from orchestrator.app.score import score_prediction

    if isinstance(prediction, ScoreOptions):
        if results:
            raise TypeError("give the results folders in the ScoreOptions, or a prediction path and folders")
        return Score(score_prediction(prediction))
    return Score(score_prediction(ScoreOptions(prediction=str(prediction), results=tuple(str(r) for r in results))))
