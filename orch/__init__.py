"""orch's public Python API: the only modules a user imports. Everything under `orchestrator` is internal and
may change without notice.

- `orch.workload`: bring your own model. The workload base (`Workload[P]`, `Trainer`, `RankContext`), the
  parameter field helper (`param`), the DDP-parameters mixin (`DdpParams`), and the function adapter
  (`model_workload`) that turns a model factory and a dataset into a workload. docs/own-model.md walks
  through it.
- `orch.script`: bring your own training script. A script that `torchrun` launches runs under `orch sweep` as it
  is, one process per rank; its calls to `orch.script.step()` and `orch.script.metric()` keep orch's timing
  rules, and do nothing outside orch. docs/own-script.md walks through it.
- `orch.plan`, `orch.sweep`, `orch.load`, `orch.predict`, `orch.track` (from `orch.api`): the commands as
  functions for notebooks and scripts, returning typed results (`orch.results`: `Plan`, `Results`,
  `Prediction`) with `.to_frame()` for pandas. docs/python-api.md walks through them.

A workload is found by the name a sweep file gives it: an installed entry point in the `orch.workloads`
group (how the built-ins are found), an import path `package.module:attribute`, or a file path
`path/to/file.py:attribute` (relative to the sweep file). `orch workloads` lists what is installed.

`import orch` and `import orch.workload` stay light (a rank imports the latter): the API's functions and
types are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from orchestrator import __version__

if TYPE_CHECKING:
    from orch.api import InputError, load, plan, predict, sweep, track
    from orch.results import Plan, Prediction, Results

# name -> the module that defines it, imported when the name is first used
_LAZY = {**dict.fromkeys(("plan", "sweep", "load", "predict", "track", "InputError"), "orch.api"),
         **dict.fromkeys(("Plan", "Results", "Prediction"), "orch.results")}

__all__ = ["__version__", "InputError", "Plan", "Prediction", "Results", "load", "plan", "predict", "sweep", "track"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'orch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
