"""A saved prediction scored against what ran later: per cell, per axis, beside the naive baselines. Pure.

Each predicted layout that was measured becomes a row (measured, predicted, interval, error, inside or not), and
each predicted global batch whose seeds ran becomes one or two: its epochs, where most seeds converged, and its
convergence (the predicted P(converge) against the share of seeds that converged). Rows are then summed up per
axis: the axes a layout lies beyond the cells the prediction was made from (threads, ranks, nodes, local batch,
...; "inside" for none; a layout beyond two axes counts in both), "epochs" and "convergence". Per axis: the median
and largest |error|, the share inside the intervals, their median width (high ÷ low), and each baseline's median
and largest |error| on the same rows. A baseline that beats the model there is said, not hidden.

>>> rows = [Row("samples/s", "1×2×8", ("threads",), 1.0, 100.0, 90.0, 80.0, 110.0, {"linear": 120.0}),
...         Row("samples/s", "1×4×8", ("threads",), 2.0, 100.0, 130.0, 105.0, 140.0, {"linear": 240.0})]
>>> [round(r.error_pct, 1) for r in rows], [r.inside for r in rows]
([-10.0, 30.0], [True, False])
>>> s = summarise(rows)[0]
>>> s.axis, s.rows, s.median_abs_pct, s.inside, s.with_interval, round(s.median_width, 3), s.baselines["linear"]
('threads', 2, 20.0, 1, 2, 1.354, (80.0, 140.0))
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.core.json.values import JsonMapping, differing
from orchestrator.core.measured.convergence import convergence_by_batch
from orchestrator.core.measured.records import Record
from orchestrator.core.predict.data import cells_from_records
from orchestrator.core.predict.saved import CellForecast, EpochsForecast, NodeShape, SavedPrediction

SAMPLES_PER_S, EPOCHS, CONVERGENCE, LATE = "samples/s", "epochs", "P(converge)", "P(late)"
DEADLINE_AXIS = "deadline"
# A deadline set at what happened: the prediction's P(late) there is the realized time-to-train's place in its
# predicted distribution; inside its central 90% (0.05-0.95) counts as covered
LATE_RANGE = (0.05, 0.95)
INSIDE_DATA = "inside"               # a layout within every measured axis
EPOCHS_AXIS, CONVERGENCE_AXIS = "epochs", "convergence"
# Axis order in the summary: the layout axes as `bands.extrapolation_axes` names them, then the batch-size ones.
AXIS_ORDER = (INSIDE_DATA, "threads", "ranks", "ranks per socket", "cores", "nodes", "local batch", EPOCHS_AXIS,
              CONVERGENCE_AXIS, DEADLINE_AXIS)


@dataclass(frozen=True, slots=True)
class MeasuredCell:
    """A layout measured later: (ranks, threads, local batch, nodes), median samples/s, the repeats' CV."""

    key: tuple[int, int, int, int]
    samples_per_s: float
    cv: float = 0.0


@dataclass(frozen=True, slots=True)
class MeasuredBatch:
    """A global batch's convergence runs measured later: seeds run, seeds converged, and the epochs (the olympic
    mean of the convergence table) where most seeds converged."""

    global_batch: int
    seeds: int
    converged: int
    epochs: float | None

    @property
    def mostly_converged(self) -> bool:
        return self.converged * 2 > self.seeds


