"""Which cell next, or why stop: the decision an adaptive sweep asks for after every finished trial. Pure.

In order:

1. **Stop** when every planned cell is measured, or when no cell left fits the budget left (`budget_left_s`,
   estimated seconds).
2. **Cold start.** The step model needs 3 throughput cells, one of them with 1 rank (`fit.check_fittable`):
   until then, the cheapest 1-rank cell, then the cheapest cells that add a level of ranks or threads. The
   epochs band needs the smallest and the largest global batch of the question (between them it interpolates)
   and two seeds at one batch (the seeds' spread): until then, the cheapest convergence run that adds one.
   Parameters the cells cannot determine yet stay frozen as `orch predict` freezes them. Also the ends of
   the question's range on every axis (ranks, threads, local batch): until they are measured, some layout's
   interval rests on an extrapolation. No stop on width before the cold start is done.
3. **Stop** when the answer's interval is narrow enough (its relative width at most the target), once the
   layout it names is measured, with a convergence run at its global batch (`confirm`).
4. **Value per core-second.** For every cell left (one convergence run per global batch: seeds are alike
   before they run), a fantasy: the cell measured at its predicted value (a throughput cell at the cells'
   median noise; a seed at the epochs model's central estimate), the models refitted, the answer recomputed.
   The expected shrink is the answer's objective now less after; the cell with the most shrink per estimated
   core-second is chosen. (For a linear model with Gaussian noise the posterior variance does not depend on
   the value observed, so the fantasy at the predicted value is the exact expected shrink; here it is the
   first-order one. Ernest, NSDI'16, designs the same way under a budget, A-optimally on a linearised model;
   the fantasy needs no linearisation of the bounds and held-out errors the intervals rest on.)
5. **Fallback.** When no fantasy shrinks the answer (the intervals rest on bounds a single cell does not
   move), the cheapest cell of a layout that may still be the answer; when there is none, stop.

Every choice carries its reason in words: the progress line shows it and the trial's record keeps it.
The fantasies refit the bootstrap with `FANTASY_RESAMPLES` draws, the answer they are compared with too.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.core.adaptive.answer import (
    FASTEST,
    TABLE,
    Answer,
    Known,
    Question,
    answer_from,
    answer_of,
    rate,
    relative_text,
)
from orchestrator.core.measured.records import Kind
from orchestrator.core.predict.epochs import EpochsModel
from orchestrator.core.predict.fit import MIN_CELLS
from orchestrator.core.predict.interval import Basis
from orchestrator.core.predict.step import Cell, Layout

FANTASY_RESAMPLES = 8       # bootstrap refits per fantasy: its spread's own error is about 1/√16 = 25%
MIN_SHRINK = 1e-6           # a smaller expected shrink of the objective is no shrink
NARROW, ALL_MEASURED, BUDGET, NOTHING_TEACHES = "narrow enough", "all measured", "budget", "nothing teaches"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A trial the sweep could run next: a throughput cell or one seed's convergence run, on `layout` (the
    model's view of its placement), expected to take `expected_s` seconds while keeping `cores` from others.

    >>> c = Candidate("conv-g16-s1", Kind.CONVERGENCE, Layout(2, 1, 8), expected_s=30.0, cores=2, seed=1)
    >>> c.core_s, c.label
    (60.0, 'conv-g16-s1 (global batch 16, seed 1)')
    """

    key: str
    kind: Kind
    layout: Layout
    expected_s: float
    cores: int
    seed: int | None = None

    @property
    def core_s(self) -> float:
        return max(self.expected_s, 1e-9) * max(self.cores, 1)

    @property
    def label(self) -> str:
        if self.kind == Kind.CONVERGENCE:
            return f"{self.key} (global batch {self.layout.global_batch}, seed {self.seed})"
        return self.key


@dataclass(frozen=True, slots=True)
class Choice:
    """The next trial and why, or (candidate None) why the sweep stops (`stop`: which rule)."""

    candidate: Candidate | None
    reason: str
    answer: Answer                           # the answer before the trial
    expected_shrink: float | None = None     # of the answer's objective, when chosen by value
    stop: str = ""

    @property
    def stopped(self) -> bool:
        return self.candidate is None


