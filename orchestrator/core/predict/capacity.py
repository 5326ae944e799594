"""Predicted time-to-train for every feasible layout of a target cluster, and the choices it implies.

For each node count, every layout (ranks × threads per rank × local batch) that the constraint engine and
placement accept (`orchestrator.core.planning.plan.make_plan`, the code `orch plan` and `orch sweep` use) and that
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

>>> print(recommend([], deadline_h=2.0).why)   # nothing to recommend from: said, with what would help
no time-to-train to compare: no convergence data (run the sweep with a convergence section, or give --rcp) or no ...
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from orchestrator.core.machine.placement import Placement
from orchestrator.core.machine.topology import Topology
from orchestrator.core.planning.constraints import Rules, check
from orchestrator.core.planning.grid import powers_of_two_up_to
from orchestrator.core.planning.plan import make_plan
from orchestrator.core.planning.spec import GridSpec, SweepSpec
from orchestrator.core.planning.trial import Trial
from orchestrator.core.predict.data import layout_on_sockets
from orchestrator.core.predict.epochs import NOT_CONVERGED, EpochsModel, EpochsPrediction
from orchestrator.core.predict.interval import Basis, predict_cell
from orchestrator.core.predict.machine import SAME_MACHINE, MachineWhatIf
from orchestrator.core.predict.step import Layout
from orchestrator.core.predict.validate import MODEL
from orchestrator.errors import InputError

HOURS_PER_DAY = 24.0
CONVERGE_SURE = 0.95     # below this P(converge), a row says its chance of not training at all


class NoFeasibleLayout(InputError):
    """The workload fits no layout of the target (the planner's own reasons say why)."""


def layout_from_placement(ranks: int, threads: int, local_batch: int, placement: Placement) -> Layout:
    """The layout of a planned placement, read per node (not per rank: a 4,096-rank layout stays cheap)."""
    return layout_on_sockets(ranks, threads, local_batch,
                             ((node, socket) for node, layout in placement.per_node for socket, *_ in layout))


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
    predictor: str = MODEL                 # the id of the predictor of samples/s (bands.choose; printed by its label)
    no_interval: str = ""                  # why samples/s or hours has no interval ("" when both have one)

    @property
    def caveats(self) -> tuple[str, ...]:
        """Every assumption and extrapolation this row rests on, in words."""
        e = self.epochs
        epochs = [w for w in ((e.note, e.no_interval) if e else ()) if w]
        if e is not None and e.p_converge is not None and e.p_converge < CONVERGE_SURE and not e.note:
            epochs.append(f"P(converge) {e.p_converge:.2f} at global batch {e.global_batch}")
        return tuple(dict.fromkeys([*self.extrapolated, *self.notes, *epochs,
                                    *([self.no_interval] if self.no_interval else [])]))


def candidate_layouts(spec: SweepSpec, topology: Topology, nodes: int, local_batches: Sequence[int],
                      rank_memory_mib: Callable[[int], float], ccl_available: bool,
                      library_mib: float = 0.0) -> list[tuple[int, int, int, Placement]]:
    """(ranks, threads, local batch, placement) of every feasible layout that uses exactly `nodes` nodes
    of the target, through the same plan code as `orch plan` (`library_mib`: held once per node)."""
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
                     ccl_available=ccl_available, library_mib=library_mib)
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
    machine: MachineWhatIf = SAME_MACHINE


def why_nothing_fits(target: Target, spec: SweepSpec, rank_memory_mib: Callable[[int], float],
                     library_mib: float = 0.0) -> str:
    """Why the target hosts no layout of the workload, in the planner's own words: its rules applied to the
    smallest layout there is, 1 rank × 1 thread at the smallest local batch asked."""
    cons = spec.constraints
    batch = min(target.local_batches)
    need = cons.rank_memory_mib or rank_memory_mib(batch)
    rules = Rules(hyperthreads=cons.hyperthreads, ccl_workers=0, memory_headroom=cons.memory_headroom,
                  rank_memory_mib=need, library_mib=library_mib, memory_budget_mib=cons.memory_budget_mib,
                  backend_error=None)
    reasons = check(Trial(1, 1, batch), target.topology, rules)
    detail = "; ".join(r.message for r in reasons) or "no layout uses exactly the node counts asked"
    return (f"workload {spec.workload.name} fits no layout of the target ({target.topology.describe()}) at "
            f"node counts {','.join(map(str, target.node_counts))} and local batch(es) "
            f"{','.join(map(str, target.local_batches))}: even 1 rank × 1 thread at local batch {batch}: {detail}")


