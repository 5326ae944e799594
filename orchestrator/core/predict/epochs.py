"""Epochs to target against the global batch: the critical-batch form, fitted to per-seed points.

McCandlish, Kaplan, Amodei et al., "An Empirical Model of Large-Batch Training" (2018): the samples
needed to reach a target grow as E = E_min·(1 + B/B_crit), so in epochs

    epochs(B) = E_min · (1 + B / B_crit)

Small batches (B ≪ B_crit) need about E_min epochs whatever the batch; past B_crit each doubling of the
batch roughly doubles the epochs. The fit is bounded least squares of log epochs over every converged seed
(`lsq.solve`); the band combines the seeds' own spread with the fit's parameter
uncertainty (delta method on the Jacobian), one standard deviation in log space.

Inside the measured range a prediction is interpolated; at a measured batch the measured olympic mean is
used; outside it is extrapolated and says so: MLPerf's RCP checker interpolates linearly between reference
batches and refuses to go above the largest, so a planner that does must say it loudly. A batch at or
beyond one that did not converge gets no prediction.

Convergence data come from convergence records (`orchestrator.core.measured.convergence`) or from an MLPerf RCP
file (`orchestrator.core.predict.rcp`: units, the checker's olympic mean and pruning), the layout MLCommons
publishes in mlcommons/logging (`mlperf_logging/rcp_checker/training_*/rcps_<benchmark>.json`) and
`orch report` exports.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from orchestrator.core.measured.convergence import BatchConvergence, Hyperparams, olympic_mean
from orchestrator.core.measured.noise_scale import Z_90
from orchestrator.core.planning.lr import LrScaling
from orchestrator.core.predict import epochs_edge, epochs_lr
from orchestrator.core.predict.edge import EdgeCurve
from orchestrator.core.predict.lsq import numeric_jacobian, solve
from orchestrator.core.predict.noise_prior import BCritPrior

MEASURED, INTERPOLATED, EXTRAPOLATED, NOT_CONVERGED = "measured", "interpolated", "extrapolated", "not converged"
PAST_EDGE = "past the edge"         # the rule's rate at or past the measured stability edge: not trained, or by chance
UNSUPPORTED = "unsupported"         # the data cannot place a central value (a fit at its bound): a band, no centre
# No central value more than this many times the largest measured kept epochs, unless the measured edge supports it.
MAX_EPOCHS_RATIO = 10.0
E_MIN_BOUNDS = (1e-6, 1e6)
B_CRIT_BOUNDS = (1e-3, 1e12)
# How B_crit was had (EpochsModel.b_crit_mode): from the measured epochs alone; frozen at ∞ (one global batch, no
# B_simple); B_simple's prior alone (one global batch); the prior and the measured epochs fitted jointly.
FIT, FROZEN, PRIOR, JOINT = "fit", "frozen", "prior", "joint"
CRITICAL_FORM, RULE_FORM, EDGE_FORM = "critical batch", "lr rule", "lr rule, measured edge"   # EpochsModel.form
# The seeds' log spread below which the prior's weight against the measured epochs is not raised further: seeds
# that agree to the evaluation (all at 4.0 epochs) would otherwise leave the prior no weight at all.
SEED_SD_FLOOR_LOG = 0.02


@dataclass(frozen=True, slots=True)
class BatchPoint:
    """The converged seeds' epochs at one global batch (empty when none converged)."""

    global_batch: int
    epochs: tuple[float, ...]
    max_epochs: float | None = None     # the cap of a batch that did not converge
    dropped_each_end: int = 1           # runs the olympic mean drops at each end (an RCP's unet3d: 4)
    # seeds that did not converge where the batch did overall: they count in the olympic mean as the slowest
    # runs (MLPerf's rule, and the convergence table's), though the fit can only use the converged seeds
    not_converged: int = 0
    # the sweep's learning-rate rule (None: unknown, as in an RCP file or older records): with it, the epochs model
    # knows the rate each batch trained at (`epochs_lr`)
    lr_scaling: LrScaling | None = None
    # a batch most of whose seeds did not converge: the epochs of those that did (data for the edge's form, whose
    # censored seeds are `not_converged`; the olympic mean is infinite whatever they are)
    late: tuple[float, ...] = ()

    @property
    def converged(self) -> bool:
        return bool(self.epochs)

    @property
    def mean(self) -> float:
        return olympic_mean(self.epochs + (math.inf,) * self.not_converged, self.dropped_each_end)

    @property
    def sd(self) -> float:
        return statistics.pstdev(self.epochs) if len(self.epochs) > 1 else 0.0


