"""Scoring a saved prediction (`core.predict.score`) and reading one back (`core.predict.saved`): every expected
figure is worked out by hand below from the rows' numbers, never by calling the scoring code."""

from __future__ import annotations

import math

import pytest

from orchestrator.core.predict.saved import (
    FORMAT,
    CellForecast,
    EpochsForecast,
    Machine,
    NodeShape,
    Provenance,
    SavedPrediction,
    SavedPredictionError,
    Subject,
    from_json,
    to_json,
)
from orchestrator.core.predict.score import (
    CONVERGENCE,
    EPOCHS,
    FolderFacts,
    MeasuredBatch,
    MeasuredCell,
    Row,
    mismatches,
    score,
    summarise,
)

NODE = NodeShape(count=1, sockets=1, cores_per_socket=2, threads_per_core=1, memory_gib=23.5, cpu="EPYC")


def saved(cells=(), epochs=(), same_machine=True) -> SavedPrediction:
    return SavedPrediction(
        provenance=Provenance(orch_version="0.1.0", commit="abc", commit_dirty=False, made_at="2026-12-06T00:00:00"),
        inputs=(), subject=Subject(workload="classifier", params={"hidden": 1024}, precision="fp32",
                                   source_precision="fp32", source_cpu="EPYC"),
        target_machine=Machine(words="one node", same_machine=same_machine, node_groups=(NODE,), node_counts=(1,),
                               local_batches=(8,)),
        cells=tuple(cells), epochs_by_batch=tuple(epochs))


def cell(r, t, b, value, low, high, axes=(("threads", 1.0),), baselines=None, in_inputs=False, n=1):
    from orchestrator.core.predict.saved import Beyond

    return CellForecast(ranks=r, threads=t, local_batch=b, nodes=n, samples_per_s=value, low=low, high=high,
                        predictor="orch model", beyond=tuple(Beyond(axis=a, doublings=d) for a, d in axes),
                        baselines=baselines or {}, in_inputs=in_inputs)


def test_rows_errors_coverage_and_width_as_worked_by_hand():
    s = saved([cell(1, 2, 8, 90.0, 80.0, 110.0, baselines={"linear": 200.0}),
               cell(1, 4, 8, 130.0, 105.0, 140.0, axes=(("threads", 2.0),), baselines={"linear": 400.0}),
               cell(2, 1, 8, 150.0, None, None, axes=(("ranks", 1.0),))])
    measured = [MeasuredCell((1, 2, 8, 1), 100.0), MeasuredCell((1, 4, 8, 1), 100.0), MeasuredCell((2, 1, 8, 1), 160.0),
                MeasuredCell((4, 1, 8, 1), 300.0)]
    card = score(s, measured, [])
    by = {r.label: r for r in card.rows}
    assert by["1×2×8"].error_pct == pytest.approx(-10.0)          # (90 − 100) / 100
    assert by["1×4×8"].error_pct == pytest.approx(30.0)           # (130 − 100) / 100
    assert by["2×1×8"].error_pct == pytest.approx(-6.25)          # (150 − 160) / 160
    assert [by[k].inside for k in ("1×2×8", "1×4×8", "2×1×8")] == [True, False, False]
    assert by["1×2×8"].width == pytest.approx(110 / 80)
    threads = next(a for a in card.axes if a.axis == "threads")
    assert (threads.rows, threads.inside, threads.with_interval) == (2, 1, 2)
    assert threads.median_abs_pct == pytest.approx(20.0)           # median of 10 and 30
    assert threads.max_abs_pct == pytest.approx(30.0)
    assert threads.median_width == pytest.approx((110 / 80 + 140 / 105) / 2)
    assert threads.baselines["linear"] == pytest.approx((200.0, 300.0))   # errors +100% and +300%: median 200
    assert threads.beaten_by() == []
    ranks = next(a for a in card.axes if a.axis == "ranks")
    assert ranks.with_interval == 0 and ranks.coverage is None      # no interval: not counted as covered
    assert card.not_predicted == ("4×1×8",) and card.not_measured == 0


def test_a_baseline_that_beats_the_model_is_said():
    rows = [Row("samples/s", "a", ("ranks",), 1.0, 100.0, 130.0, 90.0, 140.0, {"same_cores": 103.0}),
            Row("samples/s", "b", ("ranks",), 1.0, 100.0, 70.0, 60.0, 110.0, {"same_cores": 98.0})]
    (axis,) = summarise(rows)
    assert axis.median_abs_pct == pytest.approx(30.0)
    assert axis.baselines["same_cores"] == pytest.approx((2.5, 3.0))   # |+3%| and |−2%|: median 2.5
    assert axis.beaten_by() == ["same_cores"]


def test_cells_measured_in_the_inputs_are_data_not_predictions():
    s = saved([cell(1, 1, 8, 100.0, 90.0, 110.0, axes=(), in_inputs=True), cell(1, 2, 8, 150.0, 140.0, 160.0)])
    card = score(s, [MeasuredCell((1, 1, 8, 1), 100.0), MeasuredCell((1, 2, 8, 1), 150.0)], [])
    assert [r.label for r in card.rows] == ["1×2×8"]