@dataclass(frozen=True, slots=True)
class Row:
    """One prediction against one measurement. `predicted` None: the prediction printed no value (it said the
    batch does not converge, say); `low`/`high` None: no interval."""

    what: str                       # SAMPLES_PER_S, EPOCHS or CONVERGENCE
    label: str
    axes: tuple[str, ...]
    doublings: float                # the largest distance beyond the data, in doublings
    measured: float
    predicted: float | None
    low: float | None
    high: float | None
    baselines: Mapping[str, float] = field(default_factory=dict)
    note: str = ""

    @property
    def error_pct(self) -> float | None:
        """(predicted − measured) ÷ measured, in percent; for convergence, the probability's miss in points."""
        if self.predicted is None:
            return None
        if self.what in (CONVERGENCE, LATE):
            return 100 * (self.predicted - self.measured)
        return 100 * (self.predicted - self.measured) / self.measured

    @property
    def inside(self) -> bool:
        """The measurement within the interval; for convergence, the verdict (P ≥ ½ where most seeds converged)."""
        if self.what == CONVERGENCE:
            return self.predicted is not None and (self.predicted >= 0.5) == (self.measured > 0.5)
        if self.what == LATE:
            return self.predicted is not None and LATE_RANGE[0] <= self.predicted <= LATE_RANGE[1]
        return self.low is not None and self.high is not None and self.low <= self.measured <= self.high

    @property
    def width(self) -> float | None:
        """high ÷ low (1 is a point)."""
        if self.low is None or self.high is None or self.low <= 0:
            return None
        return self.high / self.low

    def baseline_error_pct(self, name: str) -> float | None:
        value = self.baselines.get(name)
        if value is None or not math.isfinite(value) or self.what in (CONVERGENCE, LATE):
            return None
        return 100 * (value - self.measured) / self.measured


@dataclass(frozen=True, slots=True)
class AxisScore:
    """The rows of one axis, summed up."""

    axis: str
    rows: int
    median_abs_pct: float | None
    max_abs_pct: float | None
    inside: int
    with_interval: int
    median_width: float | None
    baselines: Mapping[str, tuple[float, float]]   # id -> (median, max) |error| in percent on the same rows
    unpredicted: int = 0                             # rows where the prediction printed no value

    @property
    def coverage(self) -> float | None:
        return self.inside / self.with_interval if self.with_interval else None

    def beaten_by(self) -> list[str]:
        """The baselines whose median |error| on these rows is below the model's."""
        if self.median_abs_pct is None:
            return []
        return [k for k, (median, _) in self.baselines.items() if median < self.median_abs_pct]


@dataclass(frozen=True, slots=True)
class Scorecard:
    rows: tuple[Row, ...]
    axes: tuple[AxisScore, ...]
    not_measured: int                        # predicted layouts and batches no folder measured (inputs aside)
    not_predicted: tuple[str, ...]           # measured layouts the prediction did not cover


def cell_row(forecast: CellForecast, measured: MeasuredCell) -> Row:
    axes = tuple(b.axis for b in forecast.beyond) or (INSIDE_DATA,)
    far = max((b.doublings for b in forecast.beyond), default=0.0)
    return Row(SAMPLES_PER_S, forecast.label, axes, far, measured.samples_per_s, forecast.samples_per_s,
               forecast.low, forecast.high, dict(forecast.baselines), forecast.no_interval)


def batch_rows(forecast: EpochsForecast, measured: MeasuredBatch) -> list[Row]:
    """The epochs row (where most seeds converged) and the convergence row (where the prediction gave P or the
    seeds mostly failed: a printed epoch count there is a miss)."""
    label = f"global batch {forecast.global_batch}"
    out = []
    if measured.mostly_converged and measured.epochs is not None:
        out.append(Row(EPOCHS, label, (EPOCHS_AXIS,), forecast.doublings, measured.epochs, forecast.epochs,
                       forecast.low, forecast.high, dict(forecast.baselines), forecast.note))
    p = forecast.p_converge
    if p is None and not measured.mostly_converged:
        # a number printed where most seeds did not train: the prediction's verdict was "it trains" (P = 1)
        p = 1.0 if forecast.epochs is not None else 0.0
    if p is not None:
        out.append(Row(CONVERGENCE, label, (CONVERGENCE_AXIS,), forecast.doublings,
                       measured.converged / measured.seeds, p, None, None, {},
                       f"{measured.converged} of {measured.seeds} seeds converged"))
    return out


