"""orch's public Python API: the only modules a user imports. Everything under `orchestrator` is internal and
may change without notice.

- `orch.workload`: bring your own model. The workload base (`Workload[P]`, `Trainer`, `RankContext`), the
  parameter field helper (`param`), the DDP-parameters mixin (`DdpParams`), and the function adapter
  (`model_workload`) that turns a model factory and a dataset into a workload. docs/own-model.md walks
  through it.
- `orch.script`: bring your own training script. A script that `torchrun` launches runs under `orch sweep` as it
  is, one process per rank; its calls to `orch.script.step()` and `orch.script.metric()` keep orch's timing
  rules, and do nothing outside orch. docs/own-script.md walks through it.

A workload is found by the name a sweep file gives it: an installed entry point in the `orch.workloads`
group (how the built-ins are found), an import path `package.module:attribute`, or a file path
`path/to/file.py:attribute` (relative to the sweep file). `orch workloads` lists what is installed.
"""

from __future__ import annotations

from orchestrator import __version__

__all__ = ["__version__"]