def test_epochs_and_convergence_rows():
    epochs = [EpochsForecast(global_batch=256, epochs=10.0, low=8.0, high=12.5, status="extrapolated",
                             p_converge=0.9, doublings=2.0, baselines={"flat": 3.0}),
              EpochsForecast(global_batch=512, epochs=2.4, low=2.0, high=3.0, status="extrapolated", doublings=3.0),
              EpochsForecast(global_batch=1024, epochs=None, status="past the edge", p_converge=0.1, doublings=4.0)]
    batches = [MeasuredBatch(256, 3, 3, 11.0), MeasuredBatch(512, 3, 0, None), MeasuredBatch(1024, 3, 1, None)]
    card = score(saved(epochs=epochs), [], batches)
    rows = {(r.what, r.label): r for r in card.rows}
    e256 = rows[(EPOCHS, "global batch 256")]
    assert e256.error_pct == pytest.approx(100 * (10 - 11) / 11) and e256.inside
    assert e256.baseline_error_pct("flat") == pytest.approx(100 * (3 - 11) / 11)
    c256 = rows[(CONVERGENCE, "global batch 256")]
    assert c256.measured == 1.0 and c256.error_pct == pytest.approx(-10.0) and c256.inside   # 0.9 vs 3 of 3
    # 512: a number printed where no seed converged is the verdict "it trains": P = 1 against 0 of 3, a miss
    c512 = rows[(CONVERGENCE, "global batch 512")]
    assert c512.predicted == 1.0 and c512.measured == 0.0 and not c512.inside
    assert (EPOCHS, "global batch 512") not in rows            # no epochs to compare where most seeds failed
    c1024 = rows[(CONVERGENCE, "global batch 1024")]
    assert c1024.measured == pytest.approx(1 / 3) and c1024.inside    # P 0.1 < ½ and 1 of 3 converged
    conv = next(a for a in card.axes if a.axis == "convergence")
    assert (conv.rows, conv.inside) == (3, 2)


def test_mismatches_name_every_difference():
    s = saved(same_machine=False)
    other = NodeShape(count=2, sockets=2, cores_per_socket=28, threads_per_core=2, memory_gib=192, cpu="Xeon")
    found = mismatches(s, FolderFacts("r", "classifier", {"hidden": 1024}, "fp32", "Xeon", (other,)))
    assert found == ["machine: the prediction's nodes are 1 socket(s) × 2 cores × 1 thread(s), the folder's "
                     "2 socket(s) × 28 cores × 2 thread(s)"]
    assert mismatches(s, FolderFacts("r", "classifier", {"hidden": 1024}, "fp32", "Xeon", (NODE,))) == []
    found = mismatches(saved(), FolderFacts("r", "torchvision", {}, "fp32", "EPYC", (NODE,)))
    assert found == ["workload: predicted classifier, measured torchvision"]


def test_saved_prediction_round_trips_and_refuses_what_it_cannot_read():
    s = saved([cell(1, 2, 8, 90.0, 80.0, 110.0, baselines={"linear": 200.0, "amdahl": math.nan})])
    data = to_json(s)
    assert data["format"] == FORMAT and data["cells"][0]["baselines"] == {"linear": 200.0}   # nan left out
    back = from_json({**data, "tables": [], "layouts": []}, "p.json")     # display keys are not read
    assert back.cells[0].key == (1, 2, 8, 1) and back.cells[0].low == 80.0
    with pytest.raises(SavedPredictionError, match="newer orch"):
        from_json({**data, "format_version": 99}, "p.json")
    with pytest.raises(SavedPredictionError, match="not a saved prediction"):
        from_json({"layouts": []}, "p.json")
    broken = {**data, "cells": [{**data["cells"][0], "ranks": "two"}]}
    with pytest.raises(SavedPredictionError, match=r"cells\[0\]\.ranks: must be int"):
        from_json(broken, "p.json")
    outside = {**data, "cells": [{**data["cells"][0], "low": 95.0}]}
    with pytest.raises(SavedPredictionError, match="does not hold"):
        from_json(outside, "p.json")
    bad_baseline = {**data, "cells": [{**data["cells"][0], "baselines": {"linear": "fast"}}]}
    with pytest.raises(SavedPredictionError, match="baseline 'linear' is not a number"):
        from_json(bad_baseline, "p.json")


def test_the_deadline_probability_is_scored_at_the_time_that_happened():
    # epochs predicted 4.0 [3.6–4.4] (one sd in log: ln 1.1), samples/s 100 [90–110] at 2×1×64; measured: 4.0 epochs
    # (olympic mean, 3 of 3 converged) at 100 samples/s. The deadline set at what happened, 4.0/100 s per sample:
    # P(late) = P(E > 4.0) = 0.5 at the central rate; at 110, P(E > 4.4) = 1 − Φ(1) = 0.1587; at 90,
    # P(E > 3.6) = 1 − Φ(ln 0.9 / ln 1.1) = 0.8655
    from orchestrator.core.predict.score import LATE

    e = EpochsForecast(global_batch=128, epochs=4.0, low=4.0 / 1.1, high=4.4, status="extrapolated", doublings=1.0)
    c = cell(2, 1, 64, 100.0, 90.0, 110.0, axes=(("local batch", 1.0),))
    card = score(saved([c], [e]), [MeasuredCell((2, 1, 64, 1), 100.0)], [MeasuredBatch(128, 3, 3, 4.0)])
    (late,) = [r for r in card.rows if r.what == LATE]
    assert late.predicted == pytest.approx(0.5, abs=1e-6) and late.inside
    assert late.low == pytest.approx(0.1587, abs=1e-3) and late.high == pytest.approx(0.8655, abs=1e-3)
    assert late.error_pct == pytest.approx(0.0, abs=1e-4)           # points from the calibrated 0.5


def test_a_layout_the_inputs_measured_is_a_prediction_on_another_machine():
    other = saved([cell(1, 1, 8, 100.0, 90.0, 110.0, axes=(), in_inputs=True)], same_machine=False)
    card = score(other, [MeasuredCell((1, 1, 8, 1), 80.0)], [])
    assert [(r.label, r.error_pct) for r in card.rows] == [("1×1×8", pytest.approx(25.0))]   # (100 − 80)/80