def points_from_batches(batches: Iterable[BatchConvergence]) -> list[BatchPoint]:
    """Convergence aggregates as fit points; a batch whose olympic mean is infinite is a non-converged point."""
    out = []
    for b in batches:
        seeds = tuple(r.epochs for r in b.runs if r.epochs is not None)
        scaling = lr_scaling_of(b.hyperparams)
        if b.mean_epochs is None:
            out.append(BatchPoint(b.global_batch, (), b.max_epochs, not_converged=len(b.runs) - len(seeds),
                                  lr_scaling=scaling, late=seeds))
        else:
            out.append(BatchPoint(b.global_batch, seeds, b.max_epochs, not_converged=len(b.runs) - len(seeds),
                                  lr_scaling=scaling))
    return sorted(out, key=lambda p: p.global_batch)


def lr_scaling_of(h: Hyperparams) -> LrScaling | None:
    """The learning-rate rule a batch's runs recorded (`convergence.rcp_hyperparams`); None where they do not say.

    >>> lr_scaling_of(Hyperparams(opt_base_learning_rate=0.02, lr_rule="sqrt", lr_at_base_batch=0.01,
    ...                           base_batch=32)).at(128)
    0.02
    >>> lr_scaling_of(Hyperparams(opt_base_learning_rate=0.1)) is None
    True
    """
    if h.opt_base_learning_rate is None:   # no per-run rate recorded: the rule is not known to apply
        return None
    if h.lr_rule is None or h.lr_at_base_batch is None or h.base_batch is None:
        return None
    try:
        return LrScaling(rule=str(h.lr_rule), base_lr=float(h.lr_at_base_batch), base_batch=int(h.base_batch),
                         warmup_epochs=float(h.opt_learning_rate_warmup_epochs or 0.0))
    except (TypeError, ValueError):
        return None


def critical_batch_epochs(global_batch: float, e_min: float, b_crit: float) -> float:
    """
    >>> critical_batch_epochs(100, 2.0, 100.0), critical_batch_epochs(300, 2.0, 100.0)
    (4.0, 8.0)
    """
    return e_min * (1 + global_batch / b_crit)


@dataclass(frozen=True, slots=True)
class EpochsPrediction:
    global_batch: int
    epochs: float | None
    low: float | None
    high: float | None
    status: str                # MEASURED, INTERPOLATED, EXTRAPOLATED or NOT_CONVERGED
    note: str = ""
    no_interval: str = ""      # why low and high are None although epochs is not
    p_converge: float | None = None   # P(a seed converges within the runs' max epochs); None: not predicted


