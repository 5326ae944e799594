"""Replay: a selection policy run against a results folder whose every cell was measured, the "measurement"
being the recorded one, so that no trial runs. Pure arithmetic on the records: what it reports does not
depend on the machine it runs on.

The replay starts where a live adaptive sweep starts, with the GEMM peaks and the all-reduce calibration
measured (cheap, and every interval rests on them), and then asks the policy for a cell, reads its record,
asks again, until the policy stops or no cell is left. After every step it keeps the answer (`answer_of`) and
the core-seconds spent: the recorded wall time of each trial × the cores it kept from others (a timing trial
under `measure.isolation: node` keeps its nodes' cores; a convergence run its own). Costs the policy sees are
estimates (`orchestrator.core.execution.eta`: a step from the workload's FLOPs and the GEMM peak of one core, refined by
what the replayed trials measured, as the live sweep refines its ETA), never the recorded ones.

Policies: `ADAPTIVE` (`policy.decide`: the live sweep's), and three baselines that never stop early:
`CHEAPEST` (the cheapest estimated cell first), `RANDOM` (a random order, seeded) and `GRID` (the order
the full sweep ran them in).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.core.adaptive.answer import FASTEST, Answer, Known, Question, answer_of
from orchestrator.core.adaptive.policy import Candidate, Choice, decide
from orchestrator.core.execution.eta import (
    CONVERGENCE_EPOCHS_PRIOR,
    Eta,
    RunCosts,
    Shape,
    Work,
    convergence_run_s,
    step_s,
    throughput_s,
)
from orchestrator.core.machine.topology import Topology
from orchestrator.core.measured.peaks import peak_index
from orchestrator.core.measured.records import Kind, Record, Records
from orchestrator.core.planning.spec import SweepSpec
from orchestrator.core.predict.data import layout_of
from orchestrator.core.predict.step import Layout

ADAPTIVE, CHEAPEST, RANDOM, GRID = "adaptive", "cheapest first", "random", "grid order"
TIMING_KINDS = (Kind.THROUGHPUT, Kind.PEAK, Kind.ALLREDUCE)
UNKNOWN_STEP_S_PER_SAMPLE = 0.01   # a step's prior without FLOPs or a peak: only its proportions matter


@dataclass(frozen=True, slots=True)
class Setting:
    """What a replay needs of the folder beside its records (spec.json, topology.json)."""

    node_cores: int
    samples_per_epoch: int | None = None
    isolation: str = "node"
    warmup_steps: int = 3
    timed_steps: int = 10
    repeats: int = 3
    run_costs: RunCosts | None = None       # None without a convergence section
    precision: str = "fp32"


def setting_of(spec: SweepSpec, samples_per_epoch: int | None, topology: Topology | None,
               precision: str | None) -> Setting:
    """The setting of a results folder: its sweep as it ran (spec.json's spec, typed), its samples per epoch, the
    machine it ran on (topology.json) and the precision its sweep chose (environment.json; None: the workload's
    parameter, else fp32).

    >>> from orchestrator.core.machine.topology import topology_from_data
    >>> from orchestrator.core.planning.spec import parse_spec
    >>> spec, _ = parse_spec({"name": "s", "workload": {"name": "w"}, "grid": {"local_batch": [8]},
    ...                       "measure": {"repeats": 5}})
    >>> machine, _ = topology_from_data({"nodes": [{"name": "vm", "memory_mib": 1024, "sockets": [[[0], [1]]]}]})
    >>> s = setting_of(spec, 256, machine, None)
    >>> s.node_cores, s.repeats, s.isolation, s.precision
    (2, 5, 'node', 'fp32')
    """
    m, conv, params = spec.measure, spec.convergence, spec.workload.params
    node_cores = topology.nodes[0].usable_cores(spec.constraints.hyperthreads) if topology and topology.nodes else 1
    eval_samples = params.get("test_samples")
    costs = None
    if conv is not None and samples_per_epoch:
        costs = RunCosts(samples_per_epoch, conv.max_epochs, conv.eval_every_epochs,
                         eval_samples if isinstance(eval_samples, int) else None, node_cores)
    chosen = precision or params.get("precision") or "fp32"
    return Setting(node_cores, samples_per_epoch, m.isolation, m.warmup_steps, m.timed_steps, m.repeats, costs,
                   str(chosen))


@dataclass(frozen=True, slots=True)
class Step:
    """The state after a step: the trial measured ('' at the start), why, how many trials and core-seconds so far
    (the up-front calibration included), and the answer."""

    key: str
    reason: str
    trials: int
    core_s: float
    answer: Answer


@dataclass(frozen=True, slots=True)
class Trajectory:
    policy: str
    steps: tuple[Step, ...]
    stop: str            # why it ended: the policy's stop, or 'every cell measured'
    skipped: tuple[Candidate, ...] = ()   # the cells left when it stopped


# (what is known, the question, the cells left, the answer now, wall seconds spent so far) -> the choice
Policy = Callable[[Known, Question, Sequence[Candidate], Answer, float], Choice]


def held_cores(r: Record, s: Setting) -> int:
    """Cores a trial kept from others while it ran (the module's docstring)."""
    own = (r.ranks or 1) * (r.threads_per_rank or 1)
    if r.kind in TIMING_KINDS and s.isolation == "node":
        nodes = len({p.node for p in r.placement or ()}) or 1
        return s.node_cores * nodes
    return own


def actual_core_s(r: Record, s: Setting) -> float:
    return float(r.wall_s or 0.0) * held_cores(r, s)


def measured_items(records: Records) -> list[Record]:
    """The trials a policy chooses among: every ok throughput and convergence record, in the folder's order."""
    return [r for r in records if r.ok and r.kind in (Kind.THROUGHPUT, Kind.CONVERGENCE)]


def question_of(records: Records, kind: str, s: Setting) -> Question:
    """The question over the folder's own measured layouts (the full grid's answer is `orch report`'s)."""
    layouts = tuple(dict.fromkeys(_layout(r) for r in records.ok(Kind.THROUGHPUT)))
    uses_epochs = kind == FASTEST and bool(records.of_kind(Kind.CONVERGENCE))
    return Question(kind, layouts, uses_epochs=uses_epochs, samples_per_epoch=s.samples_per_epoch)


def _layout(r: Record) -> Layout:
    return layout_of(r.ranks or 0, r.threads_per_rank or 0, r.local_batch or 0, r.placement)


def _step_prior(records: Records, s: Setting) -> Callable[[int, int], float]:
    """A step's estimate before it runs, from the workload's FLOPs per sample and one core's GEMM peak."""
    flops = next((r.throughput.train_flops_per_sample for r in records.ok(Kind.THROUGHPUT)
                  if r.throughput is not None and r.throughput.train_flops_per_sample), None)
    one = peak_index(records).one_rank
    rate = one.get((1, s.precision)) or next((g for (t, _), g in sorted(one.items()) if t == 1), None)
    if flops and rate:
        return lambda batch, threads: step_s(float(flops), batch, threads, rate)
    return lambda batch, threads: UNKNOWN_STEP_S_PER_SAMPLE * batch / threads


def estimate(records: Records, s: Setting) -> tuple[Eta, dict[str, Work]]:
    """The sweep's estimate of every trial a policy may choose (eta's model, before anything ran)."""
    prior = _step_prior(records, s)
    work = {}
    for r in measured_items(records):
        shape = Shape(r.ranks or 1, r.threads_per_rank or 1, r.local_batch or 1)
        step = prior(shape.local_batch, shape.threads)
        if r.kind == Kind.THROUGHPUT:
            first = throughput_s(step, s.warmup_steps, s.timed_steps, s.repeats, ranks=shape.ranks)
        elif s.run_costs is not None:
            first = convergence_run_s(s.run_costs, shape, step,
                                      epochs=CONVERGENCE_EPOCHS_PRIOR * s.run_costs.max_epochs)
        else:
            first = step * 100
        work[r.key] = Work(r.key, r.kind, first, shape.ranks * shape.threads, shape, step)
    return Eta(list(work.values()), s.node_cores, s.run_costs), work


def candidate(r: Record, expected_s: float, s: Setting) -> Candidate:
    return Candidate(r.key, r.kind, _layout(r), expected_s, held_cores(r, s), r.seed)


def replay(records: Records, q: Question, s: Setting, policy: Policy, name: str) -> Trajectory:
    """Run `policy` against the folder's records (the module's docstring)."""
    upfront = [r for r in records if r.ok and r.kind in (Kind.PEAK, Kind.ALLREDUCE)]
    left = {r.key: r for r in measured_items(records)}
    eta, work = estimate(records, s)
    for r in upfront:
        eta.finished(r.key, float(r.wall_s or 0.0), r)
    measured = list(upfront)
    spent = sum(actual_core_s(r, s) for r in upfront)
    wall_s = sum(float(r.wall_s or 0.0) for r in upfront)
    known = Known.of(measured)
    steps = [Step("", "the GEMM peaks and the all-reduce calibration, measured up front", 0, spent,
                  answer_of(known, q))]
    reason = ""
    while left:
        candidates = [candidate(r, eta.expected_s(work[k]), s) for k, r in left.items()]
        choice = policy(known, q, candidates, steps[-1].answer, wall_s)
        if choice.candidate is None:
            return Trajectory(name, tuple(steps), choice.reason, tuple(candidates))
        r = left.pop(choice.candidate.key)
        eta.finished(r.key, float(r.wall_s or 0.0), r)
        measured.append(r)
        spent += actual_core_s(r, s)
        wall_s += float(r.wall_s or 0.0)
        known = Known.of(measured)
        steps.append(Step(r.key, choice.reason, len(steps), spent, answer_of(known, q)))
        reason = "every cell measured"
    return Trajectory(name, tuple(steps), reason or "nothing to measure")


def adaptive_policy(target_width: float | None = None, budget_s: float | None = None) -> Policy:
    """The live sweep's policy (`policy.decide`), its budget counted in the replayed trials' wall seconds (a
    live adaptive sweep runs one trial at a time)."""
    def pick(known: Known, q: Question, candidates: Sequence[Candidate], answer: Answer, spent_s: float) -> Choice:
        left = None if budget_s is None else budget_s - spent_s
        return decide(known, q, candidates, target_width=target_width, budget_left_s=left, answer=answer)
    return pick


def cheapest_policy(known: Known, q: Question, candidates: Sequence[Candidate], answer: Answer,
                    spent_s: float) -> Choice:
    pick = min(candidates, key=lambda c: c.core_s)
    return Choice(pick, f"the cheapest estimated cell ({pick.core_s:,.0f} core-s)", answer)


def ordered_policy(order: Sequence[str], why: str) -> Policy:
    """The first cell left in a fixed order of keys."""
    rank = {k: i for i, k in enumerate(order)}

    def pick(known: Known, q: Question, candidates: Sequence[Candidate], answer: Answer, spent_s: float) -> Choice:
        c = min(candidates, key=lambda c: rank.get(c.key, len(rank)))
        return Choice(c, why, answer)
    return pick


def random_policy(records: Records, seed: int) -> Policy:
    keys = sorted(r.key for r in measured_items(records))
    random.Random(seed).shuffle(keys)
    return ordered_policy(keys, f"random order (seed {seed})")


def grid_policy(records: Records) -> Policy:
    return ordered_policy([r.key for r in measured_items(records)], "the full sweep's order")


# --- what a trajectory achieved, against the full grid's answer --------------------------------------------

def covered(a: Answer, full: Answer) -> bool:
    """The full grid's answer lies inside `a`'s interval (every row of it, for the table)."""
    if a.value is None or full.value is None:
        return False
    if a.kind == FASTEST:
        return a.low <= full.value <= a.high
    rows = {(r.layout.ranks, r.layout.threads, r.layout.local_batch): r for r in a.rows}
    return all((k := (f.layout.ranks, f.layout.threads, f.layout.local_batch)) in rows and f.value is not None
               and rows[k].low <= f.value <= rows[k].high for f in full.rows)


def error(a: Answer, full: Answer) -> float | None:
    """|a ÷ full − 1|: of the answer (FASTEST), the median over the rows (TABLE)."""
    if a.value is None or full.value is None:
        return None
    if a.kind == FASTEST:
        return abs(a.value / full.value - 1)
    mine = {(r.layout.ranks, r.layout.threads, r.layout.local_batch): r.value for r in a.rows}
    errs = [abs((mine.get((f.layout.ranks, f.layout.threads, f.layout.local_batch)) or 0.0) / f.value - 1)
            for f in full.rows if f.value]
    return statistics.median(errs) if errs else None


def reached(t: Trajectory, full: Answer, factor: float = 1.25) -> Step | None:
    """The first step whose interval holds the full grid's answer and is at most `factor` × as wide as its."""
    for s in t.steps:
        if s.answer.value is not None and s.answer.width <= factor * full.width and covered(s.answer, full):
            return s
    return None


def at_share(t: Trajectory, core_s: float) -> Step:
    """The last step that spent no more than `core_s`."""
    inside = [s for s in t.steps if s.core_s <= core_s + 1e-9]
    return inside[-1] if inside else t.steps[0]
