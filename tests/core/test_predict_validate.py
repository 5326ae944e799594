"""Hold-out validation and capacity planning on synthetic cells from a known model (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from predict_synthetic import BUCKETS, GRID, LINKS, TRUE, cells_from

from orchestrator.core.predict import predictors, validate
from orchestrator.core.predict.capacity import Prediction, mark, recommend
from orchestrator.core.predict.epochs import BatchPoint, critical_batch_epochs
from orchestrator.core.predict.step import Cell, Layout, StepModel


def test_schemes_hold_out_each_cell_each_level_and_all_levels_but_one():
    cells = cells_from(StepModel(TRUE, LINKS, BUCKETS), GRID)
    run, skipped = validate.schemes(cells)
    names = [s.name for s in run]
    assert names == ["leave one cell out", "ranks 2", "largest ranks (4)", "ranks: all but 1",
                     "smallest threads (1)", "threads 2", "largest threads (4)", "threads: all but 1",
                     "smallest local batch (8)", "local batch 16", "local batch 32", "local batch 64",
                     "largest local batch (128)", "local batch: all but 8"]
    # holding out the 1-rank cells leaves nothing to fit a base on: skipped, and said
    assert [(s.scheme, s.why) for s in skipped] == [("smallest ranks (1)", "no 1-rank cell left to fit")]
    by_name = {s.name: s for s in run}
    assert len(by_name["leave one cell out"].groups) == len(cells)
    assert all(len(g) == 1 for g in by_name["leave one cell out"].groups)
    assert {c.layout.threads for c in by_name["threads: all but 1"].groups[0]} == {2, 4}
    assert (by_name["smallest threads (1)"].direction, by_name["threads 2"].direction,
            by_name["largest threads (4)"].direction) == (validate.BELOW, validate.INSIDE, validate.ABOVE)
    assert by_name["largest local batch (128)"].step_log2 == 1.0
    multi = cells + [Cell(Layout(2, 1, 8, 2, 1, "nodes"), 1000.0)]
    assert validate.schemes(multi)[0][-1].name == "multi-node cells"


def test_model_beats_both_baselines_on_data_it_can_describe():
    noise = [0.01, -0.012, 0.004, -0.003, 0.008, -0.007, 0.0]
    cells = cells_from(StepModel(TRUE, LINKS, BUCKETS), GRID, noise)
    results = {r.scheme: r for r in validate.validate_step(cells, LINKS, BUCKETS)}
    loo = results["leave one cell out"]
    assert loo.scores[validate.MODEL].median_abs_pct < 2.0
    for baseline in (validate.LINEAR, validate.AMDAHL):
        assert loo.scores[validate.MODEL].median_abs_pct < loo.scores[baseline].median_abs_pct
    assert loo.scores[validate.MODEL].kendall_tau > 0.95
    assert loo.within_noise >= len(cells) // 2      # 1% noise, cv 1%: most errors are noise


def test_errors_and_bias_by_hand():
    c = Cell(Layout(1, 1, 8), 100.0, cv=0.05)
    held = [validate.HeldOut(c, {validate.MODEL: 110.0, validate.LINEAR: 80.0, validate.AMDAHL: 100.0}),
            validate.HeldOut(Cell(Layout(1, 2, 8), 200.0), {validate.MODEL: 190.0, validate.LINEAR: 200.0,
                                                            validate.AMDAHL: 150.0})]
    score = validate._score(held, validate.MODEL)
    assert (score.median_abs_pct, score.max_abs_pct, score.bias_pct) == (pytest.approx(7.5), pytest.approx(10.0),
                                                                         pytest.approx(2.5))
    assert score.kendall_tau is None            # fewer than 3 cells: no ranking to speak of
    assert not held[0].within_noise             # 10% error, 5% CV


def test_baselines_by_hand():
    train = [Cell(Layout(1, 1, 8), 100.0), Cell(Layout(1, 2, 8), 160.0), Cell(Layout(1, 1, 32), 300.0)]
    sigma = validate.amdahl_sigma(train)
    assert sigma == pytest.approx(0.25, abs=1e-6)       # 1 / (σ + (1−σ)/2) = 1.6
    training = predictors.Training(tuple(train), StepModel(TRUE, LINKS, BUCKETS))   # the baselines ignore the model
    linear, amdahl = (predictors.find(name).fit(training) for name in (validate.LINEAR, validate.AMDAHL))
    assert linear(Layout(2, 2, 8)) == pytest.approx(400.0) and amdahl(Layout(2, 2, 8)) == pytest.approx(
        100 / (0.25 + 0.75 / 4))
    # the nearest local batch's base cell stands in for a batch not measured
    assert linear(Layout(1, 1, 64)) == pytest.approx(300.0)


def test_leave_one_global_batch_out_against_the_rcp_rule():
    pts = [BatchPoint(b, (critical_batch_epochs(b, 2.0, 300.0),)) for b in (32, 64, 128, 256, 512)]
    held = validate.validate_epochs(pts)
    assert [h.global_batch for h in held] == [32, 64, 128, 256, 512]
    assert all(abs(h.error_pct()) < 0.5 for h in held)          # exact data: the form recovers it
    ends = {h.global_batch: h for h in held}
    assert abs(ends[512].error_pct("rcp")) > abs(ends[512].error_pct())    # the RCP rule cannot extrapolate
    assert validate.validate_epochs(pts[:2]) == []


def _pred(nodes, hours, label_batch=8):
    lay = Layout(nodes * 2, 1, label_batch, nodes, 1, "nodes" if nodes > 1 else "socket")
    return Prediction(lay, 100.0, None, None, None, (), (), None, hours, hours * 0.9, hours * 1.2, hours * nodes,
                      24 / hours)


def test_fastest_per_node_count_and_pareto_set():
    preds = mark([_pred(1, 10.0), _pred(1, 12.0, 16), _pred(2, 6.0), _pred(4, 5.5), _pred(4, 7.0, 16)])
    marks = [p.marks for p in preds]
    assert marks[0] == ("fastest", "pareto") and marks[1] == ()
    assert marks[2] == ("fastest", "pareto") and marks[3] == ("fastest", "pareto") and marks[4] == ()


def test_recommendation_under_a_deadline_and_a_budget():
    preds = mark([_pred(1, 10.0), _pred(2, 6.0), _pred(4, 5.5)])
    deadline = recommend(preds, deadline_h=7.0)
    assert deadline.prediction is preds[1] and "12 node-hours" in deadline.why
    assert "pessimistic end" in deadline.why        # 6 h × 1.2 = 7.2 h > 7 h
    budget = recommend(preds, budget_node_h=11.0)
    assert budget.prediction is preds[0]
    assert recommend(preds, deadline_h=1.0).why.startswith("no layout meets it; the fastest, 8×1×8 on 4 nodes")
    assert recommend(preds) is None
    untimed = [replace(p, hours=None, node_hours=None) for p in preds]
    assert recommend(untimed, deadline_h=7.0).why.startswith("no time-to-train to compare: no convergence data")