def decide(known: Known, q: Question, candidates: Sequence[Candidate], *, target_width: float | None = None,
           budget_left_s: float | None = None, answer: Answer | None = None) -> Choice:
    """The next trial, or why to stop (the module's docstring says how). `answer`: `answer_of(known, q)`
    when the caller has it already."""
    answer = answer or answer_of(known, q)
    if not candidates:
        return Choice(None, "every planned cell is measured", answer, stop=ALL_MEASURED)
    affordable = [c for c in candidates if budget_left_s is None or c.expected_s <= budget_left_s]
    narrow = target_width is not None and answer.value is not None and answer.width <= target_width
    narrow_reason = (f"the answer's interval is narrow enough: {relative_text(answer.width)}, target "
                     f"{relative_text(target_width or 0.0)}")
    if not affordable:
        quickest = min(candidates, key=lambda c: c.expected_s)
        spent = (f"budget spent: {max(budget_left_s or 0.0, 0.0):.0f} s left, and the quickest cell left, "
                 f"{quickest.label}, needs about {quickest.expected_s:.0f} s")
        # Where both stops hold, the width leads: it is the one that says the answer is sure enough.
        if narrow and cold_start(known, q, candidates) is None:
            return Choice(None, f"{narrow_reason} (and the {spent})", answer, stop=NARROW)
        return Choice(None, spent, answer, stop=BUDGET)
    cold = cold_start(known, q, affordable)
    if cold is not None:          # before any stop on width: until then the intervals rest on too little
        return Choice(cold[0], cold[1], answer)
    if narrow:
        return confirm(known, q, answer, affordable, narrow_reason) or Choice(None, narrow_reason, answer,
                                                                              stop=NARROW)
    return by_value(known, q, affordable, answer)


def confirm(known: Known, q: Question, answer: Answer, candidates: Sequence[Candidate], stop: str) -> Choice | None:
    """Before a stop, the fastest layout's own cell and a convergence run at its global batch, where either is
    still a prediction: the answer should rest on measurements of the layout it names. None: nothing to confirm."""
    if q.kind != FASTEST or answer.layout is None:
        return None
    lay = answer.layout
    own = [c for c in candidates if c.kind == Kind.THROUGHPUT and (c.layout.ranks, c.layout.threads,
                                                                      c.layout.local_batch) ==
           (lay.ranks, lay.threads, lay.local_batch)]
    runs = [c for c in candidates if c.kind == Kind.CONVERGENCE and q.uses_epochs and
            c.layout.global_batch == lay.global_batch and not any(
                p.global_batch == lay.global_batch for p in known.points)]
    pick = own[0] if own else (_cheapest(runs) if runs else None)
    if pick is None:
        return None
    what = "its samples/s" if own else f"epochs at its global batch ({lay.global_batch})"
    return Choice(pick, f"confirming the answer before the stop ({stop}): {lay.label} is the fastest, but {what} "
                        f"is still a prediction; {pick.label}", answer)


def _cheapest(candidates: Sequence[Candidate]) -> Candidate:
    return min(candidates, key=lambda c: c.core_s)


def cold_start(known: Known, q: Question, candidates: Sequence[Candidate]) -> tuple[Candidate, str] | None:
    """The cell the models need before any fantasy can be trusted, and why; None once they have it."""
    throughput = [c for c in candidates if c.kind == Kind.THROUGHPUT]
    picked = _cold_throughput(known, q, throughput) if throughput else None
    if picked is not None:
        return picked
    runs = [c for c in candidates if c.kind == Kind.CONVERGENCE]
    if q.kind == FASTEST and q.uses_epochs and runs:
        return _cold_epochs(known, q, runs)
    return None


AXES: tuple[tuple[str, Callable[[Layout], int]], ...] = (
    ("ranks", lambda lay: lay.ranks), ("threads per rank", lambda lay: lay.threads),
    ("local batch", lambda lay: lay.local_batch))


