"""Adaptive sweeps: measure only what a question needs, one trial at a time, and stop when the answer is sure
enough. Pure: the live sweep (`orchestrator.run.driver.adaptive`) and a replay of a folder measured in full call the
same code, so what a replay shows is what a live sweep would have done.

- `answer`: the question (`Question`: the fastest time-to-train over the target's layouts, or the scalability
  table), what is measured so far (`Known`, from the records; a fantasy is a Known with one cell more) and the
  answer with its interval (`answer_of`), from `orch predict`'s models (`predict.interval.predict_cell`, the
  epochs model) and the measured cells themselves;
- `policy`: which trial next, or why stop (`decide`): the stop rules, the cold start, the expected shrink of the
  answer's interval per estimated core-second (a fantasy refit per candidate), and the reason in words;
- `replay`: the policy, and three baselines, run against a folder whose every cell was measured (the record is
  the measurement), with what each step spent and answered;
- `outcome`: what a stopped sweep prints (the answer, the trials measured and why, the cells skipped and their
  cost), and the budget's duration syntax.

    known = Known.of(records)                                 # the records so far
    choice = decide(known, question, candidates, target_width=0.2, budget_left_s=600)
    choice.candidate, choice.reason                           # the next trial and why (None: stop, and why)

With nothing measured, the first trial is the cheapest 1-rank cell:

>>> from orchestrator.core.adaptive.answer import FASTEST, Known, Question
>>> from orchestrator.core.adaptive.policy import Candidate, decide
>>> from orchestrator.core.predict.step import Layout
>>> from orchestrator.core.measured.records import Kind
>>> layouts = (Layout(1, 1, 8), Layout(1, 2, 8), Layout(2, 1, 8, 1, 2, "socket"))
>>> cells = [Candidate(f"r{x.ranks}-t{x.threads}-b8", Kind.THROUGHPUT, x, 20.0 / x.threads, x.ranks * x.threads)
...          for x in layouts]
>>> choice = decide(Known(()), Question(FASTEST, layouts, uses_epochs=False), cells)
>>> choice.candidate.key, choice.reason
('r1-t1-b8', 'cold start: the step model needs a 1-rank cell; r1-t1-b8 is the cheapest (about 20 core-s)')
"""