@dataclass(frozen=True, slots=True)
class EpochsModel:
    e_min: float
    b_crit: float                                   # math.inf when frozen (one batch only)
    points: tuple[BatchPoint, ...]
    cov_log: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 0.0), (0.0, 0.0))
    seed_sd_log: float = 0.0                        # pooled relative spread of the seeds
    frozen_why: str = ""                            # why B_crit (the rule's k = 0 limit: k) is frozen
    # log-error per doubling of the batch beyond the smallest / largest converged batch, from leaving that
    # end out (validate.epochs_growth); None when fewer than 3 batches converged: no held-out evidence
    growth_log_per_doubling: tuple[float | None, float | None] = (None, None)
    prior: BCritPrior | None = None                 # B_simple's prior on B_crit, where the runs measured it
    b_crit_mode: str = FIT                          # FIT, FROZEN, PRIOR or JOINT
    data_only_b_crit: float | None = None           # JOINT: B_crit from the measured epochs alone (2+ batches)
    # The learning-rate rule's form (`epochs_lr`), where every converged batch recorded the sweep's rule: then
    # b_crit is its B_noise (∞ in the k = 0 limit), e_min McCandlish's E_min = 4·A·k·B_noise it implies (the epochs
    # at the optimal rate, small batches), cov_log that of (log A, log B_noise)
    rule: epochs_lr.RuleFit | None = None
    # The rule's form with the stability edge measured (`epochs_edge`), where the runs probed it: it predicts then
    edge: epochs_edge.EdgeEpochsFit | None = None

    @property
    def form(self) -> str:
        """Which form: E_min·(1 + B/B_crit), the one that knows the sweep's learning-rate rule, or that one with the
        stability edge measured."""
        return EDGE_FORM if self.edge is not None else RULE_FORM if self.rule is not None else CRITICAL_FORM

    @property
    def b_crit_sd_log(self) -> float:
        return math.sqrt(max(self.cov_log[1][1], 0.0))

    def words(self) -> str:
        """The model in one line: its form, its fitted figures, and where B_crit (or B_noise) came from."""
        if self.edge is not None:
            f = self.edge
            spans = ", ".join(f"{b:g}: {f.d(b):.2f}" for b in f.kept_batches)
            return (f"A·B/(ε(B)·(1 − ε(B)/ε_edge(B))) under {f.scaling.words()}, ε_edge(B) = {f.edge2:.3g}/(1 + "
                    f"{f.b_noise:.3g}/B) (D at {spans}): {f.agreement()}")
        r = self.rule
        if r is None:
            return f"E_min·(1 + B/B_crit), E_min {self.e_min:.3g}, B_crit {self.b_crit_words()}"
        head = (f"A·B/(ε(B)·(1 − k·ε(B)·(1 + B_noise/B))) under {r.scaling.words()}: A {r.a:.3g}, k {r.k:.3g}")
        if r.mode == epochs_lr.LIMIT:
            side = f"; {self.prior.words()} sets the bounds' sides" if self.prior is not None else ""
            return (f"{head} (frozen: {r.why_limit}), so E ∝ B/ε(B), the rule's k = 0 limit{side}")
        spans = ", ".join(f"{b:g}: {r.denominator(b):.2f}" for b in r.span)
        if r.b_noise_at_bound:
            side = "above" if r.b_noise > max(r.span) else "below"
            return (f"{head} (D at {spans}), B_noise at its bound ({r.b_noise:.3g}): the epochs put it far {side} "
                    "every batch, so it is frozen there")
        return f"{head} (D at {spans}), B_noise {self.b_crit_words()}"

    def b_crit_words(self) -> str:
        """Where B_crit came from and, with B_simple, how far the measured epochs moved its prior."""
        if self.rule is not None and self.rule.mode == epochs_lr.LIMIT:
            return "unused (k frozen at 0: " + self.rule.why_limit + ")"
        if self.b_crit_mode == FROZEN:
            return "∞ (frozen: " + self.frozen_why + ")"
        here = f"{self.b_crit:.4g} [{self.b_crit_low:.3g}–{self.b_crit_high:.3g}]"
        if self.prior is None:
            return f"{here} from the measured epochs alone (no B_simple in the runs)"
        p = self.prior
        if self.b_crit_mode == PRIOR:
            return (f"{here}: B_simple's prior alone, one global batch converged ({p.words()}); E_min fitted to "
                    "its epochs")
        moved = math.log(self.b_crit / p.b_simple)
        alone = f"; from the epochs alone {self.data_only_b_crit:.4g}" if self.data_only_b_crit else ""
        return (f"{here}: B_simple's prior and the measured epochs jointly ({p.words()}); the epochs moved it "
                f"×{math.exp(moved):.3g} ({moved / p.sd_log:+.2f} prior sd) and narrowed it to "
                f"{self.b_crit_sd_log / p.sd_log:.2f} of the prior's width{alone}")

    @property
    def b_crit_low(self) -> float:
        return self.b_crit * math.exp(-Z_90 * self.b_crit_sd_log)

    @property
    def b_crit_high(self) -> float:
        return self.b_crit * math.exp(Z_90 * self.b_crit_sd_log)

    @property
    def converged(self) -> list[BatchPoint]:
        return [p for p in self.points if p.converged]

    def curve(self, global_batch: float) -> float:
        if self.rule is not None:
            return math.exp(self.rule.covering(global_batch).log_curve(global_batch))
        return critical_batch_epochs(global_batch, self.e_min, self.b_crit)

    def _sd_log(self, global_batch: float) -> float:
        if math.isinf(self.b_crit):
            return self.seed_sd_log
        # gradient of log epochs in (log e_min, log b_crit)
        x = global_batch / self.b_crit
        g = np.array([1.0, -x / (1 + x)])
        var_param = float(g @ np.array(self.cov_log) @ g)
        return math.sqrt(max(var_param, 0.0) + self.seed_sd_log ** 2)

    def predict(self, global_batch: int) -> EpochsPrediction:
        """Epochs at a global batch with a band of one standard deviation in log space: the seeds' pooled
        spread and the fit's parameter uncertainty everywhere (so a measured batch whose seeds agree is not
        ±0), plus, outside the converged range, the held-out extrapolation error per doubling times the
        doublings beyond the end (so the band keeps growing with distance)."""
        if self.edge is not None:       # the seeds that did not converge are in its fit: it says P(converge)
            return self._predict_edge(global_batch, self.edge)
        failed = [p for p in self.points if not p.converged and p.global_batch <= global_batch]
        if failed:
            cap = f" by {failed[0].max_epochs:g} epochs" if failed[0].max_epochs else ""
            return EpochsPrediction(global_batch, None, None, None, NOT_CONVERGED,
                                    f"global batch {failed[0].global_batch} did not converge{cap}")
        if self.rule is not None:
            return self._held(self._predict_rule(global_batch, self.rule))
        measured = {p.global_batch: p for p in self.converged}
        lo_b, hi_b = min(measured), max(measured)
        sd = self._sd_log(global_batch)
        status, note, why = INTERPOLATED, "", ""
        if global_batch in measured:
            p = measured[global_batch]
            value, status = p.mean, MEASURED
            sd = max(sd, math.log1p(p.sd / p.mean))
        else:
            value = self.curve(global_batch)
            below, above = self.growth_log_per_doubling
            if global_batch > hi_b or global_batch < lo_b:
                end, growth = (hi_b, above) if global_batch > hi_b else (lo_b, below)
                status = EXTRAPOLATED
                note = f"extrapolated {'beyond' if global_batch > hi_b else 'below'} global batch {end}"
                if growth is not None:
                    sd += growth * abs(math.log2(global_batch / end))
                elif self.prior is None:
                    why = "fewer than 3 converged global batches: no held-out error to extrapolate epochs with"
        if not why and sd <= 0:
            why = "every seed agrees and the fit is exact: no spread to estimate a band from"
        if why:
            return EpochsPrediction(global_batch, value, None, None, status, note, why)
        return EpochsPrediction(global_batch, value, value * math.exp(-sd), value * math.exp(sd), status, note)

    def _where(self, global_batch: int) -> tuple[str, str, float]:
        """(status, note, the log error the band gains from extrapolating: growth per doubling × doublings, or
        NaN where the end has no held-out growth) of a batch that was not measured."""
        batches = [p.global_batch for p in self.converged]
        lo_b, hi_b = min(batches), max(batches)
        if lo_b <= global_batch <= hi_b:
            return INTERPOLATED, "", 0.0
        end, growth = (hi_b, self.growth_log_per_doubling[1]) if global_batch > hi_b else \
            (lo_b, self.growth_log_per_doubling[0])
        note = f"extrapolated {'beyond' if global_batch > hi_b else 'below'} global batch {end}"
        return EXTRAPOLATED, note, math.nan if growth is None else growth * abs(math.log2(global_batch / end))

    def _predict_edge(self, global_batch: int, f: epochs_edge.EdgeEpochsFit) -> EpochsPrediction:
        """The measured edge's form: the draws' median and band inside the edge, P(converge) within the runs' cap;
        no epoch count where fewer than half the draws converge (past the edge, or by chance)."""
        measured = {p.global_batch: p for p in self.converged}
        central, low, high, p, d = f.predict(global_batch)
        edge_words = (f"the rule's rate {f.scaling.at(global_batch):.3g} against the measured edge "
                      f"{f.edge_rate(global_batch):.3g} (D {d:.2f}); P(converge) {p:.2f}")
        if global_batch in measured:
            m = measured[global_batch]
            sd = max(math.log1p(m.sd / m.mean), self.seed_sd_log, SEED_SD_FLOOR_LOG)
            return EpochsPrediction(global_batch, m.mean, m.mean * math.exp(-sd), m.mean * math.exp(sd), MEASURED,
                                    p_converge=p)
        status, note, grown = self._where(global_batch)
        if central is None or p < 0.5:
            return EpochsPrediction(global_batch, None, None, None, PAST_EDGE,
                                    f"{edge_words}: the rule does not train here" + (" but by chance" if p > 0.05
                                                                                    else ""), p_converge=p)
        # beyond the data, the band also grows by the held-out error per doubling measured at the ends (leave the
        # largest or smallest batch out, refit, predict it) times the doublings
        grown = 0.0 if math.isnan(grown) else grown
        low, high = (low or central) * math.exp(-grown), (high or central) * math.exp(grown)
        means = [(q.global_batch, q.mean) for q in self.converged]
        found = epochs_lr.bounds(global_batch, means, f.scaling, (f.b_noise, f.b_noise), self.seed_sd_log)
        value, lo, hi, moved = epochs_lr.apply_bounds(central, low, high,
                                                      [b for b in found if "rise with the batch" in b.why])
        return EpochsPrediction(global_batch, value, lo, hi, status, "; ".join(x for x in (note, edge_words, moved)
                                                                               if x), p_converge=p)

    def _held(self, e: EpochsPrediction) -> EpochsPrediction:
        """No central value from a fit at its bound (D held at its floor to cover the batch), nor one more than
        MAX_EPOCHS_RATIO times the largest measured epochs without a measured edge to support it: the band stays,
        the note says which end the data favour."""
        r = self.rule
        if e.epochs is None or r is None or e.status == MEASURED:
            return e
        top = max((p.mean for p in self.converged), default=math.inf)
        at_bound = r.mode != epochs_lr.LIMIT and r.covering(e.global_batch) is not r
        if not at_bound and e.epochs <= MAX_EPOCHS_RATIO * top:
            return e
        why = ("the fit holds D at its floor to cover this batch: the epochs cannot place k, so the rule's edge is "
               "unplaced" if at_bound else f"{e.epochs:.3g} epochs would be over {MAX_EPOCHS_RATIO:g}× the largest "
               f"measured ({top:.3g}) with no measured edge to support it")
        favour = (f"the data favour the low end (the k = 0 limit, {e.low:.3g})" if e.low is not None else
                  "no band either")
        return replace(e, epochs=None, status=UNSUPPORTED,
                       note="; ".join(x for x in (e.note, f"no central value: {why}; {favour}; measure the edge "
                                                          "(convergence.edge: full) to place it") if x))

    def _predict_rule(self, global_batch: int, r: epochs_lr.RuleFit) -> EpochsPrediction:
        """The learning-rate rule's form: the band is the fit's draws (one sd in log each side, θ's uncertainty
        with B_noise's prior) with the seeds' spread, plus the held-out extrapolation error beyond the data;
        then held to the physical bounds the measured neighbours give (`epochs_lr.bounds`)."""
        measured = {p.global_batch: p for p in self.converged}
        central, lo, hi, why = r.band(global_batch)
        seed = self.seed_sd_log
        if global_batch in measured:
            p = measured[global_batch]
            sd = max(math.hypot(max(lo or 0.0, hi or 0.0), seed), math.log1p(p.sd / p.mean))
            if sd <= 0:
                return EpochsPrediction(global_batch, p.mean, None, None, MEASURED, "",
                                        "every seed agrees and the fit is exact: no spread to estimate a band from")
            return EpochsPrediction(global_batch, p.mean, p.mean * math.exp(-sd), p.mean * math.exp(sd), MEASURED)
        status, note, grown = self._where(global_batch)
        if not why and math.isnan(grown) and r.mode == epochs_lr.LIMIT:
            why = ("fewer than 3 converged global batches and k frozen at 0: no held-out error to extrapolate "
                   "epochs with")
        if why or lo is None or hi is None:
            return EpochsPrediction(global_batch, central, None, None, status, note, why)
        grown = 0.0 if math.isnan(grown) else grown
        sd_lo, sd_hi = math.hypot(lo, seed) + grown, math.hypot(hi, seed) + grown
        if max(sd_lo, sd_hi) <= 0:
            return EpochsPrediction(global_batch, central, None, None, status, note,
                                    "every seed agrees and the fit is exact: no spread to estimate a band from")
        means = [(p.global_batch, p.mean) for p in self.converged]
        found = epochs_lr.bounds(global_batch, means, r.scaling, r.b_noise_range(), seed)
        value, low, high, moved = epochs_lr.apply_bounds(central, central * math.exp(-sd_lo),
                                                         central * math.exp(sd_hi), found)
        return EpochsPrediction(global_batch, value, low, high, status, "; ".join(x for x in (note, moved) if x))


