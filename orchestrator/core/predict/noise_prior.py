"""B_simple, measured in the convergence runs (`orchestrator.core.measured.noise_scale`), as a prior on B_crit. Pure.

McCandlish et al. (2018) find the critical batch of `epochs(B) = E_min·(1 + B/B_crit)` close to the gradient
noise scale, of which B_simple is the estimate that ignores the Hessian's shape; it grows as training goes on
and one run's value is noisy. So it is a prior, not the answer: log B_crit ~ Normal(log B̄, sd²), where B̄ is
the geometric mean of the runs' B_simple (each at the evaluation where its run stopped), and sd adds

- the measurement's uncertainty: the runs' spread around B̄ and their own intervals, over the number of runs;
- how far B_simple may lie from B_crit: `B_SIMPLE_TO_B_CRIT_SD_LOG`, an assumption (a factor of 3 is one
  standard deviation), which the large-batch check (`benchmarks/large_batch_check.py`) puts to the test.

>>> p = prior_of([(100.0, 80.0, 125.0), (200.0, 150.0, 270.0), (150.0, 100.0, None)])
>>> round(p.b_simple), p.runs, round(p.low), round(p.high)
(144, 3, 23, 918)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from orchestrator.core.measured import records as rec
from orchestrator.core.measured.noise_scale import Z_90

# One standard deviation, in log, between B_simple and the B_crit the epochs imply: an assumption (a factor of 3).
B_SIMPLE_TO_B_CRIT_SD_LOG = math.log(3.0)
# A run whose interval is unbounded above counts its low end's distance twice (a one-sided interval).
ONE_SIDED = 2.0


@dataclass(frozen=True, slots=True)
class BCritPrior:
    """The prior on B_crit: its centre (the runs' geometric mean of B_simple) and sd in log, and the 90% range
    that means."""

    b_simple: float
    sd_log: float
    runs: int
    measured_sd_log: float          # the measurement's part of sd_log (without the B_simple → B_crit assumption)

    @property
    def low(self) -> float:
        return self.b_simple * math.exp(-Z_90 * self.sd_log)

    @property
    def high(self) -> float:
        return self.b_simple * math.exp(Z_90 * self.sd_log)

    @property
    def measured_low(self) -> float:
        return self.b_simple * math.exp(-Z_90 * self.measured_sd_log)

    @property
    def measured_high(self) -> float:
        return self.b_simple * math.exp(Z_90 * self.measured_sd_log)

    def words(self) -> str:
        return (f"B_simple {self.b_simple:.3g} [{self.measured_low:.3g}–{self.measured_high:.3g}] over {self.runs} "
                f"run(s), so B_crit ~ {self.b_simple:.3g} [{self.low:.3g}–{self.high:.3g}] (90%, with B_simple "
                f"within ×{math.exp(B_SIMPLE_TO_B_CRIT_SD_LOG):.0f} of B_crit at one sd)")


def _run_sd_log(b: float, low: float | None, high: float | None) -> float:
    """One run's sd in log from its 90% interval (one-sided where the high end is unbounded)."""
    if low is None or low <= 0:
        return B_SIMPLE_TO_B_CRIT_SD_LOG
    if high is None:
        return ONE_SIDED * math.log(b / low) / Z_90
    return math.log(high / low) / (2 * Z_90)


def prior_of(runs: Sequence[tuple[float, float | None, float | None]]) -> BCritPrior | None:
    """The prior from the runs' (b_simple, low, high); None without a resolved run."""
    good = [(b, low, high) for b, low, high in runs if b is not None and b > 0]
    if not good:
        return None
    logs = [math.log(b) for b, _, _ in good]
    n = len(good)
    between = statistics.pvariance(logs) if n > 1 else 0.0
    within = statistics.mean(_run_sd_log(b, low, high) ** 2 for b, low, high in good)
    measured = math.sqrt((between + within) / n)
    return BCritPrior(math.exp(statistics.mean(logs)), math.sqrt(measured**2 + B_SIMPLE_TO_B_CRIT_SD_LOG**2), n,
                      measured)


def run_values(records: Iterable[rec.Record]) -> list[tuple[int, float, float | None, float | None]]:
    """(global batch, b_simple, low, high) of every ok convergence run that resolved B_simple."""
    out = []
    for r in rec.Records.of(records).ok(rec.Kind.CONVERGENCE):
        ns = r.convergence.noise_scale if r.convergence is not None else None
        if ns is not None and ns.b_simple is not None and ns.b_simple > 0:
            out.append((r.global_batch or 0, float(ns.b_simple), ns.low, ns.high))
    return out


def prior_from_records(records: Iterable[rec.Record], *, batches: Iterable[int] | None = None) -> BCritPrior | None:
    """The prior from a sweep's convergence records (only those of `batches`, when given)."""
    keep = None if batches is None else set(batches)
    return prior_of([(b, low, high) for batch, b, low, high in run_values(records) if keep is None or batch in keep])
