"""Capacity planning: fitted models of step time and epochs-to-target, their validation on held-out
cells, and predictions for layouts, batches and clusters that were not run. Pure (numpy and scipy only).

What is measured, what is fitted and what is predicted are kept apart:

- measured: throughput records, all-reduce calibration records, GEMM peaks, convergence records (or an
  MLPerf RCP file);
- fitted: `comm.LinkFit` (α, β per link class), `step.StepModel` (compute ⊕ communication),
  `epochs.EpochsModel` (critical-batch form);
- predicted: `capacity.predict_layouts` for every feasible layout of a target topology, each with an
  interval taken from the model's own held-out error (`validate`).
"""