def fit_epochs(points: Sequence[BatchPoint], prior: BCritPrior | None = None,
               edge: EdgeCurve | None = None) -> EpochsModel:
    """Fit E_min and B_crit to every converged seed. With B_simple's `prior`, B_crit is fitted jointly with it
    (a Gaussian prior on log B_crit: one more residual), or, with one converged global batch, taken from it;
    without, B_crit is frozen at ∞ (epochs independent of the batch) when only one global batch converged. With
    the learning-rate rule known and the stability `edge` measured, the rule's form with that edge
    (`epochs_edge`) predicts; the rule's fitted form is kept beside it."""
    good = [p for p in points if p.converged]
    if not good:
        raise ValueError("no global batch converged: nothing to fit epochs to")
    relative = [statistics.pstdev([math.log(e) for e in p.epochs]) for p in good if len(p.epochs) > 1]
    seed_sd = math.sqrt(statistics.mean([s * s for s in relative])) if relative else 0.0
    batches = len({p.global_batch for p in good})
    scalings = {p.lr_scaling for p in good}
    if len(scalings) == 1 and None not in scalings:
        scaling: LrScaling = scalings.pop()    # type: ignore[assignment]
        model = _fit_rule_model(points, good, scaling, prior, seed_sd)
        if edge is None:
            return model
        return replace(model, edge=_fit_edge(points, good, scaling, edge, seed_sd))
    if batches < 2 and prior is None:
        e_min = statistics.mean(math.exp(statistics.mean(math.log(e) for e in p.epochs)) for p in good)
        return EpochsModel(e_min, math.inf, tuple(points), seed_sd_log=seed_sd, b_crit_mode=FROZEN,
                           frozen_why=f"one global batch only ({good[0].global_batch}): epochs assumed independent "
                                      "of the batch (B_crit = ∞)")
    b = np.array([p.global_batch for p in good for _ in p.epochs], dtype=float)
    e = np.array([x for p in good for x in p.epochs])
    if prior is None:
        e_min, b_crit, cov_t = _least_squares(b, e, None, 0.0)
        return EpochsModel(e_min, b_crit, tuple(points), cov_t, seed_sd)
    e_min, b_crit, cov_t = _least_squares(b, e, prior, max(seed_sd, SEED_SD_FLOOR_LOG))
    alone = _least_squares(b, e, None, 0.0)[1] if batches >= 2 else None
    return EpochsModel(e_min, b_crit, tuple(points), cov_t, seed_sd, prior=prior,
                       b_crit_mode=JOINT if batches >= 2 else PRIOR, data_only_b_crit=alone)