def late_rows(forecast: EpochsForecast, measured: MeasuredBatch, cells: Sequence[CellForecast],
              by_key: Mapping[tuple[int, int, int, int], MeasuredCell]) -> list[Row]:
    """The deadline probability, scored once per global batch: with the deadline set at the time-to-train that
    happened (its olympic mean epochs at a layout of that batch whose samples/s was measured too), the prediction's
    P(late) there — its epochs band, P(converge) and samples/s interval, as `orch predict --deadline` computes it —
    is where the realized time fell in the predicted distribution: between 0.05 and 0.95 counts as covered."""
    from orchestrator.core.predict.deadline import deadline_risk
    from orchestrator.core.predict.epochs import EpochsPrediction

    if not measured.mostly_converged or measured.epochs is None or forecast.epochs is None or forecast.high is None:
        return []
    for c in cells:
        if c.ranks * c.local_batch == forecast.global_batch and c.key in by_key and c.low and c.high:
            rate = by_key[c.key].samples_per_s
            pred = EpochsPrediction(forecast.global_batch, forecast.epochs, forecast.low, forecast.high,
                                    forecast.status, p_converge=forecast.p_converge)
            risk = deadline_risk(pred, deadline_h=measured.epochs / rate / 3600, samples_per_epoch=1,
                                 samples_per_s=c.samples_per_s, samples_per_s_low=c.low, samples_per_s_high=c.high,
                                 eval_every_epochs=None)
            if risk is None:
                return []
            return [Row(LATE, f"global batch {forecast.global_batch}", (DEADLINE_AXIS,), forecast.doublings, 0.5,
                        risk.p_miss, risk.p_miss_fast, risk.p_miss_slow, {},
                        f"the deadline at what {c.label} took: {measured.epochs:.3g} epochs at {rate:,.0f} samples/s")]
    return []


def score(saved: SavedPrediction, cells: Sequence[MeasuredCell], batches: Sequence[MeasuredBatch]) -> Scorecard:
    """Every predicted layout and global batch that was measured, scored, and the axes summed up."""
    by_key = {c.key: c for c in cells}
    by_batch = {b.global_batch: b for b in batches}
    # a layout the inputs measured is data, not a prediction, on the machine they measured it on; on another one
    # (a CPU what-if, another cluster) it is a prediction like any other
    same = saved.target_machine.same_machine
    rows = [cell_row(f, by_key[f.key]) for f in saved.cells if f.key in by_key and not (f.in_inputs and same)]
    for e in saved.epochs_by_batch:
        if e.global_batch in by_batch and not e.in_inputs:
            rows += batch_rows(e, by_batch[e.global_batch])
            rows += late_rows(e, by_batch[e.global_batch], saved.cells, by_key)
    predicted = {f.key for f in saved.cells}
    not_predicted = tuple(f"{r}×{t}×{b}" + (f" on {n} nodes" if n > 1 else "")
                          for r, t, b, n in sorted(set(by_key) - predicted))
    missing = (sum(f.key not in by_key for f in saved.cells if not (f.in_inputs and same))
               + sum(e.global_batch not in by_batch for e in saved.epochs_by_batch if not e.in_inputs))
    return Scorecard(tuple(rows), tuple(summarise(rows)), missing, not_predicted)


def summarise(rows: Sequence[Row]) -> list[AxisScore]:
    """One AxisScore per axis present, in AXIS_ORDER (a row counts in each of its axes)."""
    out = []
    for axis in sorted({a for r in rows for a in r.axes}, key=_axis_rank):
        mine = [r for r in rows if axis in r.axes]
        errors = [abs(e) for r in mine if (e := r.error_pct) is not None]
        widths = [w for r in mine if (w := r.width) is not None]
        judged = [r for r in mine if r.what in (CONVERGENCE, LATE) or (r.low is not None and r.high is not None)]
        names = sorted({k for r in mine for k in r.baselines})
        baselines = {}
        for name in names:
            theirs = [abs(e) for r in mine if (e := r.baseline_error_pct(name)) is not None]
            if theirs:
                baselines[name] = (statistics.median(theirs), max(theirs))
        out.append(AxisScore(axis, len(mine), statistics.median(errors) if errors else None,
                             max(errors) if errors else None, sum(r.inside for r in judged), len(judged),
                             statistics.median(widths) if widths else None, baselines,
                             sum(r.predicted is None for r in mine)))
    return out


