"""Socket sharing where the cells cannot identify it: two readings of one multi-rank slowdown, and the interval
that spans both. Pure.

Ranks sharing a socket slow down for two reasons that cells at one local batch cannot tell apart:

- their all-reduce costs a step more than it costs alone (ρ: Gloo's thread takes turns with the backward pass);
- they share the socket's memory bandwidth and last-level cache (μ: every rank's compute slows).

Both readings fit the measured cells. They part where a layout has more ranks per socket than any cell: the
ring's all-reduce, and so ρ's share, is about flat in the ranks, while μ's grows with every rank added. The step
model reads the slowdown as ρ (μ is frozen at 0, `step.free_parameters`). The other reading holds ρ at 1 (the
all-reduce as calibrated) and gives the rest to μ, which is at most `step.SHARING_MU_MAX` (a socket's throughput
does not fall as ranks are added). The interval's end toward the other reading moves to it, and the row says
which figure each reading took. Nothing is spanned where μ is identified (ranks sharing a socket at 2 local
batches), where no measured cell shares a socket (then the ranks axis has one level, and the bounds from the
evidence hold such a layout), or where ρ was not fitted.

>>> from orchestrator.core.predict.comm import ddp_buckets
>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> LINKS, BUCKETS = {"socket": LinkFit("socket", 20e-6, 1e-9, 16, 0.0)}, tuple(ddp_buckets(6 * 2**20))
>>> def shared_world(lay):       # the truth: no extra all-reduce cost (ρ = 1), a socket shared at μ = 0.3
...     compute = 0.004 * lay.local_batch * (1 + 0.3 * (lay.ranks_per_socket - 1)) / lay.threads
...     comm = LINKS["socket"].step_s(lay.ranks, BUCKETS) if lay.ranks > 1 else 0.0
...     return Cell(lay, lay.global_batch / (compute + comm))
>>> cells = [shared_world(Layout(r, t, 16, 1, r, "socket" if r > 1 else None)) for r, t in ((1, 1), (1, 2), (2, 1))]
>>> model = fit_step_model(cells, LINKS, BUCKETS)
>>> reading = SharingReading(cells, model, LINKS, BUCKETS, None)
>>> round(reading.other().values.mu, 2), reading.other().values.rho
(0.3, 1.0)
>>> eight = Layout(8, 1, 16, 1, 8, "socket")
>>> truth = shared_world(eight).samples_per_s
>>> model.samples_per_s(eight) > 1.3 * truth            # ρ's reading: 8 ranks barely slower than 2
True
>>> low, high, why = widened(model, reading.other(), eight, 0.9 * model.samples_per_s(eight), 1e9)
>>> round(low / truth, 3), why[0].startswith("low end: socket sharing")
(1.0, True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from orchestrator.core.predict.comm import LinkFit
from orchestrator.core.predict.step import Cell, Layout, StepModel, fit_step_model


class SharingReading:
    """The socket-sharing reading of a fit's cells (`fit_step_model(sharing_alone=True)`), fitted on first use
    only, and None where the fit's own reading is the only one (the module's docstring says when)."""

    def __init__(self, cells: Sequence[Cell], model: StepModel, links: Mapping[str, LinkFit],
                 buckets: Sequence[int], thread_prior: Mapping[int, float] | None):
        self._args = (tuple(cells), links, tuple(buckets), thread_prior)
        self._needed = ("mu" in model.frozen and "rho" not in model.frozen
                        and any(c.layout.ranks_per_socket > 1 for c in cells))
        self._other: StepModel | None = None

    def other(self) -> StepModel | None:
        if not self._needed:
            return None
        if self._other is None:
            cells, links, buckets, prior = self._args
            self._other = fit_step_model(cells, links, buckets, prior, starts=3, sharing_alone=True)
        return self._other


def widened(model: StepModel, other: StepModel, lay: Layout, low: float, high: float
            ) -> tuple[float, float, tuple[str, str]]:
    """(low, high) widened to the other reading's samples/s of `lay` where it lies outside them, and what set
    the end it moved ("" for an end left as it was). `model` carries the CPU what-if; the reading takes its
    scale."""
    if lay.ranks <= 1:
        return low, high, ("", "")
    value = replace(other, compute_scale=model.compute_scale).samples_per_s(lay)
    mu, rho = other.values.mu, model.values.rho
    why = (f"socket sharing not identified (ranks share a socket at one local batch): read as the socket's "
           f"memory bandwidth and cache, μ = {mu:.2f} per rank sharing it, with the all-reduce as calibrated, "
           f"not as ρ = {rho:.2f}")
    if value < low:
        return value, high, (f"low end: {why}", "")
    if value > high:
        return low, value, ("", f"high end: {why}")
    return low, high, ("", "")
