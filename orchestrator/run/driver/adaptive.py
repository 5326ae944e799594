"""An adaptive sweep on Ray: the GEMM peaks and the all-reduce calibration first (cheap, and every interval
rests on them), then one trial at a time, each chosen from the records so far by the pure core
(`orchestrator.core.adaptive.policy.decide`, the code a replay runs), until it stops: the budget spent, the
answer's interval narrow enough, or nothing left to teach. The driver only asks and runs; each record keeps
why its trial was chosen (`choice`), and trials run one after another (each choice waits for the last result,
so convergence runs do not pack onto free cores as in a full sweep)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace

from orchestrator.core.adaptive.answer import FASTEST, AdaptiveOptions, Known, Question
from orchestrator.core.adaptive.outcome import AdaptiveOutcome, Measured
from orchestrator.core.adaptive.policy import Candidate, Choice, decide
from orchestrator.core.measured import records as rec
from orchestrator.core.planning.plan import PlannedTrial
from orchestrator.core.predict.capacity import candidate_layouts, layout_from_placement
from orchestrator.io.store import load_results
from orchestrator.run.driver.events import SweepEvents
from orchestrator.run.driver.kinds.base import WorkItem
from orchestrator.run.driver.sweep import SweepRunner
from orchestrator.run.driver.trial import TrialRun

CHOSEN_KINDS = (rec.Kind.THROUGHPUT, rec.Kind.CONVERGENCE)   # the rest run up front, as in a full sweep
TIMING_KINDS = (rec.Kind.THROUGHPUT, rec.Kind.PEAK, rec.Kind.ALLREDUCE)


class AdaptiveRunner(SweepRunner):
    """A `SweepRunner` whose trials after the calibration are chosen one at a time (the module says how)."""

    def __init__(self, *args, adaptive: AdaptiveOptions, ccl_available: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.adaptive, self.ccl_available = adaptive, ccl_available
        self.choices: dict[str, Choice] = {}
        self.outcome: AdaptiveOutcome | None = None

    # --- what the core is asked with -------------------------------------------------------------------
    def question(self) -> Question:
        """The question over the sweep's own grid, or over the target topology's layouts on `nodes` nodes."""
        spec, plan, a = self.spec, self.plan, self.adaptive
        uses_epochs = a.question == FASTEST and self.context.convergence and bool(plan.convergence)
        spe = self.sweep.facts.samples.value
        if a.target_topology is None:
            layouts = tuple(layout_from_placement(p.trial.ranks, p.trial.threads_per_rank, p.trial.local_batch,
                                                  p.placement) for p in plan.feasible if p.placement is not None)
            return Question(a.question, layouts, uses_epochs=uses_epochs, samples_per_epoch=spe)
        memory = self.sweep.facts.memory
        found = candidate_layouts(spec, a.target_topology, a.nodes, plan.local_batches, memory.need_mib,
                                  self.ccl_available, memory.library_mib)
        layouts = tuple(layout_from_placement(r, t, b, placement) for r, t, b, placement in found)
        return Question(a.question, layouts, uses_epochs=uses_epochs, same_machine=False, samples_per_epoch=spe)

    def _held_cores(self, item: WorkItem) -> int:
        t, placement = item.planned.trial, item.planned.placement
        if item.KIND in TIMING_KINDS and self.spec.measure.isolation == "node" and placement is not None:
            node = self.plan.topology.nodes[0].usable_cores(self.spec.constraints.hyperthreads)
            return node * max(placement.nodes_used, 1)
        return t.ranks * t.threads_per_rank

    def candidate(self, item: WorkItem) -> Candidate:
        t, placement = item.planned.trial, item.planned.placement
        assert placement is not None   # only feasible trials become work items
        work = self.eta.work.get(item.key) if self.eta is not None else None
        expected = self.eta.expected_s(work) if self.eta is not None and work is not None else 1.0
        return Candidate(item.key, item.KIND, layout_from_placement(t.ranks, t.threads_per_rank, t.local_batch,
                                                                    placement),
                         expected, self._held_cores(item), getattr(item, "seed", None))

    # --- the loop ---------------------------------------------------------------------------------------
    def chosen_why(self, key: str) -> str | None:
        choice = self.choices.get(key)
        return choice.reason if choice is not None else None

    def _execute(self, todo: list[WorkItem], events: SweepEvents, stop: threading.Event) -> None:
        started = time.monotonic()
        upfront = [item for item in todo if item.KIND not in CHOSEN_KINDS]
        if upfront:
            super()._execute(upfront, events, stop)
        left = {item.key: item for item in todo if item.KIND in CHOSEN_KINDS}
        q = self.question()
        while True:
            elapsed = time.monotonic() - started
            choice = self.decide(q, left, elapsed)
            if choice.candidate is None:
                self.outcome = self._outcome(choice, left)
                return
            item = left.pop(choice.candidate.key)
            self.choices[item.key] = choice
            super()._execute([item], events, stop)

    def decide(self, q: Question, left: dict[str, WorkItem], elapsed_s: float) -> Choice:
        records = load_results(self.options.results).records
        budget = self.adaptive.budget_s
        return decide(Known.of(records), q, [self.candidate(i) for i in left.values()],
                      target_width=self.adaptive.target_width,
                      budget_left_s=None if budget is None else budget - elapsed_s)

    def _outcome(self, choice: Choice, left: dict[str, WorkItem]) -> AdaptiveOutcome:
        measured = [Measured(key, c.reason) for key, c in self.choices.items()]
        return AdaptiveOutcome(choice.answer, choice.reason, measured, [self.candidate(i) for i in left.values()])

    def conclude(self, todo: list[WorkItem]) -> AdaptiveOutcome:
        """The outcome; when nothing ran (every trial already recorded), the answer from the records."""
        if self.outcome is None:
            left = {item.key: item for item in todo if item.KIND in CHOSEN_KINDS}
            self.outcome = self._outcome(self.decide(self.question(), left, 0.0), left)
        return self.outcome

    def _trial(self, item: WorkItem, p: PlannedTrial, events: SweepEvents,
               stop: threading.Event) -> tuple[TrialRun, rec.Record | None]:
        run, record = super()._trial(item, p, events, stop)
        choice = self.choices.get(item.key)
        if record is None or choice is None:
            return run, record
        width = choice.answer.width
        section = rec.ChoiceSection(reason=choice.reason, expected_shrink=choice.expected_shrink,
                                    estimated_core_s=round(choice.candidate.core_s, 3) if choice.candidate else None,
                                    width_before=None if math.isinf(width) else round(width, 6))
        return run, replace(record, choice=section)
