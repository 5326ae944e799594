"""One cell's prediction with its interval, from the records so far: the function the planner calls for every
layout of a target, the validation calls for every held-out cell, and an adaptive sweep can call for any
candidate cell. Pure.

    basis = basis_of(cells, links, buckets, thread_prior, gemm)        # fits: once per set of records
    p = predict_cell(basis, Layout(1, 2, 16))                          # arithmetic: any number of cells
    p.value, p.low, p.high, p.low_why, p.high_why

(`fit.basis_from_records(records)` builds the basis from records.) Two ways to an interval:

- **Held-out errors** (`bands`), where every axis the cell lies beyond has a held-out level: the matching
  scheme's max error times the distance, plus twice the bootstrap spread (orch's model), never below the
  cells' noise; beyond the data a baseline's interval also reaches orch's model's value; the high end capped at
  linear scaling.
- **Bounds**, where an axis has one measured level (no held-out error exists for it). From an anchor, the
  measured cell with the most cores that the layout contains (no more ranks, threads or nodes), at the
  layout's local batch:
  - high end: linear scaling from the anchor (efficiency ≤ 1, physics);
  - low end: the lowest efficiency the evidence allows (`evidence`: the worst measured step efficiency per
    doubling of the cores, on any axis, compounded over the doublings; the GEMM peak's efficiency on these
    cores times the lowest step ÷ GEMM ratio measured), plus the communication the layout adds over the
    anchor, as calibrated (ρ as fitted), with no overlap;
  - a local batch outside the measured one (one measured batch) assumes the per-sample time neither grows
    with the batch nor falls faster than the fixed part allows (throughput between the anchor's and linear
    in the batch).
  Both widen with the distance from the data. The central estimate is the predictor that validated best
  one level out on the committed folders, the GEMM proxy (`predictors.gemm_proxy`; Amdahl's law where a GEMM peak
  is missing), held inside the bounds.

Every prediction says which bound or error set each end (`low_why`, `high_why`):

>>> from orchestrator.core.predict.step import Cell, Layout
>>> cells = ([Cell(Layout(1, 1, b), b / (0.01 + 0.002 * b)) for b in (8, 16, 32)]
...          + [Cell(Layout(1, 2, b), b / (0.006 + 0.0012 * b)) for b in (8, 16, 32)])
>>> p = predict_cell(basis_of(cells, {}, [], None, {}), Layout(1, 4, 16))
>>> p.low < p.value <= p.high, p.high_why
(True, 'high end: linear scaling from 1 rank (efficiency ≤ 1)')
>>> two = predict_cell(basis_of(cells, {}, [], None, {}), Layout(2, 1, 16))   # nothing here bounds 2 ranks' all-reduce
>>> two.low < two.value <= two.high, "nor multi-rank cell here bounds" in two.low_why
(True, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from orchestrator.core.predict.bands import NODES as NODES_AXIS
from orchestrator.core.predict.bands import RANKS as RANKS_AXIS
from orchestrator.core.predict.bands import (
    Axis,
    Choice,
    ErrorBands,
    choose,
    extrapolation_axes,
    needed,
    reach_note,
)
from orchestrator.core.predict.comm import NODES, LinkFit, Sample, stand_in_direction
from orchestrator.core.predict.evidence import PRIOR_SOURCE, SAME_CORES_AXIS_SPAN, Evidence, evidence_of
from orchestrator.core.predict.machine import SAME_MACHINE, MachineWhatIf
from orchestrator.core.predict.network import NodeLinkCost, held_out_error, node_link_cost
from orchestrator.core.predict.overlap import exposed_s
from orchestrator.core.predict.predictors import Training, label, validated
from orchestrator.core.predict.predictors.amdahl import AMDAHL
from orchestrator.core.predict.predictors.gemm_proxy import GEMM_PROXY
from orchestrator.core.predict.predictors.gemm_proxy import PREDICTOR as GEMM_PROXY_PREDICTOR
from orchestrator.core.predict.predictors.step_model import MODEL
from orchestrator.core.predict.sharing import SharingReading, widened
from orchestrator.core.predict.step import Cell, Layout, StepModel, combine, fit_step_model
from orchestrator.core.predict.uncertainty import BOOTSTRAP_RESAMPLES, bootstrap_models, log_spread
from orchestrator.core.predict.validate import (
    ALL_BUT_ONE,
    CELL_AXIS,
    INSIDE,
    Printed,
    Printer,
    SchemeResult,
    scored,
    validate_step,
)

# An uncalibrated link class is costed with a calibrated stand-in; the interval assumes the real link's
# all-reduce within this factor of the stand-in's (an assumption, said in the row's note, not a measurement).
LINK_STAND_IN_SPAN = 4.0
GAUSS_95 = 1.96       # the bootstrap spread is one standard deviation; the band is held-out error + 2 sd
# The backward pass's share of a step's compute: twice the forward's FLOPs (a layer's gradient with respect to its
# input and to its weights are each one forward's worth; Kaplan et al. 2020 count 2N forward, 4N backward).
BACKWARD_SHARE = 2 / 3


class Bootstrap:
    """The residual bootstrap of a fit, refitted on first use only (a prediction by a baseline needs none)."""

    def __init__(self, cells: Sequence[Cell], model: StepModel, links: Mapping[str, LinkFit],
                 buckets: Sequence[int], thread_prior: Mapping[int, float] | None,
                 resamples: int = BOOTSTRAP_RESAMPLES):
        self._args = (tuple(cells), model, links, tuple(buckets), thread_prior, resamples)
        self._models: tuple[StepModel, ...] | None = None

    def models(self) -> tuple[StepModel, ...]:
        if self._models is None:
            cells, model, links, buckets, prior, resamples = self._args
            self._models = bootstrap_models(cells, model, links, buckets, prior, resamples)
        return self._models

    @property
    def computed(self) -> bool:
        return self._models is not None


@dataclass(frozen=True)
class Basis:
    """What a cell's prediction rests on: the cells, the model fitted to them, its held-out errors, the
    bootstrap of its fit, the scaling evidence, every scored predictor fitted to the cells, by id, and the other
    reading of socket sharing where the cells cannot identify it (`sharing`)."""

    cells: tuple[Cell, ...]
    model: StepModel
    bands: ErrorBands
    evidence: Evidence
    boot: Bootstrap
    predictors: Mapping[str, Callable[[Layout], float]]      # id -> samples/s of a layout (predictors.FromCells)
    sharing: SharingReading
    validation: tuple[SchemeResult, ...] = field(default=())
    link_held_out: float | None = None    # the cross-node calibration's held-out log error (network.held_out_error)
    bucket_ready: tuple[float, ...] = ()  # each DDP bucket's ready time over the last's, measured (overlap.py)


@dataclass(frozen=True, slots=True)
class CellPrediction:
    """samples/s of a layout, its interval (None, None with the reason in `no_interval`), the predictor's id
    (`predictors.label` prints it), the axes it lies beyond, its notes and what set each end of the interval."""

    value: float
    low: float | None
    high: float | None
    predictor: str
    extrapolated: tuple[str, ...]
    notes: tuple[str, ...]
    no_interval: str
    low_why: str = ""
    high_why: str = ""

    @property
    def printed(self) -> Printed:
        return Printed(self.value, self.low, self.high, self.predictor, self.no_interval)


def basis_of(cells: Sequence[Cell], links: Mapping[str, LinkFit], buckets: Sequence[int],
             thread_prior: Mapping[int, float] | None, gemm: Mapping[tuple[int, int], float], *,
             model: StepModel | None = None, validation: Sequence[SchemeResult] | None = None,
             resamples: int = BOOTSTRAP_RESAMPLES, samples: Sequence[Sample] = (),
             bucket_ready: Sequence[float] = ()) -> Basis:
    """Fit a basis to `cells` (`model` and `validation` when already fitted): the step model (3 starts), every
    held-out scheme, the evidence, the cross-node calibration's held-out error (from its `samples`), when DDP's
    buckets became ready (`bucket_ready`, measured on one node: `data.bucket_ready_shares`); the bootstrap waits for
    its first use."""
    cells = tuple(cells)
    model = model or fit_step_model(cells, links, buckets, thread_prior, starts=3)
    if validation is None:
        validation = validate_step(cells, links, buckets, thread_prior)
    fitted = {p.id: p.fit(Training(cells, model)) for p in validated()}
    return Basis(cells, model, ErrorBands.from_validation(validation, cells), evidence_of(cells, gemm),
                 Bootstrap(cells, model, links, buckets, thread_prior, resamples=resamples), fitted,
                 SharingReading(cells, model, links, buckets, thread_prior),
                 tuple(validation), held_out_error(samples) if NODES in links else None, tuple(bucket_ready))


def value_of(basis: Basis, predictor: str, lay: Layout, model: StepModel | None = None) -> float:
    """samples/s of `lay` by one predictor; a baseline on another CPU (a CPU what-if in `model`) changes as the
    model's own prediction does (its compute scaled, its all-reduce not)."""
    model = model or basis.model
    if predictor == MODEL:      # a CPU what-if is the step model's own compute scale: its prediction, not a ratio
        return model.samples_per_s(lay)
    return basis.predictors[predictor](lay) * _what_if(model, lay)


