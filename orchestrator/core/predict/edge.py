"""The stability edge: the learning rate past which a step of batch B makes the loss worse, measured in convergence
runs (`run.rank.edge`) and fitted across batches. Pure (numpy).

One SGD step (McCandlish, Kaplan, Amodei et al. 2018, App. A) lowers the loss by ε|G|² − ½ε²(GᵀHG + tr(HΣ)/B):
negative past twice the optimal rate,

    ε_edge(B) = 2·ε_max / (1 + B_noise/B),      ε_max = |G|²/GᵀHG,   B_noise = tr(HΣ)/GᵀHG

in the rate the optimizer is given (with momentum μ the step is ε/(1 − μ), so its edge in the given rate is (1 − μ)
times plain SGD's). Measured two ways:

- a learning-rate range test: geometrically growing rates (a tenth of the run's rate to a hundred times it), the
  rate at the smoothed loss's lowest point (`rise_rate`): past it the loss rises, so it is the edge at the batch
  the steps took. With several ranks each tests on its own shard, and their spread is the uncertainty;
- Hessian-vector products (SGD): from micro-batch gradients g_j (batch b, M of them), their mean Ĝ and d_j = g_j − Ĝ,

      tr(Σ)/b ≈ Σ|d_j|²/(M−1),  |G|² ≈ |Ĝ|² − tr(Σ)/(M·b),  tr(HΣ)/b ≈ Σ d_jᵀH d_j/(M−1),  GᵀHG ≈ ĜᵀHĜ − tr(HΣ)/(M·b)

  (each H from another micro-batch than its vector, so the two noises are independent), with a jackknife over
  the micro-batches and the ranks' spread for the uncertainty.

`EdgeCurve` fits log ε_edge(B) through every measurement of the kept batches: log(2ε_max) and log B_noise, the
range tests' points (a test whose loss never rose is a lower bound), the Hessian's estimates, and B_simple's prior
on B_noise where the runs measured it.

>>> [round(r, 4) for r in ramp(0.1, 4)]
[0.01, 0.1, 1.0, 10.0]
>>> rise_rate([0.01, 0.1, 1.0, 10.0, 100.0], [2.0, 1.5, 1.0, 1.6, 9.0])
1.0
>>> rise_rate([0.01, 0.1, 1.0], [2.0, 1.5, 1.2]) is None       # still falling at the top: the edge lies beyond
True
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from orchestrator.core.measured import records as rec
from orchestrator.core.predict.lsq import numeric_jacobian, solve

AUTO, FULL, OFF = "auto", "full", "none"
MODES = (AUTO, FULL, OFF)
# Range test: steps, and the span of rates around the run's own (a tenth to a hundred times).
RANGE_STEPS = {AUTO: 16, FULL: 32, OFF: 0}
RANGE_LOW, RANGE_HIGH = 0.1, 100.0
SMOOTHING = 0.5              # the loss's exponential smoothing per step (bias-corrected)
RISE = 1.10                  # the smoothed loss must rise this far above its lowest point to count as rising
HVP_MICRO_BATCHES = 6
# One standard deviation, in log, of how far a range test's rise may lie from the true edge beyond the ranks'
# spread: the ramp's own step (the rise is known to one step) and the smoothing's lag of about one step.
RAMP_STEP_SD = 1.0
# How far a range test's rise may lie from the edge a steady run meets, one sd in log, beyond the ramp's step and
# the ranks' spread: an assumption (a factor of 1.5), which the kept batches' epochs check (`epochs_edge`).
RANGE_MODEL_SD_LOG = math.log(1.5)
# How far the Hessian's B_noise may lie from the one a whole run sees (it grows as training goes on; the probe is
# one early point of the run), shared by every estimate: an assumption, a factor of 3 at one sd, as B_simple's
# distance from B_crit (`noise_prior`).
HESSIAN_MODEL_SD_LOG = math.log(3.0)
SGD_LIKE = ("SGD",)


def ramp(rate: float, steps: int) -> list[float]:
    """`steps` rates growing geometrically from rate·RANGE_LOW to rate·RANGE_HIGH."""
    if steps < 2:
        return [rate]
    ratio = (RANGE_HIGH / RANGE_LOW) ** (1 / (steps - 1))
    return [rate * RANGE_LOW * ratio**i for i in range(steps)]


def step_ratio(steps: int) -> float:
    return float((RANGE_HIGH / RANGE_LOW) ** (1 / max(1, steps - 1)))


def smoothed(losses: Sequence[float]) -> list[float]:
    """Exponential smoothing with bias correction; a non-finite loss ends the curve (the test diverged there)."""
    out, avg = [], 0.0
    for i, loss in enumerate(losses):
        if not math.isfinite(loss):
            out.append(math.inf)
            break
        avg = SMOOTHING * avg + (1 - SMOOTHING) * loss
        out.append(avg / (1 - SMOOTHING ** (i + 1)))
    return out


def rise_rate(rates: Sequence[float], losses: Sequence[float]) -> float | None:
    """The rate at the smoothed loss's lowest point, where it starts to rise (RISE above it later on); None where
    it never does within the ramp (the edge lies beyond its top)."""
    curve = smoothed(losses)
    if not curve:
        return None
    best = min(range(len(curve)), key=lambda i: curve[i])
    rose = any(c > curve[best] * RISE for c in curve[best + 1:])
    return rates[best] if rose and best < len(rates) else None


def hvp_why_not(optimizer: str) -> str:
    """Why Hessian-vector products cannot place this optimizer's edge ('' where they can)."""
    if optimizer in SGD_LIKE:
        return ""
    return (f"{optimizer} preconditions its step: the plain Hessian is not the one its step sees, so only the range "
            "test places its edge")


