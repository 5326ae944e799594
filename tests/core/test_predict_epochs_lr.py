"""The epochs model that knows the sweep's learning-rate rule (core/predict/epochs_lr.py), on hand-made points with
a known answer: the form recovered, the rule's k = 0 limit where the epochs do not need k, the bounds, intervals
that grow with distance, and a square-root-rule sweep predicted far better than by E_min·(1 + B/B_crit)."""

from __future__ import annotations

import doctest
import math
from dataclasses import replace

import numpy as np
import pytest

from orchestrator.core.measured.convergence import Hyperparams
from orchestrator.core.planning import lr
from orchestrator.core.predict import deadline, epochs, epochs_lr
from orchestrator.core.predict.noise_prior import BCritPrior

SQRT = lr.LrScaling(rule="sqrt", base_lr=0.01, base_batch=32)
LINEAR = lr.LrScaling(rule="linear", base_lr=0.01, base_batch=32)
CONSTANT = lr.LrScaling(rule="none", base_lr=0.01, base_batch=32)
SPREAD = (0.95, 1.0, 1.05)


def test_module_examples():
    assert doctest.testmod(epochs_lr).failed == 0 and doctest.testmod(lr).failed == 0


def truth(b: float, a: float, k: float, b_noise: float, scaling: lr.LrScaling) -> float:
    """E = A·B / (ε·(1 − k·ε·(1 + B_noise/B))), written out independently of the module."""
    eps = scaling.base_lr * (b / scaling.base_batch) ** {"none": 0, "sqrt": 0.5, "linear": 1}[scaling.rule]
    return a * b / (eps * (1 - k * eps * (1 + b_noise / b)))


def points(batches, f, scaling=SQRT, spread=SPREAD):
    return [epochs.BatchPoint(b, tuple(f(b) * s for s in spread), lr_scaling=scaling) for b in batches]


def prior(b_simple: float, sd_log: float = math.log(3.0)) -> BCritPrior:
    return BCritPrior(b_simple, sd_log, 3, 0.1)


def test_the_form_is_recovered_where_the_epochs_need_k():
    # the linear rule nears its limit: D falls from 0.88 at 16 to 0.28 at 256, so the epochs rise 3.7×
    a, k, b_noise = 2e-4, 8.0, 50.0
    pts = points((16, 32, 64, 128, 256), lambda b: truth(b, a, k, b_noise, LINEAR), LINEAR)
    m = epochs.fit_epochs(pts, prior(60.0))
    r = m.rule
    assert m.form == epochs.RULE_FORM and r is not None and r.mode == epochs_lr.JOINT
    # under the linear rule (ε ∝ B) D = 1 − k·ε₀·(B + B_noise)/B₀: B_noise only shifts D, which A and k absorb, so
    # the epochs cannot tell it and B_simple's prior (60, against 50) sets it; A and k stay near the truth
    assert r.a == pytest.approx(a, rel=0.05) and r.k == pytest.approx(k, rel=0.05)
    assert r.b_noise == pytest.approx(60.0, rel=0.02) and m.b_crit == pytest.approx(r.b_noise)
    assert m.curve(48) == pytest.approx(truth(48, a, k, b_noise, LINEAR), rel=0.01)
    words = m.words()
    assert "under the linear rule (0.01 at global batch 32)" in words and "the epochs moved it ×" in words


def test_the_k_zero_limit_where_the_epochs_do_not_need_k():
    # epochs ∝ √B under the square-root rule: k would fit the seeds' noise only, so it is frozen at 0 and said
    pts = points((16, 32, 64), lambda b: 0.1 * math.sqrt(b), spread=(0.9, 1.0, 1.1))
    m = epochs.fit_epochs(pts, prior(60.0))
    assert m.rule is not None and m.rule.mode == epochs_lr.LIMIT and m.rule.k == 0.0
    assert "the measured epochs do not need k" in m.words() and "E ∝ B/ε(B)" in m.words()
    assert m.curve(1024) == pytest.approx(0.1 * math.sqrt(1024), rel=0.01)
    assert math.isinf(m.b_crit) and m.b_crit_mode == epochs.FROZEN
    # the linear rule's k = 0 limit: flat
    flat = epochs.fit_epochs(points((16, 32, 64), lambda b: 2.0, LINEAR, (0.9, 1.0, 1.1)))
    assert flat.curve(4096) == pytest.approx(2.0, rel=0.01)


