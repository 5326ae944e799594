"""The noise-scale estimator (core.measured.noise_scale) on gradients whose |G|² and tr(Σ) are known: per-sample
gradients drawn around a true gradient, averaged at the two batch sizes as the ranks average them."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.core.measured import noise_scale as ns
from orchestrator.core.measured.records import ConvergenceSection

DIM = 50


def _steps(rng, *, small, big, steps, g_norm=1.0, sigma=1.0, ranks=None):
    """Per step: the mean over ranks of each rank's squared norm (batch `small`), and the global one (`big`)."""
    true_g = np.zeros(DIM)
    true_g[0] = g_norm
    ranks = ranks or big // small
    for _ in range(steps):
        samples = true_g + sigma * rng.standard_normal((big, DIM))
        local = samples.reshape(ranks, -1, DIM).mean(axis=1)
        yield float(np.mean((local ** 2).sum(axis=1))), float((samples.mean(axis=0) ** 2).sum())


def test_the_two_estimates_are_unbiased():
    rng = np.random.default_rng(0)
    pairs = [ns.unbiased(s, b, 8, 32) for s, b in _steps(rng, small=8, big=32, steps=4000)]
    g2, trace = np.mean(pairs, axis=0)
    assert g2 == pytest.approx(1.0, rel=0.05) and trace == pytest.approx(DIM, rel=0.05)


@pytest.mark.parametrize("small, big", [(8, 16), (16, 64), (64, 128)])
def test_b_simple_is_the_ratio_and_its_interval_covers_it(small, big):
    """tr(Σ)/|G|² = 50/1: the 90% interval holds it in about 9 runs of 10 (independent runs, 300 steps each)."""
    rng = np.random.default_rng(small * big)
    inside, values = 0, []
    for _ in range(40):
        meter = ns.NoiseMeter(small_batch=small, big_batch=big)
        for s, b in _steps(rng, small=small, big=big, steps=300):
            meter.add(small_sq=s, big_sq=b)
        est = meter.estimate()
        assert est.b_simple is not None and est.low is not None
        values.append(est.b_simple)
        inside += est.low <= DIM and (est.high is None or DIM <= est.high)
    assert np.median(values) == pytest.approx(DIM, rel=0.25)
    assert 30 <= inside <= 40      # 90% nominal: 36 of 40 expected


def test_a_ratio_of_averages_not_an_average_of_ratios():
    """Steps whose |G|² estimate is near zero (or negative) give wild per-step ratios; the meter's ratio of
    averages stays near the truth where their mean is far off."""
    rng = np.random.default_rng(3)
    meter = ns.NoiseMeter(small_batch=8, big_batch=16)
    ratios = []
    for s, b in _steps(rng, small=8, big=16, steps=500, g_norm=1.5):
        meter.add(small_sq=s, big_sq=b)
        g2, trace = ns.unbiased(s, b, 8, 16)
        ratios.append(trace / g2)
    truth = DIM / 1.5 ** 2
    assert meter.estimate().b_simple == pytest.approx(truth, rel=0.3)
    assert abs(np.mean(ratios) - truth) > 0.5 * truth


def test_noise_that_swamps_the_gradient_is_said_not_guessed():
    rng = np.random.default_rng(1)
    meter = ns.NoiseMeter(small_batch=2, big_batch=4)
    for s, b in _steps(rng, small=2, big=4, steps=30, g_norm=0.01, sigma=3.0):
        meter.add(small_sq=s, big_sq=b)
    est = meter.estimate()
    assert est.b_simple is None or est.high is None      # not resolved, or unbounded above
    section = ns.section(meter, method=ns.DDP, at_epoch=1.0, epochs=[])
    if est.b_simple is None:
        assert "noise dominates" in section.why_not


def test_bad_batches_and_non_finite_steps():
    with pytest.raises(ValueError, match=r"0 < small\(8\) < big\(8\)"):
        ns.NoiseMeter(small_batch=8, big_batch=8)
    meter = ns.NoiseMeter(small_batch=8, big_batch=16)
    meter.add(small_sq=float("nan"), big_sq=1.0)
    assert meter.steps == 0 and meter.estimate().b_simple is None


def test_the_section_is_written_and_read_back_inside_the_convergence_section():
    meter = ns.NoiseMeter(small_batch=32, big_batch=64)
    for step in range(100):
        meter.add(small_sq=3.0 + 0.01 * (step % 3), big_sq=2.0)
    section = ns.section(meter, method=ns.DDP, at_epoch=1.5, epochs=[[1.0, 60.0, 50.0, 70.0]])
    conv = ConvergenceSection(converged=True, epochs_to_target=1.5).with_fields(noise_scale=section)
    back = ConvergenceSection.from_json(conv.to_json())
    assert back.noise_scale == section and back.noise_scale.b_simple == pytest.approx(64, rel=0.02)
    assert back.noise_scale.epochs[-1] == [1.0, 60.0, 50.0, 70.0]
    # a record written before the field has none, and writes none back
    old = ConvergenceSection.from_json({"converged": True, "epochs_to_target": 2.0})
    assert old.noise_scale is None and "noise_scale" not in old.to_json()
    assert ns.not_measured("why").to_json() == {"why_not": "why"}
