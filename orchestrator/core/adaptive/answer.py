"""The question an adaptive sweep answers, what is measured so far, and the answer with its interval. Pure.

Two questions (`Question.kind`):

- FASTEST, the fastest time-to-train over the question's layouts: for every layout, hours = epochs at its
  global batch × samples per epoch ÷ its samples/s ÷ 3600, with an interval that pairs the few-epochs end with
  the fast end (as `orch predict` does); the answer is the smallest, its interval [min of the lows, min of the
  highs] (if every layout lies in its interval, the fastest lies in that one). Without convergence runs the
  time of one sample stands in for hours (the same order at a fixed number of epochs).
- TABLE, the scalability table: samples/s of every layout; the answer's width is the widest of its rows.

A layout measured on the machine the question is about answers for itself, within its repeat noise (the
larger of its own CV and the cells' median); any other is `interval.predict_cell`'s prediction and interval.
A layout without an interval counts as anywhere in [0, ∞), and so does every layout not measured where the
GEMM peaks say the machine was busy while they ran (`evidence.disturbed`: no scaling measured then bounds
another layout).

Width is relative: (high − low) ÷ the answer's value; 0.2 is about ±10%. `objective` is what the selection
shrinks: for FASTEST the width over the layouts with an interval plus WIDTH_CAP for each layout without one,
for TABLE the sum of the rows' widths (the A-optimal criterion's trace of the variances, in widths), each
capped at WIDTH_CAP, so that a row without an interval counts, but finitely.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from orchestrator.core.machine.topology import Topology
from orchestrator.core.measured.convergence import convergence_by_batch
from orchestrator.core.measured.records import Record, Records
from orchestrator.core.predict import comm, data
from orchestrator.core.predict.epochs import NOT_CONVERGED, BatchPoint, EpochsModel, fit_epochs, points_from_batches
from orchestrator.core.predict.fit import NotFittable, check_fittable
from orchestrator.core.predict.interval import Basis, basis_of, predict_cell
from orchestrator.core.predict.machine import SAME_MACHINE, MachineWhatIf
from orchestrator.core.predict.step import Cell, Layout
from orchestrator.core.predict.uncertainty import BOOTSTRAP_RESAMPLES
from orchestrator.core.predict.validate import epochs_growth, validate_epochs

FASTEST = "fastest_time_to_train"
TABLE = "scalability_table"
QUESTIONS = (FASTEST, TABLE)
WIDTH_CAP = 10.0          # a width beyond this (or none at all: no interval) counts as this much
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Question:
    """What the sweep is for: `kind` over `layouts` (the target's), with or without epochs."""

    kind: str
    layouts: tuple[Layout, ...]
    uses_epochs: bool = True           # the sweep runs convergence: FASTEST is time-to-train, not time per sample
    same_machine: bool = True          # the layouts are on the measured machine: a measured one answers itself
    samples_per_epoch: int | None = None
    machine: MachineWhatIf = SAME_MACHINE

    def __post_init__(self) -> None:
        if self.kind not in QUESTIONS:
            raise ValueError(f"question {self.kind!r}: must be one of {', '.join(QUESTIONS)}")
        if not self.layouts:
            raise ValueError("the question has no layout to answer over")


@dataclass(frozen=True, slots=True)
class AdaptiveOptions:
    """What an adaptive sweep is asked (the sweep file's `adaptive` section and `orch sweep`'s options)."""

    question: str = FASTEST
    budget_s: float | None = None              # wall-clock seconds, the calibration included
    target_width: float | None = None          # stop once the answer's relative width is at most this
    target_topology: Topology | None = None    # None: the sweep's own machine, over its grid
    nodes: int = 1


@dataclass(frozen=True)
class Known:
    """What has been measured, as the models read it: throughput cells, the calibration, GEMM peaks and the
    converged seeds per global batch. A fantasy (`with_cell`, `with_seed`) is a Known with one more."""

    cells: tuple[Cell, ...]
    links: Mapping[str, comm.LinkFit] = field(default_factory=dict)
    buckets: tuple[int, ...] = ()
    thread_prior: Mapping[int, float] = field(default_factory=dict)
    gemm: Mapping[tuple[int, int], float] = field(default_factory=dict)
    points: tuple[BatchPoint, ...] = ()

    @staticmethod
    def of(records: Iterable[Record]) -> Known:
        records = Records.of(records)
        return Known(tuple(data.cells_from_records(records)), comm.fit_links(comm.samples_from_records(records)),
                     data.gradient_buckets(records), data.thread_speedups(records), data.gemm_peaks(records),
                     tuple(points_from_batches(convergence_by_batch(records))))

    def with_cell(self, cell: Cell) -> Known:
        return replace(self, cells=(*self.cells, cell))

    def with_seed(self, global_batch: int, epochs: float) -> Known:
        """One more converged seed at `global_batch`."""
        old = next((p for p in self.points if p.global_batch == global_batch), None)
        # a new batch trains under the sweep's learning-rate rule, as the measured ones did
        rule = next((p.lr_scaling for p in self.points if p.lr_scaling is not None), None)
        new = (replace(old, epochs=old.epochs + (epochs,)) if old else
               BatchPoint(global_batch, (epochs,), lr_scaling=rule))
        rest = [p for p in self.points if p.global_batch != global_batch]
        return replace(self, points=tuple(sorted([*rest, new], key=lambda p: p.global_batch)))

    @property
    def fittable(self) -> str:
        """'' when the step model can be fitted, else why not."""
        try:
            check_fittable(self.cells)
        except NotFittable as err:
            return str(err).split(". Measure")[0]
        return ""

    def basis(self, resamples: int = BOOTSTRAP_RESAMPLES) -> Basis | None:
        return None if self.fittable else basis_of(self.cells, self.links, self.buckets, self.thread_prior, self.gemm,
                                                   resamples=resamples)

    def epochs(self) -> EpochsModel | None:
        """The epochs model as `orch predict` fits it (its extrapolation error from leaving each end out)."""
        if not any(p.converged for p in self.points):
            return None
        model = fit_epochs(self.points)
        return replace(model, growth_log_per_doubling=epochs_growth(validate_epochs(self.points)))


@dataclass(frozen=True, slots=True)
class Row:
    """One layout of the question: its value (hours, seconds per sample or samples/s) and interval (0, ∞ when
    it has none), whether it was measured, and why it has no interval or no value."""

    layout: Layout
    value: float | None
    low: float
    high: float
    measured: bool = False
    why: str = ""

    @property
    def width(self) -> float:
        if self.value is None or self.value <= 0 or math.isinf(self.high):
            return math.inf
        return (self.high - self.low) / self.value


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer: its value and interval, the layout it names, its relative width and the selection's
    objective; None for value with the reason in `why` while there is no answer yet."""

    kind: str
    unit: str
    value: float | None
    low: float
    high: float
    layout: Layout | None
    width: float
    objective: float
    rows: tuple[Row, ...] = ()
    why: str = ""

    @property
    def contenders(self) -> tuple[Layout, ...]:
        """FASTEST: the layouts that may still be the fastest (their low end below the answer's high end)."""
        if self.kind != FASTEST:
            return tuple(r.layout for r in self.rows)
        return tuple(r.layout for r in self.rows if r.value is not None and r.low < self.high)


def no_answer(q: Question, why: str) -> Answer:
    unit = "samples/s" if q.kind == TABLE else ("h" if q.uses_epochs else "s per sample")
    return Answer(q.kind, unit, None, 0.0, math.inf, None, math.inf, WIDTH_CAP * (len(q.layouts) if q.kind == TABLE
                                                                                 else 1), why=why)


def _same(a: Layout, b: Layout) -> bool:
    return (a.ranks, a.threads, a.local_batch, a.nodes) == (b.ranks, b.threads, b.local_batch, b.nodes)


def rate(basis: Basis, q: Question, lay: Layout) -> Row:
    """samples/s of a layout: measured (within its noise) or predicted (with its interval, or [0, ∞))."""
    if q.same_machine:
        cell = next((c for c in basis.cells if _same(c.layout, lay)), None)
        if cell is not None:
            noise = max(cell.cv, math.expm1(basis.bands.noise_log))
            v = cell.samples_per_s
            return Row(lay, v, v / (1 + noise), v * (1 + noise), measured=True)
    p = predict_cell(basis, lay, q.machine)
    if basis.evidence.disturbed:     # the GEMM peaks say the machine was busy: no prediction bounds a layout
        return Row(lay, p.value, 0.0, math.inf, why=f"not measured, and the scaling evidence is disturbed "
                                                     f"({basis.evidence.disturbed.split(':')[0]})")
    if p.low is None or p.high is None:
        return Row(lay, p.value, 0.0, math.inf, why=p.no_interval)
    return Row(lay, p.value, p.low, p.high)


def _hours(q: Question, r: Row, epochs: EpochsModel | None) -> Row:
    """The layout's time: hours to train (with epochs) or seconds per sample, its interval from the two."""
    assert r.value is not None
    if not q.uses_epochs or epochs is None:
        return Row(r.layout, 1 / r.value, 1 / r.high if r.high > 0 else 0.0,
                   1 / r.low if r.low > 0 else math.inf, r.measured, r.why)
    e = epochs.predict(r.layout.global_batch)
    if e.status == NOT_CONVERGED or e.epochs is None:
        return Row(r.layout, None, 0.0, math.inf, r.measured, e.note)
    value, per = e.epochs, (q.samples_per_epoch or 1) / SECONDS_PER_HOUR
    e_low, e_high = (e.low, e.high) if e.low is not None and e.high is not None else (0.0, math.inf)
    if epochs.seed_sd_log <= 0:   # no two seeds of a batch yet: a band from the fit alone would be its round-off
        e_low, e_high, e = 0.0, math.inf, replace(e, no_interval="no two seeds of one global batch yet")
    low = e_low * per / r.high if r.high > 0 and not math.isinf(r.high) else 0.0
    high = e_high * per / r.low if r.low > 0 else math.inf
    why = "; ".join(w for w in (r.why, e.no_interval and f"epochs: {e.no_interval}") if w)
    return Row(r.layout, value * per / r.value, low, high, r.measured, why)


def answer_from(q: Question, basis: Basis | None, epochs: EpochsModel | None, why_not: str = "") -> Answer:
    """The answer from fitted models (`Known.basis`, `Known.epochs`); `why_not`: why there is no basis."""
    if basis is None:
        return no_answer(q, why_not or "the step model cannot be fitted yet")
    rates = [rate(basis, q, lay) for lay in q.layouts]
    if q.kind == TABLE:
        widths = [min(r.width, WIDTH_CAP) for r in rates]
        best = max(rates, key=lambda r: r.value or 0.0)
        assert best.value is not None
        return Answer(q.kind, "samples/s", best.value, best.low, best.high, best.layout, max(r.width for r in rates),
                      sum(widths), tuple(rates))
    if q.uses_epochs and epochs is None:
        return no_answer(q, "no global batch has converged yet: epochs to target are unknown")
    rows = [_hours(q, r, epochs) for r in rates]
    timed = [r for r in rows if r.value is not None]
    if not timed:
        return no_answer(q, "no layout's global batch converges: " + "; ".join(dict.fromkeys(r.why for r in rows)))
    best = min(timed, key=lambda r: r.value or math.inf)
    assert best.value is not None
    low, high = min(r.low for r in timed), min(r.high for r in timed)
    width = (high - low) / best.value if not math.isinf(high) else math.inf
    return Answer(q.kind, "h" if q.uses_epochs else "s per sample", best.value, low, high, best.layout, width,
                  _objective(timed, best.value), tuple(rows))


def _objective(timed: list[Row], value: float) -> float:
    """FASTEST's objective: the width over the layouts with an interval, plus WIDTH_CAP for each without one
    (any of them may be the fastest: until each is bounded, the answer's low end stays at 0, so measuring one
    of several would not move the width itself, yet it is the progress that counts)."""
    bounded = [r for r in timed if r.low > 0 and not math.isinf(r.high)]
    width = (min(r.high for r in bounded) - min(r.low for r in bounded)) / value if bounded else WIDTH_CAP
    return min(width, WIDTH_CAP) + WIDTH_CAP * (len(timed) - len(bounded))


def answer_of(known: Known, q: Question, resamples: int = BOOTSTRAP_RESAMPLES) -> Answer:
    """The answer from what is known (fits the step model and the epochs model)."""
    return answer_from(q, known.basis(resamples), known.epochs() if q.uses_epochs else None, known.fittable)


def relative_text(width: float) -> str:
    """A relative width as ±half of it, in percent.

    >>> relative_text(0.2), relative_text(float("inf"))
    ('±10.0%', 'no interval')
    """
    return "no interval" if math.isinf(width) else f"±{50 * width:.1f}%"