def _fit_rule_model(points: Sequence[BatchPoint], good: Sequence[BatchPoint], scaling: LrScaling,
                    prior: BCritPrior | None, seed_sd: float) -> EpochsModel:
    """The learning-rate rule's form (`epochs_lr`) as an EpochsModel: b_crit its B_noise, cov_log that of
    (log A, log B_noise)."""
    data = [(float(p.global_batch), e) for p in good for e in p.epochs]
    r = epochs_lr.fit_rule(data, scaling, prior, seed_sd, sd_floor=SEED_SD_FLOOR_LOG)
    cov = r.cov
    cov_log = ((cov[0][0], cov[0][2]), (cov[2][0], cov[2][2]))
    if r.mode == epochs_lr.LIMIT:
        return EpochsModel(0.0, math.inf, tuple(points), cov_log, seed_sd, r.why_limit, prior=prior,
                           b_crit_mode=FROZEN, rule=r)
    alone = None
    if r.mode == epochs_lr.JOINT and len({p.global_batch for p in good}) >= 4:
        alone = epochs_lr.fit_rule(data, scaling, None, seed_sd, sd_floor=SEED_SD_FLOOR_LOG).b_noise
    return EpochsModel(4 * r.a * r.k * r.b_noise, r.b_noise, tuple(points), cov_log, seed_sd, prior=prior,
                       b_crit_mode=JOINT if r.mode == epochs_lr.JOINT else FIT, data_only_b_crit=alone, rule=r)


