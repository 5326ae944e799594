"""Capacity planning: fitted models of step time and epochs-to-target, their validation on held-out
cells, and predictions for layouts, batches and clusters that were not run. Pure (numpy and scipy only).

What is measured, what is fitted and what is predicted are kept apart:

- measured: throughput records, all-reduce calibration records, GEMM peaks, convergence records (or an
  MLPerf RCP file);
- fitted: `comm.LinkFit` (α, β per link class), `step.StepModel` (compute ⊕ communication),
  `epochs.EpochsModel` (critical-batch form);
- predicted: `capacity.predict_layouts` for every feasible layout of a target topology, each with an
  interval taken from the model's own held-out error (`validate`).

The step model in one line: a rank's step is a fixed part and a per-sample part, each sped up by threads
(Amdahl), so throughput grows with the local batch towards 1 / c_s per rank:

>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> cells = [Cell(Layout(1, 1, b), b / (0.01 + 0.002 * b)) for b in (8, 16, 32, 64)]
>>> model = fit_step_model(cells, {}, [])
>>> round(model.params["a_s"], 4), round(model.params["c_s"], 4), round(model.samples_per_s(Layout(1, 1, 128)))
(0.01, 0.002, 481)
"""
