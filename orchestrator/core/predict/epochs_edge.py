"""Epochs to target under the sweep's learning-rate rule, with the stability edge measured instead of fitted. Pure.

The rule's form (`epochs_lr`): at rate ε(B) a step improves the loss in proportion to ε·D, D = 1 − ε(B)/ε_edge(B),
so the epochs go as

    E(B) = A·B / (ε(B)·D(B)),      ε_edge(B) = 2·ε_max/(1 + B_noise/B)      (`edge.EdgeCurve`)

and D reaches 0 where the rule's rate meets the edge: past it the run stalls or diverges. A warm-up (the rate ramped
from base_lr over its first W epochs) is counted as the progress it makes (`log_epochs`): a task that converges in
a few epochs spends much of them warming up, and its epochs would otherwise read as D falling. Batches small enough to
converge in a sweep do not see the edge in their epochs (D ≈ 1 there), so it is measured (`edge`: range tests,
Hessian-vector products, B_simple) and enters the fit as a prior: θ = (log A, log 2ε_max, log B_noise) by least
squares over every converged seed (log epochs, standardized by the seeds' spread), every seed that did not
converge (censored: the model must reach its cap, or put the batch past the edge), and the measured edge's two
parameters (whitened by their covariance). How far the kept epochs moved the measured edge is said.

A prediction is drawn: θ from the fit's Laplace approximation, a seed's spread on top. P(converge) is the share of
draws in which the batch is inside the edge and its epochs within the runs' cap; the epochs and their band are
the median and one-sd quantiles of the draws inside the edge. Where P(converge) < ½ no epoch count is printed:
the rule does not train there, or only by chance.

>>> from orchestrator.core.planning.lr import LrScaling
>>> s = LrScaling(rule="linear", base_lr=0.02, base_batch=16)
>>> theta = np.array([math.log(0.05), math.log(0.64), math.log(32.0)])   # edge 0.64/(1 + 32/B)
>>> [round(float(d), 4) for d in denominator(theta, np.array([16.0, 64.0, 512.0]), s)]   # 1 − 0.02·3/0.64, ...
[0.9062, 0.8125, -0.0625]
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from orchestrator.core.planning.lr import LrScaling
from orchestrator.core.predict.edge import EdgeCurve
from orchestrator.core.predict.lsq import numeric_jacobian, solve

SAMPLES = 4000
SAMPLE_SEED = 0
ONE_SD = (0.158655, 0.841345)
DIVERGED = 50.0           # the residual of a converged seed the parameters put past the edge (in its sd units)
# The form's own error beside the seeds' spread, one sd in log: one early probe of the edge and a one-step theory of
# the loss do not make the epochs exact even where the seeds agree (an assumption, 10%).
SEED_SD_FLOOR_LOG = 0.1


def rates(scaling: LrScaling, batches: np.ndarray) -> np.ndarray:
    out: np.ndarray = scaling.base_lr * (batches / scaling.base_batch) ** scaling.exponent
    return out


def denominator(theta: np.ndarray, batches: np.ndarray, scaling: LrScaling) -> np.ndarray:
    """D(B) = 1 − ε(B)·(1 + B_noise/B)/(2ε_max) for each row of θ (or one θ)."""
    th = np.atleast_2d(theta)
    edge2, b_noise = np.exp(th[:, 1:2]), np.exp(th[:, 2:3])
    out: np.ndarray = 1 - rates(scaling, batches)[None, :] * (1 + b_noise / batches[None, :]) / edge2
    return out[0] if np.ndim(theta) == 1 else out


def log_epochs(theta: np.ndarray, batches: np.ndarray, scaling: LrScaling) -> np.ndarray:
    """log E(B) (+inf where the rule's rate is at or past the edge), per row of θ, the warm-up counted.

    Progress per epoch at rate ε is r(ε) = ε·D(ε)/B = (ε − c·ε²)/B, c = (1 + B_noise/B)/(2ε_max). The target is A
    of it. Over a warm-up of W epochs the rate ramps linearly from base_lr to ε(B), which makes
    P_w = W/B·((ε₀ + ε₁)/2 − c·(ε₀² + ε₀ε₁ + ε₁²)/3); a run that reaches A after it takes W + (A − P_w)/r(ε₁),
    one that reaches it during the warm-up the t that solves the cubic (by bisection). Without warm-up: A·B/(ε·D)."""
    th = np.atleast_2d(theta)
    a, edge2, b_noise = np.exp(th[:, :1]), np.exp(th[:, 1:2]), np.exp(th[:, 2:3])
    b = batches[None, :]
    e1 = rates(scaling, batches)[None, :]
    c = (1 + b_noise / b) / edge2
    r1 = (e1 - c * e1 * e1) / b
    w, e0 = scaling.warmup_epochs, scaling.base_lr
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if w <= 0:
            out = np.where(r1 > 0, np.log(a / np.where(r1 > 0, r1, 1.0)), np.inf)
        else:
            p_w = w / b * ((e0 + e1) / 2 - c * (e0 * e0 + e0 * e1 + e1 * e1) / 3)
            after = np.where(r1 > 0, w + (a - p_w) / np.where(r1 > 0, r1, 1.0), np.inf)
            during = _within_warmup(a, b, c, e0, e1, w)
            out = np.log(np.where(a > p_w, after, during))
    result: np.ndarray = np.where(np.isnan(out), np.inf, out)
    return result[0] if np.ndim(theta) == 1 else result


def _within_warmup(a: np.ndarray, b: np.ndarray, c: np.ndarray, e0: float, e1: np.ndarray, w: float) -> np.ndarray:
    """The t ≤ W at which the progress over the ramp reaches A (bisection; W where it does not: the caller uses the
    after-warm-up branch there)."""
    lo, hi = np.zeros(np.broadcast(a, c).shape), np.full(np.broadcast(a, c).shape, w)

    def progress(t: np.ndarray) -> np.ndarray:
        # ∫0^t (ε(s) − c·ε(s)²)/B ds with ε(s) = e0 + (e1 − e0)·s/W
        k = (e1 - e0) / w
        out: np.ndarray = (e0 * t + k * t * t / 2 - c * (e0 * e0 * t + e0 * k * t * t + k * k * t ** 3 / 3)) / b
        return out

    for _ in range(40):
        mid = (lo + hi) / 2
        below = progress(mid) < a
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    found: np.ndarray = (lo + hi) / 2
    return found


@dataclass(frozen=True, slots=True)
class EdgeEpochsFit:
    """The fitted θ and covariance, what it was fitted to, and how the kept epochs moved the measured edge."""

    scaling: LrScaling
    theta: tuple[float, float, float]
    cov: tuple[tuple[float, ...], ...]
    curve: EdgeCurve
    seed_sd_log: float
    cap_epochs: float | None
    moved_sd: float            # the fitted edge parameters' distance from the measured ones, in their sd (Mahalanobis)
    kept_batches: tuple[int, ...]

    @property
    def edge2(self) -> float:
        return math.exp(self.theta[1])

    @property
    def b_noise(self) -> float:
        return math.exp(self.theta[2])

    def edge_rate(self, batch: float) -> float:
        return self.edge2 / (1 + self.b_noise / batch)

    def d(self, batch: float) -> float:
        return float(denominator(np.array(self.theta), np.array([float(batch)]), self.scaling)[0])

    def draws(self) -> np.ndarray:
        rng = np.random.default_rng(SAMPLE_SEED)
        return rng.multivariate_normal(np.array(self.theta), np.array(self.cov), size=SAMPLES, method="eigh")

    def agreement(self) -> str:
        """Whether the kept batches' epochs agree with the measured edge, in words."""
        verdict = ("agree with it" if self.moved_sd < 2 else "do not agree with it: the fit moved it by "
                   f"{self.moved_sd:.1f} sd; the edge the epochs imply is used, and the measured one's prior held it")
        kept = ", ".join(map(str, self.kept_batches))
        return f"measured edge ({self.curve.words()}); the kept batches' epochs ({kept}) {verdict}"

    def predict(self, batch: float) -> tuple[float | None, float | None, float | None, float, float]:
        """(median epochs inside the edge, its one-sd low and high, P(converge within the cap), D at the fit) at a
        batch; the epochs are None where fewer than half the draws lie inside the edge."""
        th = self.draws()
        logs = log_epochs(th, np.array([float(batch)]), self.scaling)[:, 0]
        rng = np.random.default_rng(SAMPLE_SEED + 1)
        noisy = logs + rng.normal(0.0, self.seed_sd_log, size=len(logs))
        inside = np.isfinite(noisy)
        converge = inside & (noisy <= math.log(self.cap_epochs)) if self.cap_epochs else inside
        p = float(np.mean(converge))
        if np.mean(inside) < 0.5:
            return None, None, None, p, self.d(batch)
        low, mid, high = np.quantile(noisy[inside], (ONE_SD[0], 0.5, ONE_SD[1]))
        return float(math.exp(mid)), float(math.exp(low)), float(math.exp(high)), p, self.d(batch)


def fit(converged: Sequence[tuple[float, float]], censored: Sequence[tuple[float, float]], scaling: LrScaling,
        curve: EdgeCurve, seed_sd_log: float, cap_epochs: float | None) -> EdgeEpochsFit:
    """θ from the converged seeds' (batch, epochs), the seeds that did not converge (batch, the epochs they ran), and
    the measured edge `curve` as a prior on (log 2ε_max, log B_noise)."""
    b = np.array([x for x, _ in converged], dtype=float)
    e = np.log(np.array([y for _, y in converged], dtype=float))
    cb = np.array([x for x, _ in censored], dtype=float)
    ce = np.log(np.array([y for _, y in censored], dtype=float)) if censored else np.array([])
    sd = max(seed_sd_log, SEED_SD_FLOOR_LOG)
    prior_mean = np.array(curve.theta)
    whiten = np.linalg.cholesky(np.linalg.inv(np.array(curve.cov) + np.eye(2) * 1e-12))

    def residuals(theta: np.ndarray) -> np.ndarray:
        model = log_epochs(theta, b, scaling)
        seeds = np.where(np.isfinite(model), (model - e) / sd, DIVERGED)
        out = [seeds]
        if len(cb):
            cm = log_epochs(theta, cb, scaling)
            out.append(np.where(np.isfinite(cm), np.maximum(ce - cm, 0.0) / sd, 0.0))   # a stall past the edge: fine
        out.append(whiten.T @ (theta[1:] - prior_mean))
        return np.concatenate(out)

    start = _start(b, e, scaling, prior_mean)
    lower = np.array([-60.0, prior_mean[0] - 12, -10.0])
    upper = np.array([60.0, prior_mean[0] + 12, 40.0])
    found = solve(residuals, numeric_jacobian(residuals), start, lower, upper)
    n, free = len(e), 3
    scale = max(1.0, float(np.sum(found.fun[:n] ** 2)) / max(1, n - free + 2))
    jac = found.jac
    data_j, prior_j = jac[: len(found.fun) - 2], jac[len(found.fun) - 2:]
    cov = np.linalg.pinv(data_j.T @ data_j / scale + prior_j.T @ prior_j)
    gap = found.x[1:] - prior_mean
    moved = float(math.sqrt(max(gap @ np.linalg.inv(np.array(curve.cov) + np.eye(2) * 1e-12) @ gap, 0.0)))
    return EdgeEpochsFit(scaling, (float(found.x[0]), float(found.x[1]), float(found.x[2])),
                         tuple(tuple(float(v) for v in row) for row in cov), curve, seed_sd_log, cap_epochs, moved,
                         tuple(sorted({int(x) for x in b})))


def _start(b: np.ndarray, e: np.ndarray, scaling: LrScaling, prior: np.ndarray) -> np.ndarray:
    """log A from the seeds at the measured edge (D as it puts it, floored), the edge's own parameters."""
    theta = np.array([0.0, prior[0], prior[1]])
    d = np.maximum(denominator(theta, b, scaling), 0.05)
    log_a = float(statistics.mean((e - np.log(b) + np.log(rates(scaling, b)) + np.log(d)).tolist()))
    return np.array([log_a, prior[0], prior[1]])
