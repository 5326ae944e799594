"""Epochs to target under the sweep's learning-rate rule. Pure (numpy).

McCandlish, Kaplan, Amodei et al. (2018, §2.2 and App. A) derive the critical-batch form from one SGD step: at
rate ε a step of batch B improves the loss by

    ΔL(ε) = ε·|G|²·(1 − ε / (2·ε_opt(B))),      ε_opt(B) = ε_max / (1 + B_noise/B)

At the optimal rate at every batch, the steps to a target give their E_min·(1 + B/B_noise) in epochs. A sweep
does not run the optimal rate: it scales a base rate by a rule (`core.planning.lr`), ε(B). With that rate the steps go
as 1/ΔL and the epochs (steps × B ÷ samples per epoch) as

    E(B) = A·B / (ε(B)·D(B)),      D(B) = 1 − k·ε(B)·(1 + B_noise/B),      k = 1/(2·ε_max) ≥ 0

Under the square-root rule with k → 0 this is A·√B; under the linear rule it is flat until the rate nears its
limit (D falls towards 0: the rate twice the optimal one, no progress). B_noise ≈ B_simple (the runs measure it:
`noise_prior`); k and A are fitted; D stays positive (k ≥ 0 bounded) over the batches fitted and predicted.

Fitted by bounded least squares of log epochs over every converged seed (standardized by the seeds' spread),
with B_simple's prior on log B_noise as one more residual. Parameters θ = (log A, u, log B_noise), with
k = u / max g(B) over the batches the rate must be stable at, g(B) = ε(B)·(1 + B_noise/B), and 0 ≤ u ≤ U_MAX: so
D ≥ 1 − U_MAX at each. k and B_noise need two converged batches and B_simple, or three without, and k is
fitted only where the measured epochs need it (freeing it must lower χ² by its 95% point, `K_NEEDED`); else k
is frozen at 0: the rule's k = 0 limit, E ∝ B/ε(B). A k the seeds' noise alone suggests sends the
extrapolation towards D = 0: on the stripes model's batches 16 to 64, B_noise settled where g is flat over
them, k = 119 fitted a 4% drop in χ², and 256 was predicted at 663 epochs (2.4 measured).

Under the square-root rule, k = 0 gives E ∝ √B; with B_noise = 64, g ∝ √B + 64/√B is smallest at 64 (20, 16, 20
at 16, 64, 256), so u = ½ makes D = ½, 0.6, ½: the noise term raises both ends.

>>> s = LrScaling(rule="sqrt", base_lr=0.01, base_batch=32)
>>> b = np.array([16.0, 64.0, 256.0])
>>> def epochs_at(u):
...     theta = np.array([math.log(1e-4), u, math.log(64.0)])
...     return [round(float(e), 3) for e in np.exp(log_epochs(theta, b, s, b)[0])]
>>> epochs_at(0.0), epochs_at(0.5)
([0.226, 0.453, 0.905], [0.453, 0.754, 1.81])
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from orchestrator.core.planning.lr import LrScaling
from orchestrator.core.predict.lsq import Fit, numeric_jacobian, solve
from orchestrator.core.predict.noise_prior import BCritPrior

JOINT, FIT, LIMIT = "joint", "fit", "limit"     # how k and B_noise were had (see the module's docstring)
U_MAX = 0.999                   # D ≥ 0.001 wherever the rate must be stable: at most 1000× the k = 0 limit's epochs
B_NOISE_BOUNDS = (1e-3, 1e12)
SAMPLES = 4000                  # draws of θ from the fit's Laplace approximation, for the band
SAMPLE_SEED = 0                 # the draws are the same every time: a prediction is reproducible
MIN_ACCEPTED = 200              # fewer draws stable at a batch than this: no band there
ONE_SD = (0.158655, 0.841345)   # the band is one sd in log, as the critical-batch model's
B_NOISE_RANGE = (0.05, 0.95)    # the B_noise range a bound must hold over (90% of the draws)
# The drop in χ² (standardized residuals) that freeing k must buy for it to be fitted: the 95% point of χ² with one
# more parameter (B_simple's prior ties B_noise) or two (without it). Below it, the measured epochs cannot tell k
# from 0, and a k fitted to the seeds' noise sends the extrapolation towards D = 0.
K_NEEDED = {False: 3.84, True: 5.99}


def rates(scaling: LrScaling, batches: np.ndarray) -> np.ndarray:
    out: np.ndarray = scaling.base_lr * (batches / scaling.base_batch) ** scaling.exponent
    return out


def log_epochs(theta: np.ndarray, batches: np.ndarray, scaling: LrScaling, span: np.ndarray) -> np.ndarray:
    """log E at `batches` for each row of θ (n × 3, or one θ): shape (n, len(batches)); +inf where D ≤ 0.
    `span`: the batches k is normalized over (D ≥ 1 − u at each of them)."""
    th = np.atleast_2d(theta)
    log_a, u, b_noise = th[:, :1], th[:, 1:2], np.exp(th[:, 2:3])
    eps = rates(scaling, batches)[None, :]
    g = eps * (1 + b_noise / batches[None, :])
    g_max = np.max(rates(scaling, span)[None, :] * (1 + b_noise / span[None, :]), axis=1, keepdims=True)
    d = 1 - u * g / g_max
    with np.errstate(divide="ignore", invalid="ignore"):
        safe_d = np.where(d > 0, d, 1)
        out: np.ndarray = np.where(d > 0, log_a + np.log(batches)[None, :] - np.log(eps) - np.log(safe_d),
                                   np.inf)
    return out


@dataclass(frozen=True, slots=True)
class RuleFit:
    """The fitted θ = (log A, u, log B_noise), its covariance, and what it was fitted to (kept to refit with a
    wider span where a prediction needs the rate stable further out)."""

    scaling: LrScaling
    theta: tuple[float, float, float]
    cov: tuple[tuple[float, ...], ...]
    span: tuple[float, ...]                     # the batches D ≥ 1 − U_MAX is held at
    mode: str                                   # JOINT, FIT or LIMIT
    data: tuple[tuple[float, float], ...]       # (global batch, epochs) of every converged seed
    prior: BCritPrior | None
    seed_sd_log: float
    why_limit: str = ""

    @property
    def a(self) -> float:
        return math.exp(self.theta[0])

    @property
    def b_noise(self) -> float:
        return math.exp(self.theta[2])

    @property
    def k(self) -> float:
        span = np.array(self.span)
        return self.theta[1] / float(np.max(rates(self.scaling, span) * (1 + self.b_noise / span)))

    @property
    def b_noise_at_bound(self) -> bool:
        """B_noise at a bound of its range: the epochs put it beyond every batch (or below), not at a value."""
        return self.mode != LIMIT and _at_bound(self.theta[2])

    def denominator(self, global_batch: float) -> float:
        """D at a batch for the fitted θ."""
        return 1 - self.k * self.scaling.at(global_batch) * (1 + self.b_noise / global_batch)

    def log_curve(self, global_batch: float) -> float:
        return float(log_epochs(np.array(self.theta), np.array([float(global_batch)]), self.scaling,
                                np.array(self.span))[0, 0])

    def covering(self, global_batch: float) -> RuleFit:
        """This fit, or, where its rate is not stable at `global_batch` (D < 1 − U_MAX), the refit with k bounded
        so that it is: predicting a batch assumes the rule still trains there."""
        if self.mode == LIMIT or self.denominator(global_batch) >= 1 - U_MAX - 1e-12:
            return self
        return fit_rule(self.data, self.scaling, self.prior, self.seed_sd_log, (*self.span, float(global_batch)))

    def draws(self) -> np.ndarray:
        """SAMPLES draws of θ from the Laplace approximation, u and B_noise clipped into their bounds."""
        return _draws(self.theta, self.cov)

    def band(self, global_batch: float) -> tuple[float, float | None, float | None, str]:
        """(central epochs, its log distance to the draws' one-sd low and high ends, why no band): the fit's
        uncertainty alone (the seeds' spread and the extrapolation error are the caller's)."""
        fit = self.covering(global_batch)
        central = math.exp(fit.log_curve(global_batch))
        logs = log_epochs(fit.draws(), np.array([float(global_batch)]), self.scaling, np.array(fit.span))[:, 0]
        stable = logs[np.isfinite(logs)]
        if len(stable) < MIN_ACCEPTED:
            return central, None, None, (f"the fit's rate is beyond its stable limit at global batch {global_batch} "
                                         "in nearly every draw: no band")
        low, high = np.quantile(stable, ONE_SD)
        return central, max(0.0, math.log(central) - float(low)), max(0.0, float(high) - math.log(central)), ""

    def b_noise_range(self) -> tuple[float, float]:
        """B_noise over 90% of the draws (k = 0 limit: B_simple's prior's 90% range, or 0 to ∞ without one)."""
        if self.mode == LIMIT:
            return (self.prior.low, self.prior.high) if self.prior is not None else (0.0, math.inf)
        low, high = np.quantile(np.exp(self.draws()[:, 2]), B_NOISE_RANGE)
        return float(low), float(high)


@functools.lru_cache(maxsize=64)
def _draws(theta: tuple[float, float, float], cov: tuple[tuple[float, ...], ...]) -> np.ndarray:
    """The same draws every time for the same fit (a prediction is reproducible), kept for the next batch asked."""
    rng = np.random.default_rng(SAMPLE_SEED)
    out = rng.multivariate_normal(np.array(theta), np.array(cov), size=SAMPLES, method="eigh")
    out[:, 1] = np.clip(out[:, 1], 0.0, U_MAX)
    out[:, 2] = np.clip(out[:, 2], *np.log(B_NOISE_BOUNDS))
    out.setflags(write=False)
    return out


def _residuals(b: np.ndarray, e: np.ndarray, scaling: LrScaling, span: np.ndarray, prior: BCritPrior | None,
               sd: float) -> Callable[[np.ndarray], np.ndarray]:
    def residuals(theta: np.ndarray) -> np.ndarray:
        logs = log_epochs(theta, b, scaling, span)[0]
        out: np.ndarray = (np.where(np.isfinite(logs), logs, 50.0) - np.log(e)) / sd
        if prior is None:
            return out
        return np.append(out, (theta[2] - math.log(prior.b_simple)) / prior.sd_log)

    return residuals


def fit_rule(data: Sequence[tuple[float, float]], scaling: LrScaling, prior: BCritPrior | None, seed_sd_log: float,
             span: Sequence[float] | None = None, *, sd_floor: float = 0.02) -> RuleFit:
    """Fit θ to every converged seed's (global batch, epochs): k and B_noise where two batches and B_simple's
    prior, or three batches, allow and the measured epochs need k (`K_NEEDED`); else the k = 0 limit (A alone)."""
    b = np.array([x for x, _ in data], dtype=float)
    e = np.array([y for _, y in data], dtype=float)
    span_t = tuple(sorted(set(b.tolist()) | set(span or ())))
    batches = len(set(b.tolist()))
    sd = max(seed_sd_log, sd_floor)
    base = _Inputs(scaling, tuple(data), prior, seed_sd_log, span_t)
    if not ((prior is not None and batches >= 2) or batches >= 3):
        why = (f"{batches} converged global batch{'es' if batches != 1 else ''}: k and B_noise need two and B_simple, "
               "or three")
        return _limit_fit(b, e, base, why)
    residuals = _residuals(b, e, scaling, np.array(span_t), prior, sd)
    best = _best(residuals, b, e, scaling, prior)
    # standardized residuals: about 1 each where the form fits as well as the seeds agree; where the epochs
    # scatter more, their part of the information is scaled down (the prior's is not)
    n, free = len(e), 2 if prior is not None else 3
    scale = max(1.0, float(np.sum(best.fun[:n] ** 2)) / max(1, n - free))
    limit = _limit_fit(b, e, base, "")
    gain = (float(np.sum(residuals(np.array(limit.theta)) ** 2)) - 2 * best.cost) / scale
    needed = K_NEEDED[prior is None]
    if gain < needed:
        return _limit_fit(b, e, base, f"the measured epochs do not need k: freeing it lowers χ² by {gain:.2f}, "
                                      f"less than {needed} (95% for {1 if prior is not None else 2} more "
                                      "parameter(s)), so it is not fitted to the seeds' noise")
    data_j, prior_j = best.jac[:n].copy(), best.jac[n:].copy()
    if _at_bound(float(best.x[2])):     # B_noise beyond what the batches resolve: frozen there, not sampled
        data_j[:, 2], prior_j[:, 2] = 0.0, 0.0
    cov = np.linalg.pinv(data_j.T @ data_j / scale + prior_j.T @ prior_j)
    return base.fit((float(best.x[0]), float(best.x[1]), float(best.x[2])),
                    tuple(tuple(float(v) for v in row) for row in cov), JOINT if prior is not None else FIT)


def _at_bound(log_b_noise: float) -> bool:
    return min(abs(log_b_noise - math.log(x)) for x in B_NOISE_BOUNDS) < 1e-6


def _best(residuals: Callable[[np.ndarray], np.ndarray], b: np.ndarray, e: np.ndarray, scaling: LrScaling,
          prior: BCritPrior | None) -> Fit:
    """The lowest-cost fit from a few starts of u (and of B_noise, without its prior)."""
    lower = np.array([-50.0, 0.0, math.log(B_NOISE_BOUNDS[0])])
    upper = np.array([50.0, U_MAX, math.log(B_NOISE_BOUNDS[1])])
    log_a0 = float(np.mean(np.log(e) - np.log(b) + np.log(rates(scaling, b))))
    centres = ([math.log(prior.b_simple)] if prior is not None else
               [math.log(x) for x in (float(b.min()), float(np.median(b)), 4 * float(b.max()))])
    best = None
    for u0 in (0.0, 0.5, 0.9):
        for c in centres:
            fit = solve(residuals, numeric_jacobian(residuals), np.array([log_a0, u0, c]), lower, upper)
            if best is None or fit.cost < best.cost:
                best = fit
    assert best is not None
    return best


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What a fit was made from, kept in the RuleFit it gives."""

    scaling: LrScaling
    data: tuple[tuple[float, float], ...]
    prior: BCritPrior | None
    seed_sd_log: float
    span: tuple[float, ...]

    def fit(self, theta: tuple[float, float, float], cov: tuple[tuple[float, ...], ...], mode: str,
            why_limit: str = "") -> RuleFit:
        return RuleFit(scaling=self.scaling, theta=theta, cov=cov, span=self.span, mode=mode, data=self.data,
                       prior=self.prior, seed_sd_log=self.seed_sd_log, why_limit=why_limit)


def _limit_fit(b: np.ndarray, e: np.ndarray, base: _Inputs, why: str) -> RuleFit:
    """k frozen at 0: log A is the mean of log(E·ε/B) over the seeds, its variance their spread over their count."""
    logs = np.log(e) - np.log(b) + np.log(rates(base.scaling, b))
    var = float(np.var(logs, ddof=1)) / len(logs) if len(logs) > 1 else 0.0
    centre = math.log(base.prior.b_simple) if base.prior is not None else 0.0
    cov = ((var, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    return base.fit((float(np.mean(logs)), 0.0, centre), cov, LIMIT, why)


@dataclass(frozen=True, slots=True)
class Bound:
    """A physical bound on a run's epochs at a batch, from a measured neighbour, and why it holds."""

    epochs: float
    low: bool               # True: a lower bound; False: an upper one
    why: str


def bounds(global_batch: float, means: Sequence[tuple[int, float]], scaling: LrScaling,
           b_noise_range: tuple[float, float], spread_log: float) -> list[Bound]:
    """The bounds the measured epochs give at `global_batch` (`means`: (batch, olympic mean) of the converged
    batches), each at one `spread_log` (the seeds' sd) beyond the neighbour's mean:

    - the k = 0 limit: E(B)/E(b) = (B/ε(B))/(b/ε(b)) · D(b)/D(B) for any k ≥ 0, so the k = 0 ratio bounds it from
      below where g = ε·(1 + B_noise/B) is at least as large at B as at b for every B_noise in range (D(B) ≤ D(b)),
      from above where it is at most as large;
    - the order: a rule that does not raise the rate per sample (ε(B)/B never grows: none, sqrt and linear) with
      the measured epochs rising over the batches: a larger batch needs no fewer epochs than a smaller one.

    >>> s = LrScaling(rule="sqrt", base_lr=0.01, base_batch=32)
    >>> [(round(x.epochs, 3), x.low) for x in bounds(256, [(16, 0.75), (64, 1.3)], s, (20.0, 60.0), 0.0)]
    [(2.6, True), (1.3, True)]
    """
    below = [(b, e) for b, e in means if b < global_batch]
    above = [(b, e) for b, e in means if b > global_batch]
    rising = all(e1 <= e2 for (_, e1), (_, e2) in zip(means, means[1:]))
    out = []
    for anchor, low_side in ((max(below) if below else None, True), (min(above) if above else None, False)):
        if anchor is None:
            continue
        b, e = anchor
        ratio = (global_batch / scaling.at(global_batch)) / (b / scaling.at(b))
        rise = [_g_rise(global_batch, b, scaling, bn) for bn in b_noise_range]
        side = True if all(r >= 0 for r in rise) else False if all(r <= 0 for r in rise) else None
        if side is not None:
            value = e * ratio * math.exp(-spread_log if side else spread_log)
            out.append(Bound(value, side, f"the rule's k = 0 limit from global batch {b} "
                                          f"({'lower' if side else 'upper'} bound)"))
        if rising and scaling.exponent <= 1:
            value = e * math.exp(-spread_log if low_side else spread_log)
            out.append(Bound(value, low_side, f"epochs rise with the batch, as measured up to global batch {b}"
                             if low_side else f"epochs rise with the batch, as measured from global batch {b}"))
    return out


def _g_rise(batch: float, anchor: float, scaling: LrScaling, b_noise: float) -> float:
    """g(batch) − g(anchor), g = ε·(1 + B_noise/B); at B_noise = ∞ the sign of its B_noise term."""
    eps, eps0 = scaling.at(batch), scaling.at(anchor)
    per = eps / batch - eps0 / anchor
    if math.isinf(b_noise):
        return per if per != 0 else eps - eps0
    return eps - eps0 + b_noise * per


def apply_bounds(central: float, low: float, high: float, found: Sequence[Bound]) -> tuple[float, float, float, str]:
    """The band raised / lowered to the bounds, the central value kept inside it; what moved, in words."""
    moved: list[str] = []
    for x in found:
        if x.low and x.epochs > low:
            low, moved = x.epochs, [*moved, f"low end {x.why}"]
        elif not x.low and x.epochs < high:
            high, moved = x.epochs, [*moved, f"high end {x.why}"]
    high = max(high, low)
    return min(max(central, low), high), low, high, "; ".join(moved)

