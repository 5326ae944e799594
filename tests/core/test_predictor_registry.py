"""Predictors are found by id (`orchestrator.core.predict.predictors.PREDICTORS`, an id -> module map), each with the
label the tables print: orch's step model and the two baselines through the registry, in the validation table's
column order, the GEMM proxy beside them (not scored on held-out cells), and a toy baseline added by one module
(tests/core/toy_predictor.py) and one registration line, then scored on held-out cells beside them, predicted with by
`interval` and printed by its label."""

from __future__ import annotations

import statistics

import pytest
from predict_synthetic import BUCKETS, LINKS, TRUE, cells_from
from toy_predictor import FASTEST

from orchestrator.core.predict import interval, predictors, validate
from orchestrator.core.predict.step import Layout, StepModel

LAYOUTS = [Layout(r, t, b, 1, r, "socket" if r > 1 else None) for r, t in ((1, 1), (1, 2), (2, 1)) for b in (8, 16, 32)]
NOISE = [0.02, -0.015, 0.005, -0.01, 0.012, 0.0, -0.02, 0.008, 0.015]


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(predictors.PREDICTORS, FASTEST, "toy_predictor:PREDICTOR")   # the one registration line


def test_orchs_predictors_are_found_through_the_registry_in_column_order():
    assert predictors.ids() == ("model", "linear", "amdahl") == (validate.MODEL, validate.LINEAR, validate.AMDAHL)
    assert [p.id for p in predictors.validated()] == list(predictors.ids())
    assert [p.id for p in predictors.registered()] == ["model", "linear", "amdahl", "gemm_proxy"]
    # the labels are what every table prints, as before the ids
    assert [predictors.label(p) for p in ("model", "linear", "amdahl", "gemm_proxy")] == [
        "orch model", "linear scaling", "Amdahl (total cores)", "GEMM peak (bias-corrected)"]
    assert isinstance(predictors.find(interval.GEMM_PROXY), predictors.FromAnchor)
    with pytest.raises(KeyError, match="no predictor with id 'nope'"):
        predictors.find("nope")


def test_a_line_naming_something_else_is_refused(monkeypatch):
    monkeypatch.setitem(predictors.PREDICTORS, "wrong_id", "toy_predictor:PREDICTOR")   # its id is FASTEST
    with pytest.raises(TypeError, match="not a Predictor with id 'wrong_id'"):
        predictors.find("wrong_id")


def _by_hand(cells) -> dict[tuple[str, Layout], float]:
    """The toy's prediction of every held-out cell, per scheme: the fastest cell left to train on."""
    expected = {}
    for scheme in validate.schemes(cells)[0]:
        for group in scheme.groups:
            fastest = max(c.samples_per_s for c in cells if c not in group)
            expected.update({(scheme.name, c.layout): fastest for c in group})
    return expected


def test_a_toy_baseline_added_by_one_line_is_scored_on_held_out_cells(toy):
    cells = cells_from(StepModel(TRUE, LINKS, BUCKETS), LAYOUTS, NOISE)
    results = validate.validate_step(cells, LINKS, BUCKETS)
    expected = _by_hand(cells)
    assert len(results) >= 5 and len(expected) > len(cells)
    for r in results:
        assert list(r.scores) == [validate.MODEL, validate.LINEAR, validate.AMDAHL, FASTEST]
        values = [expected[(r.scheme, h.cell.layout)] for h in r.held_out]
        assert [h.predicted[FASTEST] for h in r.held_out] == pytest.approx(values)
        errors = [100 * (v - h.cell.samples_per_s) / h.cell.samples_per_s for v, h in zip(values, r.held_out)]
        score = r.scores[FASTEST]
        assert score.median_abs_pct == pytest.approx(statistics.median(abs(e) for e in errors))
        assert score.max_abs_pct == pytest.approx(max(abs(e) for e in errors))
        assert score.bias_pct == pytest.approx(statistics.fmean(errors))
    # a constant cannot follow the cores: the model, which can, stays ahead of it one cell out
    loo = next(r for r in results if r.scheme == "leave one cell out")
    assert loo.scores[FASTEST].median_abs_pct > 10 * loo.scores[validate.MODEL].median_abs_pct
    # `interval` predicts with it by id, as with any baseline
    basis = interval.basis_of(cells, LINKS, BUCKETS, None, {}, validation=results)
    fastest = max(c.samples_per_s for c in cells)
    assert interval.value_of(basis, FASTEST, Layout(4, 2, 64, 1, 4, "socket")) == pytest.approx(fastest)
    assert predictors.label(FASTEST) == "constant: the fastest training cell"
