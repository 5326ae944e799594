"""Epochs counted at evaluations and the chance of missing a deadline (core.predict.deadline)."""

from __future__ import annotations

import doctest
import math
import random

import pytest

from orchestrator.core.predict import deadline, epochs


def test_module_examples():
    assert doctest.testmod(deadline).failed == 0


def _pred(value=4.0, sd=0.1):
    return epochs.EpochsPrediction(64, value, value * math.exp(-sd), value * math.exp(sd), epochs.INTERPOLATED)


def test_the_run_stops_at_evaluations_and_the_probabilities_add_up():
    d = deadline.distribution(_pred(), eval_every_epochs=0.5)
    rows = d.points()
    assert all(round(e / 0.5, 6) == round(e / 0.5) for e, _ in rows)        # whole evaluations only
    assert sum(p for _, p in rows) == pytest.approx(1.0, abs=2 * deadline.SHOWN_MASS)
    assert max(rows, key=lambda r: r[1])[0] == 4.0        # the prediction is where it most often stops
    assert "evaluations every 0.5" in d.words()


def test_a_deadline_between_evaluations_counts_only_the_evaluations_before_it():
    d = deadline.distribution(_pred(), eval_every_epochs=1.0)
    # 4.9 epochs of time afford the evaluation at 4, not the one at 5: the same chance as 4.0 epochs
    assert d.p_over(4.9) == pytest.approx(d.p_over(4.0))
    assert d.p_over(3.0) > d.p_over(4.0) > d.p_over(5.0) >= 0
    assert d.p_over(0.5) == 1.0          # not one evaluation fits
    continuous = deadline.distribution(_pred(), eval_every_epochs=None)
    assert continuous.points() == [] and continuous.p_over(4.0) == pytest.approx(0.5)


def test_the_risk_is_bounded_by_the_throughput_interval():
    risk = deadline.deadline_risk(_pred(), deadline_h=1.0, samples_per_epoch=3600, samples_per_s=4.2,
                                  samples_per_s_low=3.5, samples_per_s_high=5.0, eval_every_epochs=0.25)
    assert risk.p_miss_fast <= risk.p_miss <= risk.p_miss_slow
    assert "P(time-to-train > 1 h) = " in risk.words() and "at the slow end" in risk.words()
    none = deadline.deadline_risk(epochs.EpochsPrediction(64, 4.0, None, None, epochs.EXTRAPOLATED, "", "why"),
                                  deadline_h=1.0, samples_per_epoch=3600, samples_per_s=4.0, samples_per_s_low=None,
                                  samples_per_s_high=None, eval_every_epochs=0.25)
    assert none is None


def test_seeds_drawn_from_the_model_look_uniform_to_it():
    """Seeds of a known model at 4 batches, counted at evaluations: their chances of being exceeded spread over
    [0, 1] (median near ½, about 80% inside [0.1, 0.9])."""
    rng = random.Random(7)
    step = 0.25
    points = []
    for b in (16, 32, 64, 128):
        true = epochs.critical_batch_epochs(b, 2.0, 100.0)
        seeds = tuple(math.ceil(true * math.exp(rng.gauss(0, 0.12)) / step) * step for _ in range(12))
        points.append(epochs.BatchPoint(b, seeds))
    checks = deadline.seed_checks(points, step)
    over = sorted(c.p_over() for c in checks)
    assert checks and all(c.held_out for c in checks)
    assert 0.3 < over[len(over) // 2] < 0.7
    assert 0.6 < sum(0.1 <= p <= 0.9 for p in over) / len(over) <= 1.0
