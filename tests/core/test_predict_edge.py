"""The stability edge (`core.predict.edge`) and the epochs model that uses it (`core.predict.epochs_edge`). The truths
are analytic: a quadratic loss whose Hessian and gradient noise are set by hand, a range-test curve written by hand,
and epochs generated from a known edge."""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrator.core.measured.records import EdgeSection
from orchestrator.core.planning.lr import LrScaling
from orchestrator.core.predict import edge, epochs, epochs_edge
from orchestrator.core.predict.epochs import BatchPoint

LINEAR = LrScaling(rule="linear", base_lr=0.02, base_batch=16)


def quadratic_sums(rng: np.random.Generator, micro: int, b: int) -> edge.HvpSums:
    """What a rank measures on L(w) = ½ wᵀHw with H = diag(h), at w where the full gradient is G = H·w, per-sample
    gradients G + ξ, ξ ~ N(0, diag(s²)): exact Hessian-vector products, noisy gradients."""
    h, w, s = np.array([4.0, 1.0, 0.25]), np.array([1.0, -2.0, 4.0]), np.array([3.0, 1.0, 2.0])
    g = h * w
    grads = [g + rng.normal(0, 1, (b, 3)).mean(0) * s for _ in range(micro)]
    mean = np.mean(grads, axis=0)
    dev = [x - mean for x in grads]
    return edge.HvpSums(local_batch=b, mean_sq=float(mean @ mean), mean_h_mean=float(mean @ (h * mean)),
                        deviation_sq=[float(d @ d) for d in dev], deviation_h=[float(d @ (h * d)) for d in dev])


def test_hessian_estimates_recover_the_quadratic_by_hand():
    # by hand: G = (4, -2, 1), |G|² = 21, GᵀHG = 64 + 4 + 0.25 = 68.25, tr(HΣ) = 4·9 + 1·1 + 0.25·4 = 38
    eps_max, b_noise = 21 / 68.25, 38 / 68.25
    rng = np.random.default_rng(7)
    sums = [quadratic_sums(rng, micro=400, b=4) for _ in range(2)]
    found = edge.hvp_estimates(sums)
    assert found is not None
    e, e_sd, n, n_sd = found
    assert e == pytest.approx(eps_max, rel=0.1) and n == pytest.approx(b_noise, rel=0.25)
    assert 0 < e_sd < 0.1 and 0 < n_sd < 0.3


def test_an_unresolved_hessian_says_so():
    flat = edge.HvpSums(local_batch=4, mean_sq=1.0, mean_h_mean=0.0, deviation_sq=[1.0, 1.0], deviation_h=[0.0, 0.0])
    assert edge.hvp_estimates([flat]) is None
    section = edge.section([(None, flat, 0.1, [])], mode=edge.FULL, at_epoch=0.5, batch=8, optimizer="SGD",
                           momentum=0.0, rate=0.01, steps=32, why_not="", probe_s=0.1)
    assert section.eps_max is None and "not resolved" in (section.why_not or "")
    assert "preconditions" in edge.hvp_why_not("AdamW") and edge.hvp_why_not("SGD") == ""


def test_the_rise_is_where_the_smoothed_loss_is_lowest_before_it_climbs():
    rates = edge.ramp(0.01, 8)
    assert rates[0] == pytest.approx(0.001) and rates[-1] == pytest.approx(1.0)
    losses = [2.0, 1.8, 1.5, 1.2, 1.0, 1.3, 3.0, math.nan]     # lowest at step 4, then up (and diverged)
    smooth = edge.smoothed(losses)
    best = min(range(len(smooth)), key=lambda i: smooth[i])
    assert edge.rise_rate(rates, losses) == rates[best]
    assert edge.rise_rate(rates, [2.0, 1.8, 1.7, 1.65]) is None       # never rose: the edge lies beyond


def section(batch, rises, *, momentum=0.0, optimizer="SGD", rate=0.01, eps_max=None, b_noise=None):
    return EdgeSection(mode="full", batch=batch, optimizer=optimizer, momentum=momentum, rate=rate, range_steps=32,
                       step_ratio=edge.step_ratio(32), rise_rates=list(rises),
                       rise_rate=float(np.median([r for r in rises if r])) if any(rises) else None,
                       eps_max=eps_max, eps_max_sd_log=0.1 if eps_max else None, b_noise=b_noise,
                       b_noise_sd_log=0.2 if b_noise else None)


def test_the_curve_through_range_tests_at_two_batches_recovers_the_edge():
    # the truth: ε_edge(B) = 0.3 / (1 + 32/B): 0.3/3 = 0.1 at 16, 0.3/1.25 = 0.24 at 128
    sections = [section(16, [0.1, 0.1]), section(128, [0.24, 0.24])]
    points, hessian, _ = edge.points_of(sections)
    curve = edge.fit_curve(points, hessian, None)
    assert curve is not None and curve.identified
    assert curve.rate(16) == pytest.approx(0.1, rel=0.02) and curve.rate(128) == pytest.approx(0.24, rel=0.02)
    assert 2 * curve.eps_max == pytest.approx(0.3, rel=0.05) and curve.b_noise == pytest.approx(32, rel=0.1)