def _what_if(model: StepModel, lay: Layout) -> float:
    """samples/s on the target CPU over samples/s on the measured one, as the model sees it."""
    if model.compute_scale == 1.0:
        return 1.0
    return model.samples_per_s(lay) / replace(model, compute_scale=1.0).samples_per_s(lay)


def predict_cell(basis: Basis, lay: Layout, machine: MachineWhatIf = SAME_MACHINE) -> CellPrediction:
    """samples/s of any layout with its interval: held-out errors where every axis it lies beyond has one,
    else bounds from physics and the evidence (the module's docstring says how)."""
    if lay.threads_per_core > 1:
        return _with_siblings(basis, lay, machine)
    model = replace(basis.model, compute_scale=machine.compute_scale)
    axes = extrapolation_axes(lay, basis.cells)
    cost = _node_link(basis, lay, axes, machine)
    if cost is not None and (over := _over_link(basis, lay, axes, machine, cost)) is not None:
        return over
    choice = choose(basis.bands, axes)
    if choice.predictor != MODEL and not _has_base(basis.cells, lay.local_batch):
        # the baselines scale the 1-rank cell at the nearest measured batch: at a batch it was not measured at,
        # they would take samples/s as independent of the batch (held-out errors of other cells do not say so)
        choice = choose(basis.bands, axes, (MODEL,))
    if choice.width_log is None:
        bounded = _bounded(basis, basis.model, lay, axes, choice)      # on the measured CPU, then scaled
        ratio = _what_if(model, lay)
        predicted = replace(bounded, value=bounded.value * ratio,
                            low=None if bounded.low is None else bounded.low * ratio,
                            high=None if bounded.high is None else bounded.high * ratio)
    else:
        predicted = _banded(basis, model, lay, axes, choice)
    if predicted.low is None or predicted.high is None:
        return predicted
    low, high, why = _other_ends(model, lay, predicted.value, predicted.low, predicted.high, machine)
    spanned: tuple[str, ...] = ()
    if (other := basis.sharing.other()) is not None and lay.ranks > 1:
        low, high, shared_why = widened(model, other, lay, low, high)
        why = (shared_why[0] or why[0], shared_why[1] or why[1])
        spanned = ("socket sharing not identified: the interval spans the all-reduce's reading (ρ) and the "
                   "socket's (μ)",) if any(shared_why) else ()
    notes = predicted.notes + ((machine.note,) if machine.note else ()) + spanned
    return replace(predicted, low=low, high=high, notes=tuple(dict.fromkeys(notes)),
                   low_why=why[0] or predicted.low_why, high_why=why[1] or predicted.high_why)


