"""The gradient noise scale, B_simple (McCandlish, Kaplan, Amodei et al., "An Empirical Model of Large-Batch
Training", 2018, Appendix A.1), measured during ordinary training. Pure (math only): a rank feeds it two
squared norms per step.

Data-parallel training holds the gradient at two batch sizes every step: each rank's local gradient G_b
(batch b, its local batch) and the all-reduced one G_B (batch B = ranks × b). Since
E|G_b|² = |G|² + tr(Σ)/b, the two squared norms give unbiased estimates

    |G|²   ≈ (B·|G_B|² − b·|G_b|²) / (B − b)
    tr(Σ)  ≈ (|G_b|² − |G_B|²) / (1/b − 1/B)

and B_simple = tr(Σ) / |G|². One step's estimates are noisy (|G|²'s can be negative), so, as the paper
advises, the two are averaged separately, here by exponential moving averages, and then divided: a ratio of
averages, not an average of ratios (which a near-zero |G|² would dominate). One rank has no second gradient:
it splits its own batch in two micro-batches (b = half of it, B = all of it).

The interval comes from the spread of the per-step estimates the moving averages span: their weighted
variances and covariance, divided by the averages' effective number of steps, carried to the ratio by the
delta method (a 90% interval in log space). Where |G|² is within its noise of zero the high end is
unbounded (None): the noise scale is beyond what the run's batches can resolve.

>>> meter = NoiseMeter(small_batch=32, big_batch=64)
>>> for step in range(200):                     # |G|² = 1, tr(Σ) = 64: B_simple = 64, a little noise
...     wobble = 0.05 * ((step * 7) % 5 - 2)
...     meter.add(small_sq=1 + 64 / 32 + wobble, big_sq=1 + 64 / 64 + wobble / 2)
>>> est = meter.estimate()
>>> round(est.b_simple), est.low < 64 < est.high
(64, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.core.measured.records import NoiseScaleSection

# The moving averages' decay per step: they span about (1 + d)/(1 − d) ≈ 39 steps, enough to average one
# step's noise, short enough to follow B_simple's growth within an epoch of a few hundred steps.
EMA_DECAY = 0.95
Z_90 = 1.6449          # a two-sided 90% interval of a normal
DDP, MICRO_BATCHES = "ddp", "micro-batches"   # how the two gradients were had: the ranks', or one rank's halves
# With several ranks, one step in K is measured (its local squared norms, the averaged one, one small all-reduce);
# the rest go through the hook untouched. A measured step cost the classifier at 2×1×32 (a 5 ms step) +29.8% and at
# 2×1×128 +9.7%, side by side on a quiet Zen 4 (benchmarks/bench_noise_scale.py): about 1.5 ms each, one Gloo
# all-reduce and the norms. So K = 16 keeps the 2×1×32 step within 29.8/16 = 1.9%; runs with few steps per epoch
# (large batches: long steps, where a measured step costs less in share) measure more often, at least
# MEASURED_PER_EPOCH per epoch, for an estimate the moving averages can resolve: 2×1×128's 32 steps per epoch
# give K = 8, 9.7/8 = 1.2%. Measured with K the benchmark cannot resolve the cost: per-pair ranges of ±20%.
DDP_EVERY_STEPS = 16
MEASURED_PER_EPOCH = 4


def every_steps(steps_per_epoch: int) -> int:
    """K: a multi-rank convergence run measures B_simple on every K-th step.

    >>> every_steps(128), every_steps(32), every_steps(8), every_steps(2), every_steps(10_000)
    (16, 8, 2, 1, 16)
    """
    return max(1, min(DDP_EVERY_STEPS, steps_per_epoch // MEASURED_PER_EPOCH))


def unbiased(small_sq: float, big_sq: float, small_batch: float, big_batch: float) -> tuple[float, float]:
    """(|G|², tr(Σ)) from the squared norms of one step's gradients at two batch sizes (App. A.1).

    >>> unbiased(small_sq=3.0, big_sq=2.0, small_batch=32, big_batch=64)   # |G|² = 1, tr(Σ) = 64
    (1.0, 64.0)
    """
    if not 0 < small_batch < big_batch:
        raise ValueError(f"the two batches must satisfy 0 < small({small_batch}) < big({big_batch})")
    g2 = (big_batch * big_sq - small_batch * small_sq) / (big_batch - small_batch)
    trace = (small_sq - big_sq) / (1 / small_batch - 1 / big_batch)
    return g2, trace


@dataclass(frozen=True, slots=True)
class NoiseEstimate:
    """B_simple from the moving averages, with its 90% interval; `b_simple` None when the |G|² average is not
    positive (noise dominates), `high` None when |G|² is within its noise of zero (unbounded above)."""

    b_simple: float | None
    low: float | None
    high: float | None
    g2: float                 # the moving average of the |G|² estimates
    trace: float              # the moving average of the tr(Σ) estimates
    steps: int


class NoiseMeter:
    """Bias-corrected exponential moving averages of the two estimates, their squares and product (for the
    spread), fed one step at a time. Mutable: it lives in a rank for the length of a run."""

    def __init__(self, *, small_batch: float, big_batch: float, decay: float = EMA_DECAY):
        if not 0 < decay < 1:
            raise ValueError(f"decay({decay}) must lie in (0, 1)")
        unbiased(1.0, 1.0, small_batch, big_batch)   # checks the batches
        self.small_batch, self.big_batch, self.decay = small_batch, big_batch, decay
        self.steps = 0
        self._sums = [0.0] * 5     # EMAs of g, s, g², s², g·s (not bias-corrected)

    def add(self, *, small_sq: float, big_sq: float) -> None:
        """One step's squared norms: |G_b|² (the local gradient's, averaged over ranks) and |G_B|²."""
        if not (math.isfinite(small_sq) and math.isfinite(big_sq)):
            return   # a step with a non-finite gradient says nothing about the noise
        g, s = unbiased(small_sq, big_sq, self.small_batch, self.big_batch)
        d = self.decay
        self._sums = [d * old + (1 - d) * new for old, new in zip(self._sums, (g, s, g * g, s * s, g * s))]
        self.steps += 1

    def estimate(self) -> NoiseEstimate:
        if self.steps == 0:
            return NoiseEstimate(None, None, None, 0.0, 0.0, 0)
        d, t = self.decay, self.steps
        correction = 1 - d ** t
        g, s, gg, ss, gs = (v / correction for v in self._sums)
        if g <= 0 or s <= 0:
            return NoiseEstimate(None, None, None, g, s, t)
        # the weights' sum of squares, for a bias-corrected EMA over t steps: 1 / (effective steps)
        per_step = (1 - d) * (1 + d ** t) / ((1 + d) * (1 - d ** t))
        var_g, var_s, cov = max(gg - g * g, 0.0), max(ss - s * s, 0.0), gs - g * s
        sd_g = math.sqrt(var_g * per_step)
        rel = (var_s / s**2 + var_g / g**2 - 2 * cov / (s * g)) * per_step
        half = Z_90 * math.sqrt(max(rel, 0.0))
        ratio = s / g
        high = ratio * math.exp(half) if g - Z_90 * sd_g > 0 else None
        return NoiseEstimate(ratio, ratio * math.exp(-half), high, g, s, t)


def _sig(value: float | None) -> float | None:
    """Six significant digits: a record holds what the estimate can mean, not the float's last bits."""
    return None if value is None else float(f"{value:.6g}")


