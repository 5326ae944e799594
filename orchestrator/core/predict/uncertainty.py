"""The step model's own uncertainty: a residual bootstrap of its fit.

The fit's log residuals (measured step time over fitted, one per cell) are resampled with replacement, added to
the fitted values and the model is refitted, `BOOTSTRAP_RESAMPLES` times. The spread of a layout's predicted
throughput over these refits is the part of its uncertainty that comes from the fit itself: small inside the
data, growing as the layout moves away from it (a parameter that the cells pin loosely moves more in the
refits, and its effect grows with the distance). The design stays fixed (every refit sees the same layouts),
so a parameter the cells determine stays determined. The resampling is seeded: the same records give the same
intervals. Pure. Fitted to 1 and 2 threads, the spread at 16 threads is more than twice that at 2:

>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> cells = [Cell(Layout(1, t, b), b / (0.01 + 0.002 * b / t ** 0.9) * (1 + 0.01 * ((t + b) % 3 - 1)))
...          for t in (1, 2) for b in (8, 16, 32)]
>>> refits = bootstrap_models(cells, fit_step_model(cells, {}, []), {}, [])
>>> len(refits), log_spread(refits, Layout(1, 16, 16)) > 2 * log_spread(refits, Layout(1, 2, 16)) > 0
(24, True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from orchestrator.core.predict.comm import LinkFit
from orchestrator.core.predict.step import Cell, Layout, StepModel, fit_step_model

BOOTSTRAP_RESAMPLES = 24      # the spread's own error is about 1/√(2·24) ≈ 14%: enough for a band's width
BOOTSTRAP_SEED = 0


def bootstrap_models(cells: Sequence[Cell], model: StepModel, links: Mapping[str, LinkFit],
                     buckets: Sequence[int], thread_prior: Mapping[int, float] | None = None,
                     resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[StepModel, ...]:
    """Refits of `model` to its cells with resampled residuals; () when there are no more cells than fitted
    parameters (no residual degrees of freedom: the residuals say nothing about the noise)."""
    free = len(model.params) - len(model.frozen)
    if len(cells) <= free:
        return ()
    residuals = np.array([math.log(c.step_s / model.step_s(c.layout)) for c in cells])
    residuals = (residuals - residuals.mean()) * math.sqrt(len(cells) / (len(cells) - free))  # dof-corrected
    fitted = [model.step_s(c.layout) for c in cells]
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    out = []
    start = {p: v for p, v in model.params.items() if p not in model.frozen}
    for _ in range(resamples):
        draw = rng.choice(residuals, size=len(cells), replace=True)
        fake = [Cell(c.layout, c.layout.global_batch / (t * math.exp(e)), c.cv) for c, t, e in zip(cells, fitted, draw)]
        out.append(fit_step_model(fake, links, buckets, thread_prior, starts=0, start_from=start))
    return tuple(out)


def log_spread(models: Sequence[StepModel], lay: Layout) -> float:
    """Standard deviation of log samples/s over the bootstrap refits (0 without refits)."""
    if len(models) < 2:
        return 0.0
    return float(np.std([math.log(m.samples_per_s(lay)) for m in models], ddof=1))