def missing_ends(known: Known, q: Question, throughput: Sequence[Candidate]) -> list[tuple[str, int, str]]:
    """(axis, value, 'smallest' or 'largest') of each end of the question's range on an axis that no measured
    cell has yet, where a cell left can measure it: until every end is measured, some layout of the question is
    an extrapolation, whose interval rests on one held-out level or on bounds alone."""
    out: list[tuple[str, int, str]] = []
    for name, of in AXES:
        asked = [of(lay) for lay in q.layouts]
        have = {of(c.layout) for c in known.cells}
        can = sorted(have | {of(c.layout) for c in throughput})
        inside = [v for v in can if min(asked) <= v <= max(asked)] or can
        for value, end in ((min(inside), "smallest"), (max(inside), "largest")):
            if value not in have and (name, value, end) not in out and not any(o[:2] == (name, value) for o in out):
                out.append((name, value, end))
    return out


def _cold_throughput(known: Known, q: Question, throughput: Sequence[Candidate]) -> tuple[Candidate, str] | None:
    cells = known.cells
    ones = [c for c in throughput if c.layout.ranks == 1]
    if not any(c.layout.ranks == 1 for c in cells) and ones:
        pick = _cheapest(ones)
        return pick, (f"cold start: the step model needs a 1-rank cell; {pick.label} is the cheapest "
                      f"(about {pick.core_s:,.0f} core-s)")
    ends = missing_ends(known, q, throughput)
    if ends:
        def hits(c: Candidate) -> list[tuple[str, int, str]]:
            return [e for e in ends if dict((n, of(c.layout)) for n, of in AXES)[e[0]] == e[1]]

        useful = [c for c in throughput if hits(c)]
        pick = min(useful, key=lambda c: (c.core_s / len(hits(c)), c.core_s))
        words = " and ".join(f"the {end} {name} ({value})" for name, value, end in hits(pick))
        return pick, (f"cold start: no layout of the question should rest on an extrapolation; {pick.label} "
                      f"measures {words} for about {pick.core_s:,.0f} core-s, the least per end")
    if not known.fittable:
        return None
    shapes = {(c.layout.ranks, c.layout.threads) for c in cells}
    pick = min(throughput, key=lambda c: ((c.layout.ranks, c.layout.threads) in shapes, c.core_s))
    what = "cell" if (pick.layout.ranks, pick.layout.threads) in shapes else "new layout"
    return pick, (f"cold start: the step model needs {MIN_CELLS} cells, one with 1 rank (has {len(cells)}); "
                  f"{pick.label} is the cheapest {what} (about {pick.core_s:,.0f} core-s)")


def _cold_epochs(known: Known, q: Question, runs: Sequence[Candidate]) -> tuple[Candidate, str] | None:
    measured = {p.global_batch for p in known.points}
    wanted = {lay.global_batch for lay in q.layouts} & ({c.layout.global_batch for c in runs} | measured)
    if not wanted:
        return None
    ends = sorted({min(wanted), max(wanted)} - measured)
    at_ends = [c for c in runs if c.layout.global_batch in ends]
    if at_ends:
        pick = _cheapest(at_ends)
        return pick, (f"cold start (epochs): the epochs band needs the smallest and the largest global batch of the "
                      f"question ({min(wanted)} and {max(wanted)}; between them it interpolates); {pick.label} "
                      f"is the cheaper end (about {pick.core_s:,.0f} core-s)")
    converged = {p.global_batch for p in known.points if p.converged}
    if not any(len(p.epochs) >= 2 for p in known.points):
        seconds = [c for c in runs if c.layout.global_batch in converged]
        if seconds:
            pick = _cheapest(seconds)
            return pick, (f"cold start (epochs): a second seed at global batch {pick.layout.global_batch} gives the "
                          f"seeds' spread, which the epochs band needs (about {pick.core_s:,.0f} core-s)")
    return None