@dataclass(frozen=True, slots=True)
class HvpSums:
    """One rank's Hessian-vector sums over its micro-batches of `local_batch` samples."""

    local_batch: int
    mean_sq: float                # |Ĝ|²
    mean_h_mean: float            # Ĝ·HĜ
    deviation_sq: list[float]     # |d_j|², per micro-batch
    deviation_h: list[float]      # d_j·H d_j, per micro-batch


def _estimate(s: HvpSums, drop: int | None = None) -> tuple[float, float] | None:
    """(ε_max, B_noise) from one rank's sums, without micro-batch `drop`'s terms (a jackknife replicate)."""
    keep = [j for j in range(len(s.deviation_sq)) if j != drop]
    m = len(s.deviation_sq)
    if len(keep) < 2:
        return None
    trace_sigma = sum(s.deviation_sq[j] for j in keep) / (len(keep) - 1)       # tr(Σ)/b
    trace_h_sigma = sum(s.deviation_h[j] for j in keep) / (len(keep) - 1)     # tr(HΣ)/b
    g2 = s.mean_sq - trace_sigma / m
    ghg = s.mean_h_mean - trace_h_sigma / m
    if g2 <= 0 or ghg <= 0 or trace_h_sigma <= 0:
        return None
    return g2 / ghg, s.local_batch * trace_h_sigma / ghg


def hvp_estimates(sums: Sequence[HvpSums]) -> tuple[float, float, float, float] | None:
    """(ε_max, its sd in log, B_noise, its sd in log) pooled over the ranks (geometric means); the sd combines each
    rank's jackknife over its micro-batches and, with two ranks or more, their spread. None where GᵀHG or |G|² is
    not resolved above its noise (a flat or non-convex direction: no edge from the Hessian there)."""
    per_rank = []
    for s in sums:
        whole = _estimate(s)
        if whole is None:
            continue
        reps = [r for j in range(len(s.deviation_sq)) if (r := _estimate(s, j)) is not None]
        per_rank.append((whole, jackknife_sd_log([e for e, _ in reps]), jackknife_sd_log([n for _, n in reps])))
    if not per_rank:
        return None
    k = len(per_rank)
    logs_e = [math.log(w[0]) for w, _, _ in per_rank]
    logs_n = [math.log(w[1]) for w, _, _ in per_rank]
    within_e = math.sqrt(statistics.mean(sd * sd for _, sd, _ in per_rank) / k)
    within_n = math.sqrt(statistics.mean(sd * sd for _, _, sd in per_rank) / k)
    between_e = statistics.stdev(logs_e) / math.sqrt(k) if k > 1 else 0.0
    between_n = statistics.stdev(logs_n) / math.sqrt(k) if k > 1 else 0.0
    return (math.exp(statistics.mean(logs_e)), math.hypot(within_e, between_e), math.exp(statistics.mean(logs_n)),
            math.hypot(within_n, between_n))


def jackknife_sd_log(values: Sequence[float]) -> float:
    """The jackknife's standard deviation of a log estimate from its leave-one-out replicates."""
    logs = [math.log(v) for v in values if v > 0]
    n = len(logs)
    if n < 2:
        return math.inf
    mean = statistics.mean(logs)
    return math.sqrt((n - 1) / n * sum((x - mean) ** 2 for x in logs))


