"""What orch does, once, beneath both doors: one module per use-case, each taking its typed options
(`orchestrator.app.options`) and returning typed results, saying what it does as it goes through `Notice`s
(`app.notices`) and `logging`, never a console.

- `plan`: a sweep file's grid checked against a machine (`orch plan`, `orch.plan`); `plan_for`, the one road
  from a sweep and a topology to what runs, which the sweep and the profile take too.
- `probe`: the workload's probe (`orch probe`).
- `sweep`: a sweep on Ray, its report and its trackers (`orch sweep`, `orch.sweep`); `adaptive`: its adaptive
  options and `--replay`.
- `report`: a results folder read, its report written, logged after the fact (`orch report`, `orch.load`,
  `orch.track`).
- `predict`: a prediction from a results folder (`orch predict`, `orch.predict`).
- `profile`: layouts profiled, reported and projected (`orch profile`).
- `topology`: the machine model planning uses (`orch topology`); `cluster`: an emulated cluster (`orch cluster`).
- `session`: Ray for the commands that run on it (started or joined, the nodes found, SIGTERM as Ctrl-C).

The CLI (`orchestrator.cli`) parses argv into the options and renders what comes back; the Python API
(`orch.api`) builds the options from keyword arguments and wraps what comes back in the public result types.
Neither holds logic of its own, and this layer imports neither (an import contract says so).
"""
