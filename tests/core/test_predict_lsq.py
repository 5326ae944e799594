"""The prediction's bounded least squares (numpy only) against scipy's on problems with a known answer and
on random ones: the same minimum, parameters held at their bounds where the gradient points out."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares

from orchestrator.core.predict import lsq


def _problem(seed: int):
    """A sum of two exponentials in log space with noise, bounded: smooth, sometimes with a bound active."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 3.0, 12)
    truth = rng.uniform([0.5, 0.1, 0.2, 0.5], [3.0, 1.5, 2.0, 2.5])
    y = np.log(truth[0] * np.exp(-truth[1] * t) + truth[2] * np.exp(-truth[3] * t)) + rng.normal(0, 0.02, t.size)

    def residuals(p):
        return np.log(p[0] * np.exp(-p[1] * t) + p[2] * np.exp(-p[3] * t)) - y

    lower, upper = np.array([0.01, 0.0, 0.01, 0.0]), np.array([10.0, 1.0, 10.0, 3.0])
    return residuals, lower, upper, np.array([1.0, 0.5, 1.0, 1.0])


@pytest.mark.parametrize("seed", range(12))
def test_same_minimum_as_scipy(seed):
    residuals, lower, upper, x0 = _problem(seed)
    ours = lsq.solve(residuals, lsq.numeric_jacobian(residuals), x0, lower, upper)
    theirs = least_squares(residuals, x0, bounds=(lower, upper), x_scale="jac")
    assert ours.success
    assert ours.cost <= theirs.cost * (1 + 1e-6) + 1e-12
    assert np.all(ours.x >= lower) and np.all(ours.x <= upper)


def test_a_parameter_pushed_out_of_the_box_stays_on_its_bound():
    x = np.linspace(0, 1, 5)

    def residuals(p):
        return p[0] + p[1] * x - (1.0 + 3.0 * x)      # wants p[1] = 3, the box stops it at 2

    fit = lsq.solve(residuals, lsq.numeric_jacobian(residuals), np.array([0.0, 0.0]), np.array([-5.0, 0.0]),
                    np.array([5.0, 2.0]))
    assert fit.x[1] == 2.0 and fit.x[0] == pytest.approx(1.5, abs=1e-6) and fit.success