def section(pooled: Sequence[tuple[object, ...]], *, mode: str, at_epoch: float, batch: int, optimizer: str,
            momentum: float, rate: float, steps: int, why_not: str, probe_s: float) -> rec.EdgeSection:
    """The record's edge section from every rank's (rise rate, HVP sums, first rate, losses)."""
    rises = [r for r, *_ in pooled if isinstance(r, float)]
    sums = [s for _, s, *_ in pooled if isinstance(s, HvpSums)]
    hvp = hvp_estimates(sums) if sums else None
    eps_max = b_noise = eps_sd = noise_sd = None
    if hvp is not None:
        eps_max, eps_sd, b_noise, noise_sd = hvp
    elif sums and not why_not:
        why_not = "the Hessian's curvature along the gradient was not resolved above its noise"
    return rec.EdgeSection(
        mode=mode, at_epoch=round(at_epoch, 6), batch=batch, optimizer=optimizer, momentum=momentum, rate=rate,
        range_steps=steps, step_ratio=step_ratio(RANGE_STEPS.get(mode, steps) or steps),
        rise_rates=[float(r) if isinstance(r, float) else None for r, *_ in pooled],
        rise_rate=statistics.median(rises) if rises else None,
        eps_max=eps_max, eps_max_sd_log=_finite(eps_sd), b_noise=b_noise, b_noise_sd_log=_finite(noise_sd),
        why_not=why_not or None, probe_s=round(probe_s, 3))


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


# --- the edge across batches ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class EdgePoint:
    """One measurement of the edge: at `batch`, the rate (nominal, as the optimizer is given it), its sd in log, and
    whether it is only a lower bound (a range test whose loss never rose)."""

    batch: int
    rate: float
    sd_log: float
    lower_bound: bool = False
    source: str = "range test"


def points_of(sections: Iterable[rec.EdgeSection]) -> tuple[list[EdgePoint], list[tuple[float, float, float, float]],
                                                            float]:
    """(range-test points, Hessian estimates (ε_max in the given rate or 0 where momentum leaves it unplaced, its sd,
    B_noise, its sd), the range tests' shared sd in log) of the sections.

    A point's own sd is its random error: the ramp's step and the ranks' spread. What every range test shares is
    kept apart (`fit_curve` adds it once, after the fit: averaging many tests does not shrink it): how far a rise
    may lie from the edge a steady run meets (RANGE_MODEL_SD_LOG), and, with SGD's momentum μ, where between the two
    readings the edge lies. A range test's ramp is short: its steps have not built up the 1/(1 − μ) a steady rate
    gives, so the rise it sees lies between the edge of a steady run (×(1 − μ)) and plain SGD's (×1): the point is
    their geometric middle, and half the span is one more shared sd. The Hessian's ε_max is plain SGD's: with
    momentum its edge in the given rate is as unplaced, so only its B_noise (the landscape's, not the optimizer's)
    is used there."""
    points, hessian, shared = [], [], RANGE_MODEL_SD_LOG
    for s in sections:
        if not s.batch:
            continue
        ratio_sd = math.log(s.step_ratio or 1.2) * RAMP_STEP_SD
        mu = (s.momentum or 0.0) if (s.optimizer or "") in SGD_LIKE else 0.0
        shift = 0.5 * math.log1p(-min(mu, 0.99))          # log of the geometric middle of (1 − μ) and 1
        shared = max(shared, math.hypot(RANGE_MODEL_SD_LOG, shift))
        rises = [r for r in s.rise_rates or [] if r]
        if s.rise_rate:
            spread = statistics.pstdev([math.log(r) for r in rises]) if len(rises) > 1 else 0.0
            points.append(EdgePoint(s.batch, s.rise_rate * math.exp(shift), math.hypot(ratio_sd, spread)))
        elif s.rate and s.range_steps:
            points.append(EdgePoint(s.batch, s.rate * RANGE_HIGH * (1 - mu), ratio_sd, lower_bound=True))
        if s.eps_max and s.b_noise and s.eps_max_sd_log is not None and s.b_noise_sd_log is not None:
            hessian.append((s.eps_max if mu == 0 else 0.0, s.eps_max_sd_log, s.b_noise, s.b_noise_sd_log))
    return points, hessian, shared