def _axis_rank(axis: str) -> tuple[int, str]:
    return (AXIS_ORDER.index(axis) if axis in AXIS_ORDER else len(AXIS_ORDER), axis)


@dataclass(frozen=True, slots=True)
class FolderFacts:
    """What a later results folder says of what it measured, for matching it with a saved prediction."""

    path: str
    workload: str
    params: JsonMapping
    precision: str
    cpu: str
    node_groups: tuple[NodeShape, ...]


def mismatches(saved: SavedPrediction, folder: FolderFacts) -> list[str]:
    """Every way the folder measured something other than what the prediction predicted (empty: it matches):
    the workload, its parameters, the precision, the machine (the node shape; on the measured machine itself,
    its CPU too). Nothing is matched silently.

    >>> from orchestrator.core.predict.saved import Machine, Provenance, Subject
    >>> node = NodeShape(count=1, sockets=1, cores_per_socket=2, threads_per_core=1, memory_gib=23.5, cpu="EPYC")
    >>> saved = SavedPrediction(provenance=Provenance(orch_version="0", made_at="now"), inputs=(),
    ...     subject=Subject(workload="classifier", params={"hidden": 1024}, precision="fp32", source_precision="fp32",
    ...                     source_cpu="EPYC"),
    ...     target_machine=Machine(words="", same_machine=True, node_groups=(node,), node_counts=(1,),
    ...                            local_batches=(16,)))
    >>> for m in mismatches(saved, FolderFacts("r", "classifier", {"hidden": 512}, "bf16", "Xeon", (node,))):
    ...     print(m)
    workload parameters differ: hidden: predicted 1024, measured 512
    precision: predicted fp32, measured bf16
    CPU: the prediction is for the machine it was measured on (EPYC), the folder ran on Xeon
    """
    out = []
    subject = saved.subject
    if folder.workload != subject.workload:
        out.append(f"workload: predicted {subject.workload}, measured {folder.workload}")
    else:
        diff = [f"{k}: predicted {_shown(a)}, measured {_shown(b)}" for k, a, b in differing(subject.params,
                                                                                                 folder.params)]
        if diff:
            out.append("workload parameters differ: " + "; ".join(diff))
    if folder.precision != subject.precision:
        out.append(f"precision: predicted {subject.precision}, measured {folder.precision}")
    target = saved.target_machine
    wanted = {g.shape for g in target.node_groups}
    have = {g.shape for g in folder.node_groups}
    if not have <= wanted:
        out.append(f"machine: the prediction's nodes are {_shapes(wanted)}, the folder's {_shapes(have)}")
    if target.same_machine and folder.cpu != subject.source_cpu:
        out.append(f"CPU: the prediction is for the machine it was measured on ({subject.source_cpu}), the folder "
                   f"ran on {folder.cpu}")
    return out


def _shown(value: object) -> str:
    return "(not set)" if value is None else str(value)


def _shapes(shapes: set[tuple[int, int, int]]) -> str:
    return " or ".join(f"{s} socket(s) × {c} cores × {t} thread(s)" for s, c, t in sorted(shapes))


def measured_cells(records: Iterable[Record]) -> list[MeasuredCell]:
    """Every ok throughput cell of a folder, keyed as the saved cells are."""
    return [MeasuredCell((c.layout.ranks, c.layout.threads, c.layout.local_batch, c.layout.nodes), c.samples_per_s,
                         c.cv) for c in cells_from_records(records)]


def measured_batches(records: Iterable[Record]) -> list[MeasuredBatch]:
    """Every global batch's convergence runs: seeds run and converged, and the olympic mean."""
    return [MeasuredBatch(b.global_batch, len(b.runs), b.converged, b.mean_epochs)
            for b in convergence_by_batch(records) if b.runs]


@dataclass(frozen=True, slots=True)
class ScoreReport:
    """A saved prediction scored: the prediction, the folders it was scored against, and the scorecard."""

    prediction_path: str
    saved: SavedPrediction
    folders: tuple[str, ...]
    changed_inputs: tuple[str, ...]       # input files whose bytes differ from what the prediction hashed
    card: Scorecard