def test_momentum_moves_a_range_test_towards_the_steady_edge_and_widens_it():
    (plain,), _, plain_shared = edge.points_of([section(16, [0.1])])
    (heavy,), _, heavy_shared = edge.points_of([section(16, [0.1], momentum=0.9)])
    assert heavy.rate == pytest.approx(0.1 * math.sqrt(0.1))       # between 0.1·(1 − μ) and 0.1, geometrically
    assert heavy_shared == pytest.approx(math.hypot(edge.RANGE_MODEL_SD_LOG, 0.5 * math.log(0.1)))
    assert plain_shared == pytest.approx(edge.RANGE_MODEL_SD_LOG) and heavy.sd_log == plain.sd_log
    # a test whose loss never rose is a lower bound at the ramp's top
    (bound,), _, _ = edge.points_of([section(16, [None, None], rate=0.01)])
    assert bound.lower_bound and bound.rate == pytest.approx(0.01 * edge.RANGE_HIGH)


def truth_epochs(b: float, a: float = 1e-4, edge2: float = 0.64, b_noise: float = 32.0) -> float:
    d = 1 - LINEAR.at(b) * (1 + b_noise / b) / edge2
    return a * b / (LINEAR.at(b) * d) if d > 0 else math.inf


def test_the_measured_edge_places_what_the_kept_epochs_cannot_see():
    # epochs generated from a known edge (0.64/(1 + 32/B)), kept 8..64, where D is 0.93..0.81; the edge measured
    # by range tests at 16 and 64 (its true values there, 0.213 and 0.427); 256 and 512 asked
    kept = [BatchPoint(b, tuple(truth_epochs(b) * f for f in (0.95, 1.0, 1.05)), 20.0, lr_scaling=LINEAR)
            for b in (8, 16, 32, 64)]
    sections = [section(16, [0.64 / 3] * 2), section(64, [0.64 / 1.5] * 2)]
    curve = edge.fit_curve(*edge.points_of(sections)[:2], None)
    model = epochs.fit_epochs(kept, None, curve)
    assert model.form == epochs.EDGE_FORM and model.edge is not None
    at256 = model.predict(256)        # by hand: D = 1 − 0.32·1.125/0.64 = 0.4375, E = 1e-4·256/(0.32·0.4375)
    assert at256.epochs == pytest.approx(1e-4 * 256 / (0.32 * 0.4375), rel=0.15)
    assert at256.low < 1e-4 * 256 / (0.32 * 0.4375) < at256.high and at256.p_converge > 0.9
    at512 = model.predict(512)        # by hand: D = 1 − 0.64·1.0625/0.64 < 0: past the edge
    assert at512.epochs is None and at512.status == epochs.PAST_EDGE and at512.p_converge < 0.5


def test_seeds_that_did_not_converge_pull_the_edge_in():
    # the same kept batches, with the range tests reading a far edge (×4 the truth); a 256 whose three seeds all
    # stalled at the 20-epoch cap is data: with it the model gives 256 a lower chance than without
    kept = [BatchPoint(b, tuple(truth_epochs(b) * f for f in (0.95, 1.0, 1.05)), 20.0, lr_scaling=LINEAR)
            for b in (8, 16, 32, 64)]
    far = edge.fit_curve(*edge.points_of([section(16, [4 * 0.64 / 3] * 2), section(64, [4 * 0.64 / 1.5] * 2)])[:2],
                         None)
    stalled = BatchPoint(256, (), 20.0, not_converged=3, lr_scaling=LINEAR)
    without = epochs.fit_epochs(kept, None, far).predict(512).p_converge
    with_it = epochs.fit_epochs([*kept, stalled], None, far).predict(512).p_converge
    assert with_it < without


def test_under_a_rule_that_raises_the_rate_no_faster_than_the_batch_epochs_never_fall():
    kept = [BatchPoint(b, tuple(truth_epochs(b) * f for f in (0.95, 1.0, 1.05)), 20.0, lr_scaling=LINEAR)
            for b in (8, 16, 32, 64)]
    curve = edge.fit_curve(*edge.points_of([section(16, [0.64 / 3] * 2), section(64, [0.64 / 1.5] * 2)])[:2], None)
    model = epochs.fit_epochs(kept, None, curve)
    values = [model.predict(b).epochs for b in (64, 96, 128, 192, 256)]
    assert all(v is not None for v in values) and values == sorted(values)
    assert epochs_edge.denominator(np.array(model.edge.theta), np.array([64.0]), LINEAR)[0] > 0
