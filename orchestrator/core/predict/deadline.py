"""Epochs to target come in evaluations, and the chance of missing a deadline. Pure.

A run learns it reached the target at an evaluation, so the epochs it trains are a whole number of evaluation
intervals Δ: 4 or 5 evaluations, never 4.3. The epochs model predicts a log-normal band for the moment the
target is crossed (one sd in log from its interval); the run then stops at the next evaluation:

    P(stop at k·Δ) = Φ(ln(k·Δ) − ln m') − Φ(ln((k−1)·Δ) − ln m'),   in units of the band's sd

where m' is the prediction less half an interval: measured epochs are counted at evaluations, so on average
half an interval after the target was crossed. A band wider above than below (the learning-rate rule's form)
uses each side's sd on its side of m' (the band 3.6–4.4 below: 0.105 below, 0.095 above). A deadline of D hours
affords x = D·3600·samples/s ÷ samples
per epoch epochs, and the run misses it when its evaluations pass x before the target:

    P(miss) = P(K > x) = 1 − Φ(ln(⌊x/Δ⌋·Δ) − ln m')

Where the cadence is unknown (an RCP file) the epochs are continuous. The chance is given at the central
samples/s and at both ends of its interval: the throughput's interval bounds it, it is not a distribution.

>>> d = distribution(EpochsPrediction(64, 4.0, 3.6, 4.4, "interpolated"), eval_every_epochs=1.0)
>>> d.median_epochs, [(e, round(p, 3)) for e, p in d.points()]
(3.5, [(3.0, 0.072), (4.0, 0.848), (5.0, 0.081)])
>>> round(d.p_over(4.5), 3), round(d.p_over(2.5), 3)
(0.081, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.core.predict.epochs import EXTRAPOLATED, NOT_CONVERGED, BatchPoint, EpochsPrediction
from orchestrator.core.predict.noise_prior import BCritPrior

# The distribution's rows leave out evaluations less likely than this (both tails together at most twice it).
SHOWN_MASS = 0.005


def _phi(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


@dataclass(frozen=True, slots=True)
class EpochsDistribution:
    """When a run stops: the latent crossing of the target, log-normal around `median_epochs` (already less
    half an interval), counted at evaluations every `eval_every_epochs` (None: continuous). A band that is wider
    above than below (the learning-rate rule's form: its draws) gives two halves, each normal in log with its own
    sd (`sd_log` above the median, `sd_log_low` below; None: the same), the median between them."""

    median_epochs: float
    sd_log: float
    eval_every_epochs: float | None
    sd_log_low: float | None = None

    def _cdf_crossing(self, epochs: float) -> float:
        if epochs <= 0:
            return 0.0
        z = math.log(epochs) - math.log(self.median_epochs)
        return _phi(z / (self.sd_log_low if z < 0 and self.sd_log_low else self.sd_log))

    def p_over(self, epochs: float) -> float:
        """P(the run trains more than `epochs` epochs before it stops)."""
        step = self.eval_every_epochs
        if step is None:
            return 1.0 - self._cdf_crossing(epochs)
        last_in_time = math.floor(epochs / step + 1e-9) * step
        return 1.0 - self._cdf_crossing(last_in_time) if last_in_time > 0 else 1.0

    def points(self) -> list[tuple[float, float]]:
        """(epochs, probability) at each evaluation the run may stop at, the negligible tails left out."""
        step = self.eval_every_epochs
        if step is None:
            return []
        out, k, below = [], 1, 0.0
        while below < 1 - SHOWN_MASS:
            cdf = self._cdf_crossing(k * step)
            if cdf - below >= SHOWN_MASS:
                out.append((round(k * step, 6), cdf - below))
            below, k = cdf, k + 1
        return out

    def words(self, most: int = 5) -> str:
        rows = sorted(self.points(), key=lambda p: -p[1])[:most]
        if not rows:
            return "continuous (no evaluation cadence known)"
        shown = ", ".join(f"{e:g} ({p:.0%})" for e, p in sorted(rows))
        return f"stops at {shown} epochs (evaluations every {self.eval_every_epochs:g})"


def distribution(pred: EpochsPrediction, eval_every_epochs: float | None) -> EpochsDistribution | None:
    """The stopping distribution of a predicted epochs value; None without a band (nothing to spread it by)."""
    if pred.status == NOT_CONVERGED or pred.epochs is None or pred.high is None or pred.epochs <= 0:
        return None
    sd = math.log(pred.high / pred.epochs)
    sd_low = math.log(pred.epochs / pred.low) if pred.low is not None and pred.low > 0 else None
    if sd <= 0:
        return None
    median = pred.epochs
    if eval_every_epochs:
        median = max(median - eval_every_epochs / 2, eval_every_epochs / 4)
    # a band symmetric in log (the critical-batch form's) keeps one sd
    low_sd = sd_low if sd_low is not None and sd_low > 0 and abs(sd_low - sd) > 1e-9 * sd else None
    return EpochsDistribution(median, sd, eval_every_epochs, low_sd)


@dataclass(frozen=True, slots=True)
class DeadlineRisk:
    """P(time-to-train > the deadline) at the central samples/s, and at the interval's fast and slow ends."""

    deadline_h: float
    p_miss: float
    p_miss_fast: float | None
    p_miss_slow: float | None
    epochs: EpochsDistribution

    p_converge: float | None = None

    def words(self) -> str:
        ends = ("" if self.p_miss_fast is None or self.p_miss_slow is None else
                f" ({self.p_miss_fast:.0%} at the fast end of samples/s, {self.p_miss_slow:.0%} at the slow end)")
        conv = (f" (a run that does not converge counted as a miss: P(converge) {self.p_converge:.0%})"
                if self.p_converge is not None and self.p_converge < 1 else "")
        return (f"P(time-to-train > {self.deadline_h:g} h) = {self.p_miss:.0%}{ends}{conv}; epochs "
                f"{self.epochs.words()}")


def deadline_risk(pred: EpochsPrediction | None, *, deadline_h: float, samples_per_epoch: int | None,
                  samples_per_s: float, samples_per_s_low: float | None, samples_per_s_high: float | None,
                  eval_every_epochs: float | None) -> DeadlineRisk | None:
    """The chance of missing `deadline_h` for one layout, a run that does not converge counted as a miss (the
    prediction's P(converge), where it has one); None where epochs have no band or no epoch size.

    >>> e = EpochsPrediction(64, 4.0, 3.6, 4.4, "interpolated")
    >>> risk = deadline_risk(e, deadline_h=1.0, samples_per_epoch=3600, samples_per_s=4.5, samples_per_s_low=4.0,
    ...                      samples_per_s_high=5.0, eval_every_epochs=0.5)
    >>> round(risk.p_miss, 2), round(risk.p_miss_fast, 2), round(risk.p_miss_slow, 2)
    (0.03, 0.0, 0.25)
    """
    dist = distribution(pred, eval_every_epochs) if pred is not None else None
    if dist is None or not samples_per_epoch:
        return None

    converge = pred.p_converge if pred is not None and pred.p_converge is not None else 1.0

    def p(rate: float | None) -> float | None:
        """Missed: the run does not converge at all (1 − P(converge)), or converges after the deadline."""
        if rate is None:
            return None
        return 1.0 - converge * (1.0 - dist.p_over(deadline_h * 3600 * rate / samples_per_epoch))

    return DeadlineRisk(deadline_h, p(samples_per_s) or 0.0, p(samples_per_s_high), p(samples_per_s_low), dist,
                        None if pred is None else pred.p_converge)


@dataclass(frozen=True, slots=True)
class SeedCheck:
    """One seed's epochs against the stopping distribution predicted for its global batch: its mid-PIT (the
    predicted probability of stopping earlier, plus half that of stopping at the same evaluation), and
    whether the batch was held out of the fit that predicted it."""

    global_batch: int
    epochs: float
    pit: float
    held_out: bool

    def p_over(self) -> float:
        """The predicted chance of a run needing more epochs than this seed did: the deadline question with the
        deadline at this seed's time-to-train."""
        return 1.0 - self.pit


def mid_pit(dist: EpochsDistribution, epochs: float) -> float:
    """P(stop before `epochs`) + ½·P(stop at it): uniform on [0, 1] over seeds when the distribution is right.

    >>> d = EpochsDistribution(median_epochs=3.5, sd_log=0.1, eval_every_epochs=1.0)
    >>> round(mid_pit(d, 4.0), 3), round(mid_pit(d, 3.0), 3)
    (0.485, 0.031)
    """
    step = dist.eval_every_epochs or 0.0
    before = 1.0 - dist.p_over(epochs - step) if step else dist._cdf_crossing(epochs)
    at = (1.0 - dist.p_over(epochs)) - before if step else 0.0
    return before + at / 2


def seed_checks(points: Sequence[BatchPoint], eval_every_epochs: float | None,
                prior: BCritPrior | None = None) -> list[SeedCheck]:
    """Every converged seed against the distribution predicted for its batch: with 3 or more converged batches
    from a fit without that batch (held out, as `orch predict` would meet a batch it did not run), else from the
    fit of all of them (in sample: said by `held_out`)."""
    from orchestrator.core.predict.epochs import fit_epochs

    good = [p for p in points if p.converged]
    out: list[SeedCheck] = []
    held = len({p.global_batch for p in good}) >= 3
    for p in good:
        model = fit_epochs([q for q in good if q is not p] if held else good, prior)
        pred = model.predict(p.global_batch)
        if held and pred.status == EXTRAPOLATED and pred.high is None:
            continue
        dist = distribution(pred, eval_every_epochs)
        if dist is None:
            continue
        out += [SeedCheck(p.global_batch, e, mid_pit(dist, e), held) for e in p.epochs]
    return out
