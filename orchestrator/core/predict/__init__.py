"""Capacity planning: fitted models of step time and epochs-to-target, their validation on held-out
cells, and predictions for layouts, batches and clusters that were not run. Pure (numpy only: `lsq` is the
bounded least squares every fit uses; importing scipy.optimize cost `orch predict` 0.7 s).

What is measured, what is fitted and what is predicted are kept apart:

- measured: throughput records, all-reduce calibration records, GEMM peaks, convergence records (or an
  MLPerf RCP file) — `data` reads them as cells, buckets and peaks;
- fitted: `comm.LinkFit` (α, β per link class), `step.StepModel` (compute ⊕ communication),
  `epochs.EpochsModel` (critical-batch form, or `epochs_lr`'s form under the sweep's learning-rate rule), their
  held-out validation (`validate`, of every predictor registered in `predictors`: orch's model and the naive
  baselines, found by name) and the residual bootstrap of the step fit (`uncertainty`); `evidence` sums up how
  the measured steps and GEMM peaks scale over more cores;
- predicted: `interval.predict_cell` for any one layout, with an interval from held-out errors (`bands`) or,
  where an axis has one measured level, from bounds (physics and the evidence); `capacity.predict_layouts`
  for every feasible layout of a target topology; `machine` for a target with other CPUs; `tables` renders.

`fit.fit_all` fits everything `orch predict` and `orch report` show. For one cell from the records so far
(what an adaptive sweep asks of every candidate cell):

    basis = fit.basis_from_records(records)          # fits once: step model, hold-out schemes, evidence
    p = interval.predict_cell(basis, Layout(ranks, threads, local_batch))
    p.value, p.low, p.high                           # samples/s and its interval (None, None: p.no_interval)
    p.low_why, p.high_why, p.predictor, p.notes      # what set each end, and how

`basis_from_records` raises `fit.NotFittable` (with the cells that would make it fittable) below 3 cells or
without a 1-rank cell; `predict_cell` is arithmetic on the basis (the bootstrap refits on first use).

The step model in one line: a rank's step is a fixed part and a per-sample part, each sped up by threads
(Amdahl), so throughput grows with the local batch towards 1 / c_s per rank:

>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> cells = [Cell(Layout(1, 1, b), b / (0.01 + 0.002 * b)) for b in (8, 16, 32, 64)]
>>> model = fit_step_model(cells, {}, [])
>>> round(model.params["a_s"], 4), round(model.params["c_s"], 4), round(model.samples_per_s(Layout(1, 1, 128)))
(0.01, 0.002, 481)
"""