@dataclass(frozen=True, slots=True)
class EdgeCurve:
    """log ε_edge(B) = log(2·ε_max) − log(1 + B_noise/B), fitted: θ = (log 2ε_max, log B_noise) and its covariance."""

    theta: tuple[float, float]
    cov: tuple[tuple[float, float], tuple[float, float]]     # the shared (systematic) sds included
    points: tuple[EdgePoint, ...]
    hessian: int                       # Hessian estimates used
    b_noise_prior: bool                # B_simple's prior on B_noise used
    identified: bool                   # B_noise resolved by the data (two or more batches, or a prior)

    def rate(self, batch: float, theta: Sequence[float] | None = None) -> float:
        t = self.theta if theta is None else theta
        return float(math.exp(t[0]) / (1 + math.exp(t[1]) / batch))

    @property
    def eps_max(self) -> float:
        return math.exp(self.theta[0]) / 2

    @property
    def b_noise(self) -> float:
        return math.exp(self.theta[1])

    def draws(self, n: int, seed: int = 0) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return rng.multivariate_normal(np.array(self.theta), np.array(self.cov), size=n, method="eigh")

    def words(self) -> str:
        sd = math.sqrt(max(self.cov[1][1], 0.0))
        parts = [f"{sum(not p.lower_bound for p in self.points)} range test(s)"]
        if any(p.lower_bound for p in self.points):
            parts.append(f"{sum(p.lower_bound for p in self.points)} that never rose (lower bounds)")
        if self.hessian:
            parts.append(f"{self.hessian} Hessian estimate(s)")
        if self.b_noise_prior:
            parts.append("B_simple's prior on B_noise")
        noise = (f"B_noise {self.b_noise:.3g} (×{math.exp(sd):.2g} at one sd)" if self.identified else
                 f"B_noise not resolved (one batch, no B_simple): {self.b_noise:.3g} assumed, its range wide")
        return f"edge 2·ε_max {2 * self.eps_max:.3g}, {noise}, from {', '.join(parts)}"


B_NOISE_UNKNOWN_SD_LOG = math.log(100.0)    # without data on B_noise, it is unknown over decades


def fit_curve(points: Sequence[EdgePoint], hessian: Sequence[tuple[float, float, float, float]],
              prior: tuple[float, float] | None, shared_sd_log: float = RANGE_MODEL_SD_LOG) -> EdgeCurve | None:
    """The edge curve through every measurement (`prior`: B_simple's (centre, sd in log) on B_noise), each weighted by
    its random error; then the errors every measurement shares are added to the fit's covariance once: the range
    tests' (`shared_sd_log`, on the edge's scale) and the Hessian's (HESSIAN_MODEL_SD_LOG, on B_noise, where it was
    used). None without a range-test point or a Hessian estimate of ε_max."""
    if not points and not hessian:
        return None
    batches = {p.batch for p in points if not p.lower_bound}
    identified = len(batches) >= 2 or bool(hessian) or prior is not None
    centre = (prior[0] if prior is not None else
              statistics.mean(h[2] for h in hessian) if hessian else float(statistics.median(p.batch for p in points)))
    sd = prior[1] if prior is not None else B_NOISE_UNKNOWN_SD_LOG

    def residuals(theta: np.ndarray) -> np.ndarray:
        out = []
        for p in points:
            gap = (math.log(p.rate) - (theta[0] - math.log1p(math.exp(theta[1]) / p.batch))) / p.sd_log
            out.append(max(gap, 0.0) if p.lower_bound else gap)      # a lower bound costs only where broken
        for eps, eps_sd, noise, noise_sd in hessian:
            if eps > 0:
                out.append((theta[0] - math.log(2 * eps)) / max(eps_sd, 0.05))
            out.append((theta[1] - math.log(noise)) / max(noise_sd, 0.05))
        out.append((theta[1] - math.log(centre)) / sd)
        return np.array(out)

    if not points and not any(h[0] > 0 for h in hessian):
        return None                      # B_noise alone places no edge: its scale needs a rate
    start = np.array([math.log(2 * max(p.rate for p in points)) if points else
                      math.log(2 * max(h[0] for h in hessian)), math.log(centre)])
    fit = solve(residuals, numeric_jacobian(residuals), start, np.array([-50.0, -10.0]), np.array([50.0, 40.0]))
    jac = fit.jac
    try:
        cov = np.linalg.inv(jac.T @ jac)
    except np.linalg.LinAlgError:
        cov = np.diag([1.0, sd * sd])
    cov = cov + np.diag([shared_sd_log ** 2 if points else 0.0, HESSIAN_MODEL_SD_LOG ** 2 if hessian else 0.0])
    return EdgeCurve((float(fit.x[0]), float(fit.x[1])), ((float(cov[0, 0]), float(cov[0, 1])),
                                                          (float(cov[1, 0]), float(cov[1, 1]))),
                     tuple(points), len(hessian), prior is not None, identified)


def curve_from_records(records: Iterable[rec.Record], b_noise_prior: tuple[float, float] | None) -> EdgeCurve | None:
    """The edge curve from every ok convergence run's edge section (`b_noise_prior`: B_simple's centre and sd in log);
    None where no run probed it."""
    sections = [r.convergence.edge for r in rec.Records.of(records).ok(rec.Kind.CONVERGENCE)
                if r.convergence is not None and r.convergence.edge is not None]
    if not sections:
        return None
    return fit_curve(*points_of(sections)[:2], b_noise_prior, points_of(sections)[2])