def _fit_edge(points: Sequence[BatchPoint], good: Sequence[BatchPoint], scaling: LrScaling, curve: EdgeCurve,
              seed_sd: float) -> epochs_edge.EdgeEpochsFit:
    """The edge's form fitted to every converged seed and every seed that did not converge (at its cap)."""
    converged = [(float(p.global_batch), e) for p in points for e in (*p.epochs, *p.late)]
    censored = [(float(p.global_batch), float(p.max_epochs)) for p in points if p.max_epochs
                for _ in range(p.not_converged if p.converged or p.not_converged else 1)]
    caps = [p.max_epochs for p in points if p.max_epochs]
    return epochs_edge.fit(converged, censored, scaling, curve, seed_sd, max(caps) if caps else None)


Cov = tuple[tuple[float, float], tuple[float, float]]


def _least_squares(b: np.ndarray, e: np.ndarray, prior: BCritPrior | None, seed_sd: float) -> tuple[float, float, Cov]:
    """(E_min, B_crit, covariance of their logs) by bounded least squares in log space. With a prior, the
    residuals are standardized (the epochs' by the seeds' spread, the prior's by its sd) and the covariance is
    scaled up where the epochs scatter more than their seeds do."""
    def residuals(theta: np.ndarray) -> np.ndarray:
        e_min, b_crit = np.exp(theta)
        out: np.ndarray = np.log(e_min * (1 + b / b_crit)) - np.log(e)
        if prior is None:
            return out
        return np.append(out / seed_sd, (theta[1] - math.log(prior.b_simple)) / prior.sd_log)

    lower = np.log([E_MIN_BOUNDS[0], B_CRIT_BOUNDS[0]])
    upper = np.log([E_MIN_BOUNDS[1], B_CRIT_BOUNDS[1]])
    guess = prior.b_simple if prior is not None else float(np.median(b))
    start = np.clip(np.log([e.min(), guess]), lower, upper)
    result = solve(residuals, numeric_jacobian(residuals), start, lower, upper)
    e_min, b_crit = (float(v) for v in np.exp(result.x))
    if prior is None:
        scale = float(np.sum(result.fun ** 2)) / max(1, len(e) - 2)
    else:   # standardized residuals: about 1 each where the model fits as well as the seeds agree; more, more
        scale = max(1.0, float(np.sum(result.fun[:-1] ** 2)) / len(e))
    try:
        cov = np.linalg.inv(result.jac.T @ result.jac) * scale
    except np.linalg.LinAlgError:
        cov = np.zeros((2, 2))
    return e_min, b_crit, ((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1])))