def predict_layouts(target: Target, spec: SweepSpec, basis: Basis, epochs_model: EpochsModel | None,
                    rank_memory_mib: Callable[[int], float], ccl_available: bool,
                    library_mib: float = 0.0) -> list[Prediction]:
    measured = {(c.layout.ranks, c.layout.threads, c.layout.local_batch, c.layout.nodes): c.samples_per_s
                for c in basis.cells} if target.same_machine else {}
    rank_memory_mib = functools.lru_cache(maxsize=None)(rank_memory_mib)   # asked per layout, same per batch
    out = []
    for nodes in target.node_counts:
        for ranks, threads, batch, placement in candidate_layouts(spec, target.topology, nodes, target.local_batches,
                                                                  rank_memory_mib, ccl_available, library_mib):
            lay = replace(layout_from_placement(ranks, threads, batch, placement),
                          threads_per_core=_siblings(spec, target.topology, threads))
            b = predict_cell(basis, lay, target.machine)
            epochs = epochs_model.predict(lay.global_batch) if epochs_model else None
            ends = tuple(w for w in (b.low_why, b.high_why) if w)
            out.append(_timed(Prediction(lay, b.value, b.low, b.high, measured.get((ranks, threads, batch, nodes)),
                                         b.extrapolated, b.notes + ends, epochs, None, None, None, None, None,
                                         predictor=b.predictor, no_interval=b.no_interval), target))
    return mark(out)


def _siblings(spec: SweepSpec, topology: Topology, threads: int) -> int:
    """Hardware threads per core a rank of `threads` runs on the target: with hyperthreads counted, the placement
    packs siblings together (`Socket.cpus`), so a rank of two threads or more holds its cores' siblings too."""
    per_core = topology.nodes[0].threads_per_core
    if not spec.constraints.hyperthreads or per_core <= 1 or threads < 2:
        return 1
    return min(per_core, threads)


def _timed(p: Prediction, target: Target) -> Prediction:
    """hours = epochs × samples per epoch ÷ samples/s ÷ 3600; its interval pairs the few-epochs end with the
    fast end and the many-epochs end with the slow end (the widest the two intervals allow)."""
    e = p.epochs
    if e is None or e.epochs is None or e.status == NOT_CONVERGED or not target.samples_per_epoch:
        return p
    spe = target.samples_per_epoch
    hours = e.epochs * spe / p.samples_per_s / 3600
    copies = len(target.topology.nodes) // p.layout.nodes
    timed = replace(p, hours=hours, node_hours=hours * p.layout.nodes, runs_per_day=copies * HOURS_PER_DAY / hours)
    if e.low is None or e.high is None or p.samples_per_s_low is None or p.samples_per_s_high is None:
        why = p.no_interval or (f"no interval: epochs {e.no_interval}" if e.no_interval else "no interval")
        return replace(timed, no_interval=why)
    low = e.low * spe / p.samples_per_s_high / 3600
    high = e.high * spe / p.samples_per_s_low / 3600
    if not low < hours < high:        # physics, checked: a published interval has width and holds its centre
        raise ValueError(f"time-to-train interval [{low:.6g}, {high:.6g}] h does not hold {hours:.6g} h "
                         f"for {p.layout.label}")
    return replace(timed, hours_low=low, hours_high=high)


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
    by_nodes: dict[int, list[Prediction]] = {}
    for p in timed:
        by_nodes.setdefault(p.layout.nodes, []).append(p)
    fastest = {id(min(group, key=_h)) for group in by_nodes.values()}     # the first of the fastest, per node count
    pareto = {id(p) for p in timed if not any(
        _h(q) <= _h(p) and _nh(q) <= _nh(p) and (_h(q) < _h(p) or _nh(q) < _nh(p)) for q in timed)}
    out = []
    for p in predictions:
        marks = tuple(m for m, on in (("fastest", id(p) in fastest), ("pareto", id(p) in pareto)) if on)
        out.append(replace(p, marks=marks))
    return out


@dataclass(frozen=True, slots=True)
class Recommendation:
    prediction: Prediction | None
    rule: str                # what was asked, in words
    why: str                 # the answer, or why there is none


def recommend(predictions: Sequence[Prediction], *, deadline_h: float | None = None,
              budget_node_h: float | None = None) -> Recommendation | None:
    """Fewest node-hours that meet the deadline, or the fastest within the node-hour budget, on the central
    estimate; the answer says whether the interval's pessimistic end still meets it, and lists every caveat
    of the picked row (a row without an interval says so)."""
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
    return Recommendation(pick, rule, f"{pick.layout.label}: {_h(pick):.3g} h, {_nh(pick):.3g} node-hours"
                                      f"{_pessimistic(pick, deadline_h, budget_node_h)}{_caveats(pick)}")


def _pessimistic(pick: Prediction, deadline_h: float | None, budget_node_h: float | None) -> str:
    if pick.hours_high is None:
        return "; no interval, so no pessimistic end to check"
    if deadline_h is not None:
        verdict = "still meets the deadline" if pick.hours_high <= deadline_h else "past the deadline"
        return f"; at the pessimistic end of its interval it needs {pick.hours_high:.3g} h, {verdict}"
    node_hours_high = pick.hours_high * pick.layout.nodes
    verdict = "still within the budget" if budget_node_h is None or node_hours_high <= budget_node_h else \
        "over the budget"
    return f"; at the pessimistic end of its interval it needs {node_hours_high:.3g} node-hours, {verdict}"


def _caveats(pick: Prediction) -> str:
    return ("; caveats: " + "; ".join(pick.caveats)) if pick.caveats else ""