def epoch_entry(epoch: float, est: NoiseEstimate) -> list[float | None]:
    """One row of the section's `epochs`: [epoch, b_simple, low, high].

    >>> epoch_entry(1.0, NoiseEstimate(64.123456789, 50.0, None, 1.0, 64.0, 10))
    [1.0, 64.1235, 50.0, None]
    """
    return [round(epoch, 6), _sig(est.b_simple), _sig(est.low), _sig(est.high)]


def section(meter: NoiseMeter, *, method: str, at_epoch: float, epochs: list[list[float | None]],
            every: int | None = None) -> NoiseScaleSection:
    """The record's section: the meter's estimate where the run stopped, and the rows at each epoch's end
    (`every`: one step in how many was measured, where not every one)."""
    est = meter.estimate()
    why = "" if est.b_simple is not None else (
        "no step measured" if est.steps == 0 else
        f"the |G|² average is not positive ({est.g2:.3g} after {est.steps} steps): the noise dominates the "
        "gradient at these batches")
    out = NoiseScaleSection(b_simple=_sig(est.b_simple), low=_sig(est.low), high=_sig(est.high),
                            at_epoch=round(at_epoch, 6), method=method, small_batch=int(meter.small_batch),
                            big_batch=int(meter.big_batch), steps=est.steps, ema_decay=meter.decay,
                            g2=_sig(est.g2), trace=_sig(est.trace), epochs=epochs)
    if every is not None and every > 1:
        out = out.with_fields(every_steps=every)
    return out.with_fields(why_not=why) if why else out


def not_measured(why: str) -> NoiseScaleSection:
    """The section of a run whose noise scale could not be measured, with the reason."""
    return NoiseScaleSection().only().with_fields(why_not=why)