def _with_siblings(basis: Basis, lay: Layout, machine: MachineWhatIf) -> CellPrediction:
    """A rank whose threads include its cores' SMT siblings: a second hardware thread on a busy core gives a GEMM-bound
    rank little (they share its vector units), so the central value and the low end count its physical cores
    only; the high end counts every hardware thread as a core (what the measured cells, one thread per core, would
    say). Nothing measured here places it between the two: the row says so."""
    per_core = lay.threads_per_core
    cores = replace(lay, threads=max(1, -(-lay.threads // per_core)), threads_per_core=1)
    as_cores = replace(lay, threads_per_core=1)
    p, q = predict_cell(basis, cores, machine), predict_cell(basis, as_cores, machine)
    high = max(x for x in (p.high, q.high, q.value, p.value) if x is not None)
    note = (f"{lay.threads} threads per rank on {cores.threads} cores ({per_core} hardware threads each): the central "
            f"value counts the cores only, the high end every hardware thread as a core; no cell measured SMT")
    return replace(p, high=high, notes=tuple(dict.fromkeys((*p.notes, note))),
                   high_why="high end: every hardware thread counted as a core (SMT siblings unmeasured)")


def _node_link(basis: Basis, lay: Layout, axes: Sequence[Axis], machine: MachineWhatIf) -> NodeLinkCost | None:
    """The node link's cost for a layout whose ring crosses nodes beyond any measured cell (no multi-node cell: the
    node axis has no held-out level), from the cross-node calibration or the target's statement; None otherwise."""
    if lay.ranks <= 1 or lay.link != NODES or not any(a.name == NODES_AXIS for a in axes):
        return None
    if any(c.layout.nodes > 1 for c in basis.cells) or not basis.model.buckets:
        return None
    return node_link_cost(basis.model.links, basis.link_held_out, machine.node_link)


def _over_link(basis: Basis, lay: Layout, axes: Sequence[Axis], machine: MachineWhatIf,
               cost: NodeLinkCost) -> CellPrediction | None:
    """A layout across nodes as a rank's compute plus the all-reduce over the node link. DDP all-reduces each bucket
    once it is ready, behind the rest of the backward pass, and a rank waiting on the wire leaves its cores to it:
    where a multi-rank cell measured when its buckets became ready (`Basis.bucket_ready`), each bucket is placed so
    in time over the link (`overlap.exposed_s`: the central value at the link's centre, the high end at its fast
    end), on separate hosts and on nodes that are namespaces of one machine alike; on the latter, whose ranks hold
    every core of their node, Gloo's own work on a bucket is taken from the compute centrally, and only the wait on
    the wire hides (hiding all of it was 11-20% fast on the ledger's 2.5-5 Gbit/s cases). Without readiness, on
    one machine the two combine as the one-node multi-rank cells combined them, by the step model's overlap norm γ
    (the plain sum where the cells did not place it); on separate hosts all but the last bucket may hide
    (`_overlap`), and the central value hides half of that, the high end all of it. The low end hides none (Gloo's
    thread may take the cores the backward pass needs). On the ledger's emulated cases the plain sum came out 14-34%
    slow. A rank's compute is that of the ranks sharing its socket (`one`: as many ranks of as many threads on one
    socket, no all-reduce), or, on one machine, of all the layout's ranks on one node (they share its caches and
    memory bandwidth), predicted with its interval as a 1-node sweep measured or bounds it."""
    shared = machine.node_link is not None and machine.node_link.shared_host
    k = lay.ranks if shared else lay.ranks_per_socket
    one = Layout(k, lay.threads, lay.local_batch, 1, k, None)
    p1 = predict_cell(basis, one, machine)
    if p1.low is None or p1.high is None:
        return None
    v, gb, buckets = basis.model.values, lay.global_batch, basis.model.buckets
    compute_lo, compute, compute_hi = (one.global_batch / x for x in (p1.high, p1.value, p1.low))
    ring_lo, ring_hi = cost.bounds_s(lay.ranks, buckets, v.rho)
    ring = cost.in_step_s(lay.ranks, buckets, v.rho)
    ready = basis.bucket_ready if len(basis.bucket_ready) == len(buckets) else ()
    gamma = _shared_gamma(basis.model) if shared and not ready else None     # one chip, readiness not measured
    hidden, hidden_lo = _hidden(cost, lay.ranks, buckets, ready, gamma, (compute, ring), (compute_lo, ring_lo),
                                shared)
    value = gb / (compute + ring - hidden)
    low, high = gb / (compute_hi + ring_hi), gb / (compute_lo + ring_lo - hidden_lo)
    overlap = (f", combined as the one-node cells combined compute and all-reduce (γ = {gamma:.2f})"
               if gamma is not None else
               f", up to {hidden_lo * 1e3:,.1f} ms of it hidden behind the backward pass ("
               + (f"DDP's buckets as they became ready on one node, the first at {ready[0]:.0%} of the last)" if ready
                  else "DDP's buckets but the last)"))
    high_why = (f"high end: a rank's compute ({one.label}: {p1.high_why.removeprefix('high end: ')}) plus the "
                f"all-reduce across nodes, {ring_lo * 1e3:,.1f} ms at the link's fast end{overlap}")
    low_why = (f"low end: a rank's compute ({one.label}: {p1.low_why.removeprefix('low end: ')}) plus the all-reduce "
               f"across nodes, {ring_hi * 1e3:,.1f} ms at the link's slow end, none of it hidden")
    where = "all the layout's ranks on one host (the nodes are emulated on it)" if shared else "its socket"
    how = _how_hidden(bool(ready), gamma, shared and cost.software is not None)
    notes = (*(a.proxy for a in axes if a.proxy and a.name != NODES_AXIS), cost.note,
             f"across nodes: a rank's compute from {one.label} ({label(p1.predictor)}, no all-reduce; {where}) plus "
             f"the all-reduce over the node link, {how}", *p1.notes)
    # more ranks than measured is more ranks in the ring (its α-β model carries them), more nodes the link
    extrap = tuple(dict.fromkeys((*p1.extrapolated, *(a.words for a in axes if a.name in (RANKS_AXIS, NODES_AXIS)))))
    return _held_inside(CellPrediction(value, low, high, p1.predictor, extrap, tuple(dict.fromkeys(notes)), "",
                                       low_why, high_why), basis.bands.noise_log)


def _how_hidden(ready: bool, gamma: float | None, gloo_has_no_core: bool) -> str:
    """A row's words for how much of its all-reduce across nodes hides behind the compute (`_hidden`)."""
    if ready:
        gloo_work = ("; Gloo's own work on each bucket (its ring at the in-node calibration's speed) taken from the "
                     "compute, since an emulated node has no core for it: only the wait on the wire hides"
                     if gloo_has_no_core else "")
        return ("each bucket all-reduced from when it became ready in a step measured on one node, in turn, behind "
                f"the rest of the compute (none hidden at the low end){gloo_work}")
    if gamma is not None:
        return (f"combined as the one-node multi-rank cells combined compute and all-reduce, their fitted overlap "
                f"norm γ = {gamma:.2f} (1, the plain sum, where the cells did not place γ: not fitted, or γ or ρ at a "
                "bound), the nodes sharing one host's cores as those ranks did; no multi-rank cell measured when its "
                "buckets became ready")
    return (f"half of what DDP could hide behind the backward pass (the backward is {BACKWARD_SHARE:.0%} of the "
            "compute; all of it at the high end, none at the low): no multi-rank cell measured when its buckets "
            "became ready")


def _hidden_s(fit: LinkFit, ranks: int, buckets: Sequence[int], ready: Sequence[float], compute_s: float,
              software: LinkFit | None = None) -> float:
    """The all-reduce over `fit` hidden behind a step's compute, each bucket from when it became ready
    (`overlap.exposed_s`). With `software` (the rank's threads hold every core of its node), Gloo's own work on a
    bucket, its in-node cost, takes those cores from the compute while the compute runs: only the rest of the
    bucket, the wait on the wire, hides."""
    wire = [fit.allreduce_s(ranks, b) for b in buckets]
    cpu = [min(software.allreduce_s(ranks, b), w) for b, w in zip(buckets, wire, strict=True)] if software else []
    return max(0.0, sum(wire) - exposed_s(compute_s, ready, wire, cpu))


def _hidden(cost: NodeLinkCost, ranks: int, buckets: Sequence[int], ready: Sequence[float], gamma: float | None,
            central: tuple[float, float], fast: tuple[float, float], shared: bool) -> tuple[float, float]:
    """The all-reduce a step hides behind its compute, centrally and at the fast ends ((compute, ring) each): each
    bucket from when it became ready on one node (`ready`, `overlap`; the CPU's extra (ρ − 1) share never hides);
    without readiness, on one chip (`gamma`) as the one-node cells combined them, their γ-norm (`step.combine`),
    and on separate hosts all but the last bucket within the backward pass, half of it centrally."""
    (compute, ring), (compute_lo, ring_lo) = central, fast
    if gamma is not None:
        return (compute + ring - combine(compute, ring, gamma),
                compute_lo + ring_lo - combine(compute_lo, ring_lo, gamma))
    if ready:
        return (_hidden_s(cost.fit, ranks, buckets, ready, compute, cost.software if shared else None),
                _hidden_s(cost.fast_fit, ranks, buckets, ready, compute_lo))
    last, last_lo = cost.fit.allreduce_s(ranks, buckets[-1]), cost.fast_fit.allreduce_s(ranks, buckets[-1])
    return 0.5 * _overlap(cost.ring_s(ranks, buckets), last, compute), _overlap(ring_lo, last_lo, compute_lo)


def _shared_gamma(model: StepModel) -> float:
    """The overlap norm nodes emulated on one host take from the one-node fit: its γ where the cells placed it; 1 (the
    plain sum) where γ was not fitted or γ or ρ, which trade off against each other, ended at a bound."""
    if "gamma" in model.frozen or {"gamma", "rho"} & set(model.at_bound()):
        return 1.0
    return model.values.gamma


def _overlap(ring_s: float, last_bucket_s: float, compute_s: float) -> float:
    """The most of a step's all-reduce DDP can hide: every bucket but the last, within the backward pass."""
    return max(0.0, min(ring_s - last_bucket_s, BACKWARD_SHARE * compute_s))


def _has_base(cells: Sequence[Cell], local_batch: int) -> bool:
    """The baselines' base cell (1 rank, fewest threads) was measured at this local batch."""
    singles = [c.layout for c in cells if c.layout.ranks == 1]
    fewest = min((s.threads for s in singles), default=0)
    return any(s.threads == fewest and s.local_batch == local_batch for s in singles)


def _linear_cap(basis: Basis, model: StepModel, predictor: str, lay: Layout) -> float:
    """Linear scaling from the 1-rank, fewest-threads layout at the same batch, by the same predictor."""
    base = Layout(1, min(c.layout.threads for c in basis.cells), lay.local_batch)
    if lay == base or lay.cores <= base.cores:
        return math.inf
    return value_of(basis, predictor, base, model) * lay.cores / base.cores


def _banded(basis: Basis, model: StepModel, lay: Layout, axes: Sequence[Axis], choice: Choice) -> CellPrediction:
    """The interval from held-out errors (bands.choose), the bootstrap (orch's model) and the cells' noise."""
    value = value_of(basis, choice.predictor, lay, model)
    notes = [a.proxy for a in axes if a.proxy] + ([choice.why] if choice.why else []) + list(_notes(model, lay))
    if reach := reach_note(basis.bands, axes):
        notes.append(reach)
    cap = _linear_cap(basis, model, choice.predictor, lay)
    if value > cap:
        value = cap
        notes.append("capped at linear scaling from 1 rank (efficiency ≤ 1)")
    extrap = tuple(a.words for a in axes)
    # the fit's bootstrap spread beyond the data only: inside it, the leave-one-cell-out error already comes
    # from refits without the cell, the fit's own variability included
    spread = GAUSS_95 * log_spread(basis.boot.models(), lay) if choice.predictor == MODEL and axes else 0.0
    width = max(float(choice.width_log or 0.0) + spread, basis.bands.noise_log)
    if width <= 0:
        return CellPrediction(value, None, None, choice.predictor, extrap, tuple(dict.fromkeys(notes)),
                              "no interval: the held-out errors and the cells' noise are all zero (exact data?)")
    source = f"the held-out error of {', '.join(choice.schemes)}" + (" and the fit's bootstrap" if spread else "")
    if width == basis.bands.noise_log:
        source = "the cells' repeat noise"
    low, high = value * math.exp(-width), value * math.exp(width)
    low_why, high_why = source, source
    if choice.predictor != MODEL and axes:
        # A baseline won one level out, which says little of how it extrapolates further; orch's model carries the
        # layout's structure (its all-reduce, its socket), so the interval reaches it too.
        own = min(value_of(basis, MODEL, lay, model), cap)
        if own < low:
            low, low_why = own, f"{label(MODEL)}'s value, {label(choice.predictor)} predicting beyond the data"
        elif own > high:
            high, high_why = own, f"{label(MODEL)}'s value, {label(choice.predictor)} predicting beyond the data"
    if high > cap:
        high, high_why = cap, "linear scaling from 1 rank (efficiency ≤ 1)"
    return CellPrediction(value, low, high, choice.predictor, extrap, tuple(dict.fromkeys(notes)), "",
                          f"low end: {low_why}", f"high end: {high_why}")


UP, DOWN, ACROSS = "up", "down", "across"
AT_BOUND_WORDS = {"rho": "ρ (the all-reduce's cost in a step ÷ alone)",
                  "mu": "μ (the slowdown per rank sharing a socket)",
                  "sigma": "σ (the serial share of the per-sample work)", "kappa": "κ (the threads' contention)",
                  "gamma": "γ (how compute and all-reduce combine)"}


def _anchor(cells: Sequence[Cell], lay: Layout) -> tuple[Layout, str]:
    """The measured shape (ranks, threads, nodes) to scale from: the one with the most cores that `lay`
    contains (no more ranks, threads or nodes: UP); else the smallest containing `lay` (DOWN); else the one
    nearest in cores (ACROSS: the same cores split another way, say)."""
    shapes = list({(c.layout.ranks, c.layout.threads, c.layout.nodes): c.layout for c in cells}.values())
    at_batch = {(c.layout.ranks, c.layout.threads, c.layout.nodes) for c in cells
                if c.layout.local_batch == lay.local_batch}

    def closeness(c: Layout) -> tuple[bool, float, int, int, int]:
        """A shape measured at the layout's batch first, then the nearest in cores."""
        return ((c.ranks, c.threads, c.nodes) not in at_batch, abs(math.log2(c.cores / lay.cores)),
                c.ranks_per_socket, -c.ranks, c.threads)

    inside = [s for s in shapes if s.ranks <= lay.ranks and s.threads <= lay.threads and s.nodes <= lay.nodes]
    if inside:
        return min(inside, key=closeness), UP
    around = [s for s in shapes if s.ranks >= lay.ranks and s.threads >= lay.threads and s.nodes >= lay.nodes]
    if around:
        return min(around, key=closeness), DOWN
    return min(shapes, key=closeness), ACROSS


def _at_batch(basis: Basis, model: StepModel, shape: Layout, batch: int) -> tuple[float, float, float, str]:
    """(low, central, high) samples/s of a measured shape at `batch`, and how: the measured cell ± its noise,
    the held-out errors along the batch, or (one measured batch) between no gain and linear gain in the batch."""
    lay = replace(shape, local_batch=batch)
    measured = [c for c in basis.cells if c.layout == lay]
    if measured:
        noise = max(measured[0].cv, math.expm1(basis.bands.noise_log))
        v = measured[0].samples_per_s
        return v / (1 + noise), v, v * (1 + noise), f"{lay.label} measured"
    axes = extrapolation_axes(lay, basis.cells)
    choice = choose(basis.bands, axes)
    if choice.width_log is not None:
        p = _banded(basis, model, lay, axes, choice)
        if p.low is not None and p.high is not None:
            return p.low, p.value, p.high, f"{lay.label} from the held-out errors along the local batch"
    same = [c for c in basis.cells if c.layout.ranks == shape.ranks and c.layout.threads == shape.threads
            and c.layout.nodes == shape.nodes]
    near = min(same, key=lambda c: (abs(math.log2(c.layout.local_batch / batch)), c.layout.local_batch))
    v = near.samples_per_s
    low, high = v * min(1.0, batch / near.layout.local_batch), v * max(1.0, batch / near.layout.local_batch)
    return low, math.sqrt(low * high), high, (
        f"{lay.label} from {near.layout.label} (throughput assumed between no gain and linear gain in the batch)")


def _ratio_bounds(evidence: Evidence, lay: Layout, anchor: Layout, how: str,
                  comm_unbounded: bool) -> tuple[float, float, str, str]:
    """Bounds on lay's efficiency over the anchor's (both over one core), and what set each: physics (no
    more than linear scaling) on one side, the evidence (`Evidence.low_efficiency`) on the other."""
    if how == UP:
        low, why = evidence.low_efficiency(lay, anchor, comm_unbounded=comm_unbounded)
        return low, 1.0, why, f"linear scaling from {anchor.label} (efficiency ≤ 1)"
    if how == DOWN:
        low, why = evidence.low_efficiency(anchor, lay, comm_unbounded=comm_unbounded)
        return 1.0, 1 / low, f"linear scaling down from {anchor.label} (efficiency ≤ 1)", f"{why}, down from it"
    one = Layout(1, 1, lay.local_batch)
    e_lay, why_lay = evidence.low_efficiency(lay, one, comm_unbounded=comm_unbounded)
    e_anchor, why_anchor = evidence.low_efficiency(anchor, one, comm_unbounded=comm_unbounded)
    return (e_lay, 1 / e_anchor, f"{why_lay}, against {anchor.label} at full efficiency",
            f"{why_anchor} on {anchor.label}, against {lay.label} at full efficiency")


def _central(basis: Basis, model: StepModel, lay: Layout, anchor: Layout, a_mid: float) -> tuple[str, float, str]:
    """The central estimate where an axis has one measured level: the predictor's id, samples/s and how. The GEMM
    proxy (`predictors.gemm_proxy`) from the anchor; Amdahl's law where a GEMM peak is missing."""
    scaled = GEMM_PROXY_PREDICTOR.scale(basis.evidence, model, lay, anchor, a_mid)
    if scaled is None:
        why = " (no GEMM peak of this layout to scale by)"
        unmeasured = basis.evidence.unmeasured_axes(lay, anchor) if basis.evidence.measured else ()
        if unmeasured:
            lo, hi = SAME_CORES_AXIS_SPAN
            axis = unmeasured[0]
            why += (f"; no cell grows the {axis}, so it carries the other axis's scaling over, which does not predict "
                    f"it: on the same two cores a thread's speed-up was {lo:g}-{hi:g}× a rank's over the ledger's "
                    f"models (docs/prediction.md); one measured layout with more {axis} settles it")
        return AMDAHL, value_of(basis, AMDAHL, lay, model), why
    value, why = scaled
    return GEMM_PROXY, value, why


def _bounded(basis: Basis, model: StepModel, lay: Layout, axes: Sequence[Axis], choice: Choice) -> CellPrediction:
    """The interval from physics and the evidence, where an axis of the layout has one measured level."""
    extrap = tuple(a.words for a in axes)
    notes = [a.proxy for a in axes if a.proxy] + list(_notes(model, lay))
    shape, how = _anchor(basis.cells, lay)
    anchor = replace(shape, local_batch=lay.local_batch)
    a_low, a_mid, a_high, a_how = _at_batch(basis, model, shape, lay.local_batch)
    predictor, value, central_why = _central(basis, model, lay, anchor, a_mid)
    adds_comm = model.comm(lay)[0] > model.comm(anchor)[0] or (lay.ranks > anchor.ranks and lay.link is not None)
    # More ranks than any cell with nothing here to bound their all-reduce: the low end is a stated prior.
    comm_unbounded = lay.ranks > anchor.ranks and not basis.evidence.multi_rank and model.comm(lay)[0] <= 0
    r_low, r_high, low_why, high_why = _ratio_bounds(basis.evidence, lay, anchor, how, comm_unbounded)
    n = lay.cores / anchor.cores
    low, high = a_low * n * r_low, a_high * n * r_high
    low, comm_why = _with_comm(model, lay, anchor, low) if adds_comm else (low, "")
    notes.append(f"bounded ({choice.why}); central estimate by {label(predictor)}{central_why}")
    if not basis.evidence.measured:
        notes.append(f"the scaling evidence is {PRIOR_SOURCE}")
    return _held_inside(CellPrediction(value, low, high, predictor, extrap, tuple(dict.fromkeys(notes)), "",
                                       f"low end: {low_why}, from {a_how}{comm_why}",
                                       f"high end: {high_why}, from {a_how}"), basis.bands.noise_log)


def _with_comm(model: StepModel, lay: Layout, anchor: Layout, low: float) -> tuple[float, str]:
    """The low end slowed by the communication `lay` adds over the anchor (as calibrated × ρ, no overlap)."""
    extra = model.comm(lay)[0] - model.comm(anchor)[0]
    if extra <= 0 or low <= 0:
        return low, ""
    slower = lay.global_batch / (lay.global_batch / low + extra)
    how = f"ρ = {model.values.rho:.2f} as fitted" if "rho" not in model.frozen else "as calibrated, ρ = 1"
    return slower, f", with the all-reduce it adds ({extra * 1e3:.1f} ms per step, {how}) not overlapped"


def _held_inside(p: CellPrediction, noise_log: float) -> CellPrediction:
    """The central estimate inside its bounds, each end at least the cells' noise away from it."""
    assert p.low is not None and p.high is not None
    value = min(max(p.value, p.low), p.high)
    notes = p.notes if value == p.value else p.notes + (f"{label(p.predictor)} held inside the bounds",)
    floor = max(noise_log, 1e-6)
    low, high = min(p.low, value * math.exp(-floor)), max(p.high, value * math.exp(floor))
    return replace(p, value=value, low=low, high=high, notes=notes)


def _other_ends(model: StepModel, lay: Layout, value: float, low: float, high: float,
                machine: MachineWhatIf) -> tuple[float, float, tuple[str, str]]:
    """Widen for what the held-out errors and bounds do not cover: a stand-in link (the real one assumed
    within LINK_STAND_IN_SPAN of it) and a CPU what-if (the other end at the other scale)."""
    central = model.samples_per_s(lay)
    why = ["", ""]
    if lay.link is not None and lay.ranks > 1:
        direction = stand_in_direction(lay.link, model.links)
        if direction:
            rho = model.values.rho
            changed = replace(model, params={**model.params, "rho": rho * LINK_STAND_IN_SPAN ** direction})
            ratio = changed.samples_per_s(lay) / central
            end = 0 if ratio < 1 else 1
            low, high = (low * ratio, high) if ratio < 1 else (low, high * ratio)
            why[end] = (f"{'low' if end == 0 else 'high'} end: widened for the uncalibrated link, "
                        f"its all-reduce {LINK_STAND_IN_SPAN:g}× the stand-in's")
    if machine.other_end_scale != machine.compute_scale:
        ratio = replace(model, compute_scale=machine.other_end_scale).samples_per_s(lay) / central
        end = 0 if ratio < 1 else 1
        low, high = (low * ratio, high) if ratio < 1 else (low, high * ratio)
        why[end] = f"{'low' if end == 0 else 'high'} end: widened for the CPU what-if's other end"
    for scale in machine.spread or ():     # no figure of the target's: as slow or fast as any CPU orch measured
        ratio = replace(model, compute_scale=scale).samples_per_s(lay) / central
        end = 0 if ratio < 1 else 1
        low, high = (low * ratio, high) if ratio < 1 else (low, high * ratio)
        why[end] = (f"{'low' if end == 0 else 'high'} end: widened to the {'slowest' if end == 0 else 'fastest'} "
                    "per-core speed of the CPUs orch has measured (the target states none)")
    return low, high, (why[0], why[1])


def _notes(model: StepModel, lay: Layout) -> tuple[str, ...]:
    notes = []
    _, comm_note = model.comm(lay)
    if comm_note:
        span = (f"; interval assumes within {LINK_STAND_IN_SPAN:g}× of it" if lay.link is not None
                and stand_in_direction(lay.link, model.links) else "")
        notes.append(comm_note + span)
    # the parameters this layout exercises: a note on any other would not be about it
    exercised = {p for p, on in (("sigma", lay.threads > 1), ("kappa", lay.threads > 2),
                                 ("mu", lay.ranks_per_socket > 1), ("rho", lay.ranks > 1), ("gamma", lay.ranks > 1),
                                 ("a_s", True)) if on}
    notes += [why for p, why in model.frozen.items() if p in exercised]
    notes += [f"{AT_BOUND_WORDS.get(p, p)} fitted at its bound ({value:g}): the cells do not place it, and it may "
              "stand for what they cannot tell apart" + (" (the ranks sharing a socket's memory bandwidth, not the "
                                                        "all-reduce)" if p == "rho" else "")
              for p, value in model.at_bound().items() if p in exercised]
    return tuple(notes)


# Refits of the nested bootstrap, per held-out group of a validation with printed intervals: the spread's own
# error is about 1/√(2·8) ≈ 25% (24 refits per group would make `orch predict --validate` take seconds).
NESTED_BOOTSTRAP_RESAMPLES = 8


def printer(links: Mapping[str, LinkFit], buckets: Sequence[int], thread_prior: Mapping[int, float] | None,
            gemm: Mapping[tuple[int, int], float]) -> Printer:
    """What `orch predict` prints for held-out cells from the training cells alone (validate.Printer): a basis
    of the training cells, the scheme's own fit to them, and the held-out schemes those predictions need. A
    single held-out cell inside the data needs the training cells' leave-one-cell-out errors: those of the
    outer validation, without the held-out cell (the jackknife's residuals; refitting without each pair of
    cells would cost n² fits)."""

    def printed(train: Sequence[Cell], group: Sequence[Cell], model: StepModel,
                outer: Sequence[SchemeResult]) -> list[Printed]:
        keys = {k for c in group for k in needed(extrapolation_axes(c.layout, train))}
        reused = []
        loo = next((r for r in outer if r.key == (CELL_AXIS, INSIDE)), None)
        if (CELL_AXIS, INSIDE) in keys and loo is not None and len(group) == 1:
            reused.append(scored(loo, [h for h in loo.held_out if h.cell not in group]))
            keys.discard((CELL_AXIS, INSIDE))
        run = validate_step(train, links, buckets, thread_prior,
                            only=lambda s: s.key in keys and s.kind != ALL_BUT_ONE) if keys else []
        basis = basis_of(train, links, buckets, thread_prior, gemm, model=model, validation=[*reused, *run],
                         resamples=NESTED_BOOTSTRAP_RESAMPLES)
        return [predict_cell(basis, c.layout).printed for c in group]
    return printed
