"""orch's public Python API: the only modules a user imports. Everything under `orchestrator` is internal and
may change without notice.

- `orch.workload`: bring your own model. The workload base (`Workload[P]`, `Trainer`, `RankContext`), the
  parameter field helper (`param`), the DDP-parameters mixin (`DdpParams`), and the function adapter
  (`model_workload`) that turns a model factory and a dataset into a workload. docs/own-model.md walks
  through it.
- `orch.script`: bring your own training script. A script that `torchrun` launches runs under `orch sweep` as it
  is, one process per rank; its calls to `orch.script.step()` and `orch.script.metric()` keep orch's timing
  rules, and do nothing outside orch. docs/own-script.md walks through it.
- `orch.plan`, `orch.sweep`, `orch.load`, `orch.predict`, `orch.score`, `orch.track` (from `orch.api`): the commands as
  functions for notebooks and scripts, each taking its command's options object (`PlanOptions`, `SweepOptions`,
  `PredictOptions`, `ScoreOptions`, `TrackOptions`; `ReportOptions` is `orch report`'s) or keyword arguments that
  build one, and returning typed results (`orch.results`: `Plan`, `Results`, `Prediction`, `Score`) with
  `.to_frame()` for pandas;
  a folder's sweep and machine read back typed (`Results.spec`: a `SweepSpec`; `Results.topology`: a `Topology`).
  docs/python-api.md walks through them.
- `orch.decide_precision` (from `orch.precision`): a workload's `precision: auto` decided on this machine's CPU,
  for a trainer built outside a sweep (a sweep's plan decides it for its ranks; a trainer refuses `auto`).
- Errors: every error orch raises on purpose is an `OrchError`: bad input an `InputError` (a ValueError; the
  command exits with status 2), a run that could not finish a `RunFailed` (a RuntimeError; status 1). The
  specific ones a caller may want by name are exported too (`InvalidInput`: a file's problems, all at once;
  `NotAResultsFolder`, `FolderInUse`, `TrackingUnavailable`, `ResultsNotWritten`, ...).

A workload is found by the name a sweep file gives it: an installed entry point in the `orch.workloads`
group (how the built-ins are found), an import path `package.module:attribute`, or a file path
`path/to/file.py:attribute` (relative to the sweep file). `orch workloads` lists what is installed.

`import orch` and `import orch.workload` stay light (a rank imports the latter): the API's functions and
types are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from orchestrator import __version__
from orchestrator.errors import InputError, OrchError, RunFailed

if TYPE_CHECKING:
    from orch.api import Notice, load, plan, predict, results_folder, score, sweep, track
    from orch.precision import decide_precision
    from orch.results import Plan, Prediction, Results, Score, SweepSummary
    from orchestrator.app.options import (
        PlanOptions,
        PredictOptions,
        ReportOptions,
        ScoreOptions,
        SweepOptions,
        TrackOptions,
    )
    from orchestrator.app.score import ScoreInputError
    from orchestrator.app.sweep import ReportNotWritten
    from orchestrator.core.json.schema import InvalidInput
    from orchestrator.core.machine.topology import Topology
    from orchestrator.core.planning.plan import PlanTooLarge
    from orchestrator.core.planning.spec import SweepSpec
    from orchestrator.core.predict.capacity import NoFeasibleLayout
    from orchestrator.core.predict.saved import SavedPredictionError
    from orchestrator.io.files import UnreadableFile
    from orchestrator.io.lock import FolderInUse
    from orchestrator.io.predict_inputs import PredictInputError
    from orchestrator.io.store import NotAResultsFolder, ResultsNotWritten
    from orchestrator.io.tracking import TrackingUnavailable
    from orchestrator.io.workload_finder import UnknownWorkload
    from orchestrator.run.driver.probe import ProbeFailed

# name -> the module that defines it, imported when the name is first used
_LAZY = {**dict.fromkeys(("plan", "sweep", "load", "predict", "score", "track", "results_folder", "Notice"),
                         "orch.api"),
         **dict.fromkeys(("Plan", "Results", "Prediction", "Score", "SweepSummary"), "orch.results"),
         "decide_precision": "orch.precision",
         **dict.fromkeys(("PlanOptions", "SweepOptions", "ReportOptions", "PredictOptions", "ScoreOptions",
                          "TrackOptions"), "orchestrator.app.options"),
         "ScoreInputError": "orchestrator.app.score", "SavedPredictionError": "orchestrator.core.predict.saved",
         "InvalidInput": "orchestrator.core.json.schema", "PlanTooLarge": "orchestrator.core.planning.plan",
         "UnreadableFile": "orchestrator.io.files", "FolderInUse": "orchestrator.io.lock",
         "NotAResultsFolder": "orchestrator.io.store", "ResultsNotWritten": "orchestrator.io.store",
         "PredictInputError": "orchestrator.io.predict_inputs", "TrackingUnavailable": "orchestrator.io.tracking",
         "UnknownWorkload": "orchestrator.io.workload_finder", "NoFeasibleLayout": "orchestrator.core.predict.capacity",
         "ReportNotWritten": "orchestrator.app.sweep", "ProbeFailed": "orchestrator.run.driver.probe",
         "SweepSpec": "orchestrator.core.planning.spec", "Topology": "orchestrator.core.machine.topology"}

__all__ = ["__version__", "load", "plan", "predict", "results_folder", "score", "sweep", "track", "Notice",
           "decide_precision",
           "Plan", "Prediction", "Results", "Score", "SweepSummary", "SweepSpec", "Topology",
           "PlanOptions", "PredictOptions", "ReportOptions", "ScoreOptions", "SweepOptions", "TrackOptions",
           "OrchError", "InputError", "RunFailed", "InvalidInput", "PlanTooLarge", "UnreadableFile", "FolderInUse",
           "NotAResultsFolder", "ResultsNotWritten", "PredictInputError", "TrackingUnavailable", "UnknownWorkload",
           "NoFeasibleLayout", "ReportNotWritten", "ProbeFailed", "ScoreInputError", "SavedPredictionError"]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'orch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