def test_a_square_root_sweep_is_predicted_better_than_by_the_critical_batch_form():
    """Epochs ∝ √B (the square-root rule, far from its limit), kept 16 to 64, held out 256 and 512: the rule's form
    predicts them within 5% and inside its band; E_min·(1 + B/B_crit) fitted to the same seeds bends towards
    E ∝ B and over-predicts by more than 40%, outside its band."""
    from orchestrator.core.predict.validate import epochs_growth, validate_epochs

    def model(pts, p):
        return replace(epochs.fit_epochs(pts, p), growth_log_per_doubling=epochs_growth(validate_epochs(pts, p)))

    noise = {16: (0.9, 1.0, 1.12), 32: (0.95, 1.0, 1.05), 64: (0.92, 1.03, 1.1)}
    kept = [epochs.BatchPoint(b, tuple(0.15 * math.sqrt(b) * f for f in noise[b]), lr_scaling=SQRT) for b in noise]
    new = model(kept, prior(90.0))
    old = model([replace(p, lr_scaling=None) for p in kept], prior(90.0))
    assert new.form == epochs.RULE_FORM and old.form == epochs.CRITICAL_FORM
    for b in (256, 512):
        measured = 0.15 * math.sqrt(b)
        e, o = new.predict(b), old.predict(b)
        assert abs(e.epochs / measured - 1) < 0.05 and e.low <= measured <= e.high, (b, e)
        assert o.epochs / measured - 1 > 0.4 and not o.low <= measured <= o.high, (b, o)


def test_the_band_grows_with_distance_from_the_data():
    a, k, b_noise = 2e-4, 8.0, 50.0
    pts = points((16, 32, 64, 128), lambda b: truth(b, a, k, b_noise, LINEAR), LINEAR)
    m = epochs.fit_epochs(pts, prior(50.0))
    assert m.rule.mode == epochs_lr.JOINT
    # beyond the last batch (128) the fit's band widens with distance (inside, a measured batch's seeds set it)
    widths = [m.predict(b).high / m.predict(b).low for b in (160, 192, 224)]
    assert widths == sorted(widths) and widths[-1] > widths[0] * 1.05
    beyond = m.predict(224)
    assert beyond.status == epochs.EXTRAPOLATED and beyond.low < beyond.epochs < beyond.high


def test_a_batch_beyond_the_fitted_limit_gets_no_central_value():
    # the linear rule with D = 0.28 at 256 (the truth puts D < 0 at 512: it does not train there). The refit that
    # holds D ≥ 1 − U_MAX at 512 is a fit at its bound: it can only say the epochs are large, so no central value
    # is printed, only the band's low end and a note that the edge is unplaced
    a, k, b_noise = 2e-4, 8.0, 50.0
    assert 1 - k * LINEAR.at(512) * (1 + b_noise / 512) < 0          # the truth, by hand: past the edge
    m = epochs.fit_epochs(points((16, 32, 64, 128, 256), lambda b: truth(b, a, k, b_noise, LINEAR), LINEAR),
                          prior(50.0))
    assert m.rule.denominator(512) < 0
    covering = m.rule.covering(512)
    assert covering.denominator(512) >= 1 - epochs_lr.U_MAX - 1e-9 and 512 in covering.span
    far = m.predict(512)
    assert far.epochs is None and far.status == epochs.UNSUPPORTED
    assert "no central value" in far.note and "edge" in far.note
    assert m.predict(256).epochs is not None                         # inside the data: its own value


