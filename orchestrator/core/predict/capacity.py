"""Predicted time-to-train for every feasible layout of a target cluster, and the choices it implies.

For each node count, every layout (ranks × threads per rank × local batch) that the constraint engine and
placement accept (`orchestrator.core.plan.make_plan`, the code `orch plan` and `orch sweep` use) and that
really uses that many nodes gets:

    samples/s      from the step model, with an interval from the model's own held-out error
    epochs         from the epochs model at the layout's global batch (measured, interpolated,
                   extrapolated or not converged)
    hours          epochs × samples per epoch ÷ samples/s ÷ 3600
    node-hours     hours × nodes
    runs per day   how many trainings the whole target completes in a day: ⌊N ÷ nodes⌋ copies side by
                   side, each 24 ÷ hours a day (units of work per day, the benchmarking figure of merit)

Marks: the fastest layout per node count, the Pareto set of (hours, node-hours), and the recommendation
under a deadline (fewest node-hours that meet it) or a budget (fastest within it). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from orchestrator.core.grid import powers_of_two_up_to
from orchestrator.core.placement import Placement
from orchestrator.core.plan import make_plan
from orchestrator.core.predict.data import layout_on_sockets
from orchestrator.core.predict.epochs import NOT_CONVERGED, EpochsModel, EpochsPrediction
from orchestrator.core.predict.step import Cell, Layout, StepModel
from orchestrator.core.predict.validate import MODEL, SchemeResult
from orchestrator.core.spec import GridSpec, SweepSpec
from orchestrator.core.topology import Topology

HOURS_PER_DAY = 24.0


def layout_from_placement(ranks: int, threads: int, local_batch: int, placement: Placement) -> Layout:
    """The layout of a planned placement, read per node (not per rank: a 4,096-rank layout stays cheap)."""
    return layout_on_sockets(ranks, threads, local_batch,
                             ((node, socket) for node, layout in placement.per_node for socket, *_ in layout))


@dataclass(frozen=True, slots=True)
class ErrorBands:
    """Relative half-widths of the throughput interval, from held-out errors (fractions)."""

    interpolation: float | None                    # max |error| leaving one cell out
    extrapolation: Mapping[str, float] = field(default_factory=dict)   # axis → max |error| leaving its level out

    @staticmethod
    def from_validation(results: Sequence[SchemeResult]) -> ErrorBands:
        interp, extrap = None, {}
        for r in results:
            worst = r.scores[MODEL].max_abs_pct / 100
            if r.scheme == "leave one cell out":
                interp = worst
            else:
                extrap[r.scheme.split(" (")[0]] = worst
        return ErrorBands(interp, extrap)


def extrapolation_axes(lay: Layout, cells: Sequence[Cell]) -> list[tuple[str, str]]:
    """(hold-out scheme whose error applies, words) for each way the layout lies outside the measured cells.
    The words name the measured limit, not the layout's value (the row shows that), so one footnote serves
    every layout beyond the same limit; 'far' marks more than twice the limit, where the interval (one level
    of extrapolation, measured) understates the uncertainty."""
    out = []
    ranks = max(c.layout.ranks for c in cells)
    threads = max(c.layout.threads for c in cells)
    nodes = max(c.layout.nodes for c in cells)
    batches = [c.layout.local_batch for c in cells]

    def far(value: int, limit: int) -> str:
        return "far " if value > 2 * limit else ""

    if lay.ranks > ranks:
        out.append(("largest ranks", f"{far(lay.ranks, ranks)}beyond the measured ranks (≤ {ranks})"))
    if lay.threads > threads:
        out.append(("largest threads",
                    f"{far(lay.threads, threads)}beyond the measured threads per rank (≤ {threads})"))
    if lay.local_batch > max(batches) or lay.local_batch < min(batches):
        out.append(("largest local batch", f"local batch outside the measured {min(batches)}–{max(batches)}"))
    if lay.nodes > nodes:
        out.append(("multi-node cells", f"{far(lay.nodes, nodes)}beyond the measured nodes (≤ {nodes})"))
    return out


@dataclass(frozen=True, slots=True)
class Prediction:
    layout: Layout
    samples_per_s: float
    samples_per_s_low: float | None
    samples_per_s_high: float | None
    measured_samples_per_s: float | None
    extrapolated: tuple[str, ...]          # words, one per axis beyond the data
    notes: tuple[str, ...]                 # communication stand-ins, frozen parameters that matter
    epochs: EpochsPrediction | None
    hours: float | None
    hours_low: float | None
    hours_high: float | None
    node_hours: float | None
    runs_per_day: float | None
    marks: tuple[str, ...] = ()            # 'fastest', 'pareto', 'recommended'


def _band(model: StepModel, lay: Layout, cells: Sequence[Cell], bands: ErrorBands
          ) -> tuple[float, float | None, float | None, tuple[str, ...]]:
    value = model.samples_per_s(lay)
    axes = extrapolation_axes(lay, cells)
    widths = [bands.extrapolation.get(scheme) for scheme, _ in axes] if axes else [bands.interpolation]
    known = [w for w in widths if w is not None]
    if not known or len(known) < len(widths):
        return value, None, None, tuple(words for _, words in axes)
    width = max(known)
    return value, value * max(0.0, 1 - width), value * (1 + width), tuple(words for _, words in axes)


def _notes(model: StepModel, lay: Layout) -> tuple[str, ...]:
    notes = []
    _, comm_note = model.comm(lay)
    if comm_note:
        notes.append(comm_note)
    relevant = {"sigma": lay.threads > 1, "sigma_a": False, "kappa": lay.threads > 2,
                "mu": lay.ranks_per_socket > 1, "rho": lay.ranks > 1, "gamma": lay.ranks > 1, "a_s": True}
    notes += [why for p, why in model.frozen.items() if relevant.get(p)]
    return tuple(notes)


def candidate_layouts(spec: SweepSpec, topology: Topology, nodes: int, local_batches: Sequence[int],
                      rank_memory_mib: Callable[[int], float],
                      ccl_available: bool) -> list[tuple[int, int, int, Placement]]:
    """(ranks, threads, local batch, placement) of every feasible layout that uses exactly `nodes` nodes
    of the target, through the same plan code as `orch plan`."""
    part = Topology(topology.nodes[:nodes])
    node = part.nodes[0]
    hyper = spec.constraints.hyperthreads
    per_socket = max(len(s.cpus(hyper)) for s in node.sockets)
    per_node = node.usable_cores(hyper)
    threads = sorted(set(powers_of_two_up_to(per_socket)) | {t for t in _listed(spec.grid.threads_per_rank)
                                                             if t <= per_socket})
    ranks = sorted({nodes * k for k in powers_of_two_up_to(per_node)} |
                   ({r for r in _listed(spec.grid.ranks)} if nodes == 1 else set()))
    grid = GridSpec(ranks=tuple(ranks), threads_per_rank=tuple(threads), local_batch=tuple(sorted(set(local_batches))))
    plan = make_plan(replace(spec, grid=grid, convergence=None), part, rank_memory_mib=rank_memory_mib,
                     ccl_available=ccl_available)
    return [(p.trial.ranks, p.trial.threads_per_rank, p.trial.local_batch, p.placement) for p in plan.feasible
            if p.placement is not None and p.placement.nodes_used == nodes]


def _listed(axis: object) -> list[int]:
    return list(axis) if isinstance(axis, (list, tuple)) else []


@dataclass(frozen=True, slots=True)
class Target:
    topology: Topology
    node_counts: tuple[int, ...]
    local_batches: tuple[int, ...]
    samples_per_epoch: int | None
    same_machine: bool                 # the target's nodes are the machine the cells were measured on


def predict_layouts(target: Target, spec: SweepSpec, model: StepModel, cells: Sequence[Cell], bands: ErrorBands,
                    epochs_model: EpochsModel | None, rank_memory_mib: Callable[[int], float],
                    ccl_available: bool) -> list[Prediction]:
    measured = {(c.layout.ranks, c.layout.threads, c.layout.local_batch, c.layout.nodes): c.samples_per_s
                for c in cells} if target.same_machine else {}
    out = []
    for nodes in target.node_counts:
        for ranks, threads, batch, placement in candidate_layouts(spec, target.topology, nodes, target.local_batches,
                                                                  rank_memory_mib, ccl_available):
            lay = layout_from_placement(ranks, threads, batch, placement)
            value, low, high, extrap = _band(model, lay, cells, bands)
            epochs = epochs_model.predict(lay.global_batch) if epochs_model else None
            out.append(_timed(Prediction(lay, value, low, high, measured.get((ranks, threads, batch, nodes)), extrap,
                                         _notes(model, lay), epochs, None, None, None, None, None),
                              target))
    return mark(out)


def _timed(p: Prediction, target: Target) -> Prediction:
    e = p.epochs
    if e is None or e.epochs is None or e.status == NOT_CONVERGED or not target.samples_per_epoch:
        return p
    spe = target.samples_per_epoch
    hours = e.epochs * spe / p.samples_per_s / 3600
    low = (e.low or e.epochs) * spe / (p.samples_per_s_high or p.samples_per_s) / 3600
    high = (e.high or e.epochs) * spe / (p.samples_per_s_low or p.samples_per_s) / 3600
    copies = len(target.topology.nodes) // p.layout.nodes
    return replace(p, hours=hours, hours_low=low, hours_high=high, node_hours=hours * p.layout.nodes,
                   runs_per_day=copies * HOURS_PER_DAY / hours)


def _h(p: Prediction) -> float:
    return p.hours if p.hours is not None else math.inf


def _nh(p: Prediction) -> float:
    return p.node_hours if p.node_hours is not None else math.inf


def _per_sample(p: Prediction) -> Prediction:
    """Without epochs, 'time' is seconds per sample and 'node time' node-seconds per sample: the same
    ordering time-to-train would give at a fixed number of epochs."""
    return replace(p, hours=1 / p.samples_per_s, node_hours=p.layout.nodes / p.samples_per_s)


def mark(predictions: Sequence[Prediction]) -> list[Prediction]:
    """Mark the fastest layout per node count and the Pareto set of (hours, node-hours); by throughput
    (time and node time per sample) when no layout has a time-to-train."""
    timed = [p for p in predictions if p.hours is not None]
    if not timed and predictions:
        by_rate = mark([_per_sample(p) for p in predictions])
        return [replace(p, marks=q.marks) for p, q in zip(predictions, by_rate)]
    fastest: dict[int, Prediction] = {}
    for p in timed:
        best = fastest.get(p.layout.nodes)
        if best is None or _h(p) < _h(best):
            fastest[p.layout.nodes] = p
    pareto = {id(p) for p in timed if not any(
        _h(q) <= _h(p) and _nh(q) <= _nh(p) and (_h(q) < _h(p) or _nh(q) < _nh(p)) for q in timed)}
    out = []
    for p in predictions:
        marks = tuple(m for m, on in (("fastest", fastest.get(p.layout.nodes) is p), ("pareto", id(p) in pareto)) if on)
        out.append(replace(p, marks=marks))
    return out


@dataclass(frozen=True, slots=True)
class Recommendation:
    prediction: Prediction | None
    rule: str                # what was asked, in words
    why: str                 # the answer, or why there is none


def recommend(predictions: Sequence[Prediction], *, deadline_h: float | None = None,
              budget_node_h: float | None = None) -> Recommendation | None:
    """Fewest node-hours that meet the deadline, or the fastest within the node-hour budget (on the
    central estimate; the interval's pessimistic end is reported beside it)."""
    timed = [p for p in predictions if p.hours is not None]
    if (deadline_h is not None or budget_node_h is not None) and not timed:
        rule = (f"deadline {deadline_h:g} h" if deadline_h is not None else f"budget {budget_node_h:g} node-hours")
        return Recommendation(None, rule, "no time-to-train to compare: no convergence data (run the sweep with a "
                                          "convergence section, or give --rcp) or no samples per epoch")
    if deadline_h is not None:
        rule = f"deadline {deadline_h:g} h: fewest node-hours that finish in time"
        ok = [p for p in timed if _h(p) <= deadline_h]
        if not ok:
            best = min(timed, key=_h, default=None)
            return Recommendation(None, rule, "no layout meets it" + (
                f"; the fastest, {best.layout.label}, needs {_h(best):.3g} h" if best else ""))
        pick = min(ok, key=lambda p: (_nh(p), _h(p)))
    elif budget_node_h is not None:
        rule = f"budget {budget_node_h:g} node-hours: fastest within it"
        ok = [p for p in timed if _nh(p) <= budget_node_h]
        if not ok:
            cheapest = min(timed, key=_nh, default=None)
            return Recommendation(None, rule, "no layout fits it" + (
                f"; the cheapest, {cheapest.layout.label}, needs {_nh(cheapest):.3g} node-hours"
                if cheapest else ""))
        pick = min(ok, key=lambda p: (_h(p), _nh(p)))
    else:
        return None
    caveat = ""
    if pick.hours_high is not None and deadline_h is not None and pick.hours_high > deadline_h:
        caveat = f"; at the pessimistic end of its interval it needs {pick.hours_high:.3g} h, past the deadline"
    if pick.extrapolated:
        caveat += "; extrapolated: " + "; ".join(pick.extrapolated)
    return Recommendation(pick, rule, f"{pick.layout.label}: {_h(pick):.3g} h, {_nh(pick):.3g} node-hours{caveat}")