def _distinct(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Every throughput cell, and the cheapest convergence run of each global batch (seeds are alike before they
    run, so one fantasy serves them all)."""
    runs: dict[int, Candidate] = {}
    for c in candidates:
        if c.kind == Kind.CONVERGENCE:
            gb = c.layout.global_batch
            runs[gb] = min((runs.get(gb, c), c), key=lambda x: (x.core_s, x.seed or 0))
    return [c for c in candidates if c.kind != Kind.CONVERGENCE] + list(runs.values())


def fantasy(known: Known, q: Question, c: Candidate, basis: Basis, epochs: EpochsModel | None) -> Answer:
    """The answer if `c` were measured at its predicted value (the module's docstring)."""
    if c.kind == Kind.CONVERGENCE:
        point = next((p for p in known.points if p.global_batch == c.layout.global_batch), None)
        if epochs is None or (point is not None and not point.converged) or q.kind == TABLE:
            return answer_from(q, basis, epochs)
        predicted = epochs.predict(c.layout.global_batch).epochs or epochs.curve(c.layout.global_batch)
        return answer_from(q, basis, known.with_seed(c.layout.global_batch, predicted).epochs())
    value = rate(basis, q, c.layout).value
    if value is None or value <= 0:
        return answer_from(q, basis, epochs)
    noise = statistics.median(cell.cv for cell in known.cells)
    after = known.with_cell(Cell(c.layout, value, noise))
    return answer_from(q, after.basis(FANTASY_RESAMPLES), epochs)


def by_value(known: Known, q: Question, candidates: Sequence[Candidate], answer: Answer) -> Choice:
    """The cell whose fantasy shrinks the answer's objective most per estimated core-second."""
    basis = known.basis(FANTASY_RESAMPLES)
    epochs = known.epochs() if q.uses_epochs else None
    if basis is None:
        return _fallback(known, q, answer, candidates, f"no fantasy without a fit ({known.fittable})")
    ref = answer_from(q, basis, epochs)
    scored = []
    for c in _distinct(candidates):
        after = fantasy(known, q, c, basis, epochs)
        shrink = ref.objective - after.objective
        scored.append((shrink / c.core_s, shrink, after, c))
    scored.sort(key=lambda s: (-s[0], s[3].core_s))
    per, shrink, after, pick = scored[0]
    if shrink <= MIN_SHRINK:
        return _fallback(known, q, answer, candidates, "no cell left is expected to narrow the answer")
    what = "the answer's interval" if q.kind == FASTEST else "the table's intervals (summed widths)"
    runner = (f"; next best {scored[1][3].label} at {scored[1][0] / per:.0%} of its value per core-s"
              if len(scored) > 1 and scored[1][0] > 0 else "")
    return Choice(pick, f"expected to narrow {what} from {_objective_text(q, ref)} to {_objective_text(q, after)} "
                        f"for about {pick.core_s:,.0f} core-s: the most per core-second of {len(scored)} "
                        f"cell(s){runner}", answer, shrink)


def _objective_text(q: Question, a: Answer) -> str:
    return relative_text(a.width) if q.kind == FASTEST else f"{a.objective:.3f}"


def _fallback(known: Known, q: Question, answer: Answer, candidates: Sequence[Candidate], why: str) -> Choice:
    """The cheapest cell of a layout that may still be the answer (or of its global batch); stop without one."""
    if answer.value is None:
        pick = _cheapest(candidates)
        return Choice(pick, f"{why}; no answer yet ({answer.why}): {pick.label} is the cheapest cell left", answer)
    open_ = answer.contenders
    related = [c for c in candidates if any(
        (c.kind == Kind.THROUGHPUT and (lay.ranks, lay.threads, lay.local_batch) ==
         (c.layout.ranks, c.layout.threads, c.layout.local_batch))
        or (c.kind == Kind.CONVERGENCE and q.kind == FASTEST and q.uses_epochs
            and lay.global_batch == c.layout.global_batch) for lay in open_)]
    if not related:
        stop = Choice(None, f"{why}: every layout that may still be the answer is measured", answer,
                      stop=NOTHING_TEACHES)
        return confirm(known, q, answer, candidates, stop.reason) or stop
    pick = _cheapest(related)
    return Choice(pick, f"{why} (fantasies); {pick.label} is the cheapest cell of a layout that may still be the "
                        "answer", answer)
