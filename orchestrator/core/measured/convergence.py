"""Epochs to target per global batch, aggregated over seeds the way MLPerf's reference-convergence-point
(RCP) checker does, and exported in the layout of its RCP files so the two can be compared.

The rule, from mlcommons/logging `mlperf_logging/rcp_checker/rcp_checker.py` (`compute_rcp_stats`,
`_eval_submission_record`, `read_submission_file`):

- the epochs of all runs are sorted and one run is dropped at each end (`samples_rejected = 1`; 4 for
  unet3d, which has 40 runs) before `np.mean`: the olympic mean. The checker always drops; a slice of fewer
  than 3 runs would leave nothing, so with fewer than `OLYMPIC_MIN_SEEDS` seeds we take the plain mean.
- the spread is `np.std`, the population standard deviation (ddof=0), over all runs, not only the kept
  ones. We take it over the converged seeds (a non-converged one has no epoch count).
- a run that did not converge, or did not finish, counts as infinitely many epochs (the checker writes
  1e9). With 3 or more seeds one such seed is the slowest and is dropped; two or more keep the mean
  infinite, which is the checker's "insufficient convergence". We report that row as "did not converge".

Pure: records in, dataclasses out (the table and the RCP file: core.tabulate.convergence).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from orchestrator.core.measured import records as rec
from orchestrator.core.planning.trial import Trial

OLYMPIC_MIN_SEEDS = 3        # fewer seeds than this: plain mean (nothing would be left after dropping)
DROPPED_EACH_END = 1         # the checker's samples_rejected for every benchmark but unet3d


def olympic_mean(epochs: Sequence[float], dropped_each_end: int = DROPPED_EACH_END) -> float:
    """Mean after dropping the fastest and the slowest run, as MLPerf's RCP checker does; the plain mean
    of fewer than 3 runs. `math.inf` stands for a run that did not converge.

    >>> olympic_mean([3.0, 4.0, 3.5])                 # 3 seeds: the middle one
    3.5
    >>> olympic_mean([5.0, 6.0, 7.0, 8.0, 20.0])      # 5 seeds: mean of 6, 7, 8
    7.0
    >>> olympic_mean([6.0, 7.0, math.inf])             # one non-converged seed is dropped as the slowest
    7.0
    >>> olympic_mean([6.0, math.inf, math.inf])        # two are not: the mean stays infinite
    inf
    """
    if not epochs:
        raise ValueError("olympic_mean of no runs")
    ordered = sorted(epochs)
    # too few runs to drop `dropped_each_end` at each end (unet3d's 4): drop one, or none below 3 runs
    drop = dropped_each_end if len(ordered) > 2 * dropped_each_end else 1 if len(ordered) >= OLYMPIC_MIN_SEEDS else 0
    ordered = ordered[drop:len(ordered) - drop]
    if any(math.isinf(e) for e in ordered):
        return math.inf
    return sum(ordered) / len(ordered)


@dataclass(frozen=True, kw_only=True, slots=True)
class Hyperparams:
    """A run's learning-rate setup, by MLPerf's key names where one exists: what an RCP file's "Hyperparams" holds
    (`rcp_hyperparams` fills it from a convergence record; None where the record does not say).

    >>> Hyperparams(opt_base_learning_rate=0.02, lr_rule="sqrt", base_batch=32).to_json()
    {'opt_base_learning_rate': 0.02, 'lr_rule': 'sqrt', 'base_batch': 32}
    """

    opt_base_learning_rate: float | None = None           # the rate the run trained at
    opt_learning_rate_warmup_epochs: float | None = None
    lr_rule: str | None = None                            # how the rate was scaled with the batch (core.planning.lr)
    lr_at_base_batch: float | None = None
    base_batch: int | None = None

    def to_json(self) -> dict[str, float | str]:
        """The keys the record gave, in this order (an RCP file's "Hyperparams")."""
        return {key: value for key, value in (
            ("opt_base_learning_rate", self.opt_base_learning_rate),
            ("opt_learning_rate_warmup_epochs", self.opt_learning_rate_warmup_epochs), ("lr_rule", self.lr_rule),
            ("lr_at_base_batch", self.lr_at_base_batch), ("base_batch", self.base_batch)) if value is not None}


@dataclass(frozen=True, slots=True)
class SeedRun:
    """One seed of one global batch."""

    seed: int | None
    layout: Trial                # the layout it ran on
    status: str
    epochs: float | None         # epochs to target; None when it did not converge (or did not finish)
    max_epochs: float | None
    reason: str | None = None    # first line of the record's reason, for failed/oom/timeout runs
    noise: tuple[float, float | None, float | None] | None = None   # B_simple (value, low, high) where resolved

    @property
    def converged(self) -> bool:
        return self.epochs is not None

    def why_not(self) -> str:
        """Why this seed has no epoch count, in words (empty when it converged)."""
        if self.converged:
            return ""
        cap = f" by {self.max_epochs:g} epochs" if self.max_epochs is not None else ""
        if self.status == rec.Status.OK:
            return f"seed {self.seed} did not converge{cap}"
        cause = f": {self.reason}" if self.reason else ""
        return (f"seed {self.seed} ended {self.status}{cause}; counted as not converged, as MLPerf's checker "
                "counts a run that did not finish")


@dataclass(frozen=True, slots=True)
class BatchConvergence:
    """Epochs to target of one global batch over its seeds, aggregated as the RCP checker does."""

    global_batch: int
    runs: tuple[SeedRun, ...]              # sorted by seed
    mean_epochs: float | None              # olympic mean; None when it is infinite (did not converge)
    sd_epochs: float | None                # population SD over the converged seeds; None if fewer than 2
    method: str                            # how the mean was taken, for captions
    hyperparams: Hyperparams = field(default_factory=Hyperparams)
    metric: str | None = None
    target: float | None = None

    @property
    def converged(self) -> int:
        return sum(r.converged for r in self.runs)

    @property
    def layouts(self) -> tuple[Trial, ...]:
        return tuple(sorted({r.layout for r in self.runs}))

    @property
    def max_epochs(self) -> float | None:
        caps = [r.max_epochs for r in self.runs if r.max_epochs is not None]
        return max(caps) if caps else None


def seed_run(record: rec.Record) -> SeedRun:
    """A convergence record as a SeedRun; failed, oom and timeout runs count as not converged."""
    conv = record.convergence or rec.ConvergenceSection()
    epochs = conv.epochs_to_target if record.ok and conv.converged else None
    reason = next(iter(record.reason_lines()), None)
    ns = conv.noise_scale if record.ok else None
    noise = (float(ns.b_simple), ns.low, ns.high) if ns is not None and ns.b_simple is not None else None
    return SeedRun(record.seed, record.trial, record.status, float(epochs) if epochs is not None else None,
                   conv.max_epochs, reason, noise)


def aggregate(global_batch: int, runs: Sequence[SeedRun], *, hyperparams: Hyperparams | None = None,
              metric: str | None = None, target: float | None = None) -> BatchConvergence:
    """Olympic mean and SD of the seeds' epochs to target.

    Example: seeds at 6.0, 7.0 and not converged → mean 7.0 (the non-converged seed is dropped as the
    slowest, 6.0 as the fastest), SD 0.5 over 6.0 and 7.0.
    """
    runs = tuple(sorted(runs, key=lambda r: (r.seed is None, r.seed)))
    epochs = [r.epochs if r.epochs is not None else math.inf for r in runs]
    mean = olympic_mean(epochs) if epochs else math.inf
    finite = [e for e in epochs if not math.isinf(e)]
    sd = statistics.pstdev(finite) if len(finite) >= 2 else None
    if len(runs) >= OLYMPIC_MIN_SEEDS:
        method = f"olympic mean of {len(runs)} seeds (fastest and slowest dropped)"
    else:
        method = (f"mean of {len(runs)} seed{'s' if len(runs) != 1 else ''} "
                  f"(fewer than {OLYMPIC_MIN_SEEDS}: none dropped)")
    return BatchConvergence(global_batch, runs, None if math.isinf(mean) else mean, sd, method,
                            hyperparams=hyperparams or Hyperparams(), metric=metric, target=target)


def convergence_by_batch(records: Iterable[rec.Record]) -> tuple[BatchConvergence, ...]:
    """One aggregate per global batch that has convergence records (infeasible ones never ran: skipped)."""
    by_batch: dict[int, list[rec.Record]] = {}
    for r in rec.Records.of(records).of_kind(rec.Kind.CONVERGENCE):
        if r.status != rec.Status.INFEASIBLE:
            by_batch.setdefault(r.global_batch or 0, []).append(r)
    result = []
    for batch, group in sorted(by_batch.items()):
        first = next((r.convergence for r in group if r.convergence is not None), rec.ConvergenceSection())
        result.append(aggregate(batch, [seed_run(r) for r in group], hyperparams=rcp_hyperparams(first),
                                metric=first.metric, target=first.target))
    return tuple(result)


def rcp_hyperparams(conv: rec.ConvergenceSection) -> Hyperparams:
    """The learning-rate setup of a run, with MLPerf's key names where one exists."""
    return Hyperparams(opt_base_learning_rate=conv.lr, opt_learning_rate_warmup_epochs=conv.warmup_epochs,
                       lr_rule=conv.lr_rule, lr_at_base_batch=conv.base_lr, base_batch=conv.base_batch)


def reference_batch(batches: Sequence[BatchConvergence]) -> BatchConvergence | None:
    """The smallest global batch with a finite mean: the one the table is normalized to."""
    return next((b for b in batches if b.mean_epochs is not None), None)