def test_the_bounds_the_measured_epochs_give():
    means = [(16, 1.0), (64, 2.0)]
    # the linear rule: g = ε·(1 + B_noise/B) rises with B for any B_noise, so the k = 0 limit (flat) bounds from below
    found = epochs_lr.bounds(256, means, LINEAR, (0.0, math.inf), 0.0)
    assert [(round(b.epochs, 6), b.low) for b in found] == [(2.0, True), (2.0, True)]
    # a constant rate: g falls with B, so the k = 0 limit (E ∝ B) bounds from above; the order from below
    found = epochs_lr.bounds(256, means, CONSTANT, (0.0, math.inf), 0.0)
    assert (round(found[0].epochs, 6), found[0].low) == (8.0, False) and found[1].low
    # the square-root rule: a side only where B_noise's range puts it (g(256) ≥ g(64) iff B_noise ≤ 128)
    assert any(b.low and "k = 0" in b.why for b in epochs_lr.bounds(256, means, SQRT, (20.0, 100.0), 0.0))
    assert not any("k = 0" in b.why for b in epochs_lr.bounds(256, means, SQRT, (20.0, 600.0), 0.0))
    # the seeds' spread loosens each bound by one sd
    assert epochs_lr.bounds(256, means, LINEAR, (0.0, math.inf), 0.1)[0].epochs == pytest.approx(2 * math.exp(-0.1))
    value, low, high, moved = epochs_lr.apply_bounds(1.5, 1.2, 2.5, found)
    assert (value, low, high) == (pytest.approx(2.0), pytest.approx(2.0), 2.5) and "low end" in moved


def test_records_without_the_rule_keep_the_critical_batch_form():
    pts = [epochs.BatchPoint(b, (epochs.critical_batch_epochs(b, 2.0, 100.0),)) for b in (16, 64, 256)]
    assert epochs.fit_epochs(pts).form == epochs.CRITICAL_FORM
    mixed = [replace(pts[0], lr_scaling=SQRT), *pts[1:]]      # one batch says, the others do not
    assert epochs.fit_epochs(mixed).form == epochs.CRITICAL_FORM
    assert epochs.lr_scaling_of(Hyperparams(lr_rule="sqrt", lr_at_base_batch=0.01, base_batch=32)) is None
    assert epochs.lr_scaling_of(Hyperparams(opt_base_learning_rate=0.02, lr_rule="sqrt", lr_at_base_batch=0.01,
                                            base_batch=32)) == SQRT


def test_the_deadline_reads_each_side_of_an_uneven_band():
    # wider above than below (the rule's draws): the chance of needing more than the high end is one sd above
    pred = epochs.EpochsPrediction(256, 4.0, 3.6, 6.0, epochs.EXTRAPOLATED)
    d = deadline.distribution(pred, None)
    assert d.sd_log == pytest.approx(math.log(1.5)) and d.sd_log_low == pytest.approx(math.log(4.0 / 3.6))
    assert d.p_over(6.0) == pytest.approx(0.158655, abs=1e-4) and d.p_over(3.6) == pytest.approx(0.841345, abs=1e-4)
    symmetric = deadline.distribution(epochs.EpochsPrediction(256, 4.0, 4.0 / 1.5, 6.0, epochs.EXTRAPOLATED), None)
    assert symmetric.sd_log_low is None


def test_log_epochs_is_infinite_where_the_rate_is_unstable():
    theta = np.array([math.log(1e-4), epochs_lr.U_MAX, math.log(50.0)])
    span = np.array([16.0, 64.0])
    assert np.isfinite(epochs_lr.log_epochs(theta, span, LINEAR, span)).all()
    assert np.isinf(epochs_lr.log_epochs(theta, np.array([1024.0]), LINEAR, span)).all()
