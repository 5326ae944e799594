"""Replay on a committed folder measured in full (results/example-classifier: 6 throughput cells, 12
convergence runs): the policy chooses, the record is read as if measured now. Deterministic: arithmetic on
the records only (pure: no Ray, no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core.adaptive import replay as rp
from orchestrator.core.adaptive.answer import FASTEST, TABLE, Known, answer_of
from orchestrator.core.measured.convergence import convergence_by_batch
from orchestrator.core.tabulate.time_to_train import fastest, layout_times
from orchestrator.io.store import load_results

FOLDER = Path(__file__).resolve().parents[2] / "results" / "example-classifier"


@pytest.fixture(scope="module")
def folder():
    res = load_results(FOLDER)
    setting = rp.setting_of(res.spec, res.derived.samples_per_epoch, res.topology, res.environment.precision_chosen)
    return res, setting


def test_the_full_grids_answer_is_the_reports_fastest_layout(folder):
    res, s = folder
    q = rp.question_of(res.records, FASTEST, s)
    full = answer_of(Known.of(res.records), q)
    best, _ = fastest(layout_times(res.records, res.derived, convergence_by_batch(res.records)))
    assert best is not None and full.layout is not None
    assert (full.layout.ranks, full.layout.threads, full.layout.local_batch) == tuple(best.point)
    assert full.value == pytest.approx(best.hours)
    assert full.low < full.value < full.high and q.uses_epochs and len(q.layouts) == 6


def test_the_adaptive_policy_stops_on_its_width_with_the_full_grids_answer(folder):
    res, s = folder
    q = rp.question_of(res.records, FASTEST, s)
    full = answer_of(Known.of(res.records), q)
    t = rp.replay(res.records, q, s, rp.adaptive_policy(target_width=0.3), rp.ADAPTIVE)
    keys = [step.key for step in t.steps[1:]]
    # the cold start: a 1-rank cell, the ends of the axes, a third layout; the ends of the global batches and
    # a second seed; then value per core-second; the confirmation of the answer's global batch before the stop
    assert keys[:6] == ["r1-t2-b32", "r2-t1-b128", "r1-t1-b32", "conv-g32-s0", "conv-g256-s0", "conv-g32-s1"]
    assert t.steps[7].reason.startswith("expected to narrow the answer's interval")
    assert keys[-1] == "conv-g128-s0" and t.steps[-1].reason.startswith("confirming the answer before the stop")
    assert t.stop.startswith("the answer's interval is narrow enough")
    last = t.steps[-1]
    assert last.answer.layout == full.layout and last.answer.value == pytest.approx(full.value)
    assert rp.covered(last.answer, full) and last.answer.width <= 0.3
    assert last.core_s < 0.75 * rp.replay(res.records, q, s, rp.grid_policy(res.records), rp.GRID).steps[-1].core_s
    assert {c.key for c in t.skipped} == {r.key for r in rp.measured_items(res.records)} - set(keys)


def test_a_budget_stops_the_replay_before_a_trial_that_would_not_fit(folder):
    res, s = folder
    q = rp.question_of(res.records, FASTEST, s)
    t = rp.replay(res.records, q, s, rp.adaptive_policy(budget_s=40.0), rp.ADAPTIVE)
    assert t.stop.startswith("budget spent:")
    spent = sum(float(r.wall_s or 0) for r in res.records if r.ok and r.kind in ("peak", "allreduce"))
    spent += sum(float(res.records.by_key()[st.key].wall_s or 0) for st in t.steps[1:])
    assert spent <= 40.0 + max(float(res.records.by_key()[st.key].wall_s or 0) for st in t.steps[1:])


def test_the_baselines_orders(folder):
    res, s = folder
    q = rp.question_of(res.records, TABLE, s)
    grid = rp.replay(res.records, q, s, rp.grid_policy(res.records), rp.GRID)
    assert [st.key for st in grid.steps[1:]] == [r.key for r in rp.measured_items(res.records)]
    one = rp.replay(res.records, q, s, rp.random_policy(res.records, 3), rp.RANDOM)
    again = rp.replay(res.records, q, s, rp.random_policy(res.records, 3), rp.RANDOM)
    assert [st.key for st in one.steps] == [st.key for st in again.steps] != [st.key for st in grid.steps]
    cheapest = rp.replay(res.records, q, s, rp.cheapest_policy, rp.CHEAPEST)
    assert cheapest.steps[1].reason.startswith("the cheapest estimated cell")
    assert all(st.core_s <= nxt.core_s for st, nxt in zip(cheapest.steps, cheapest.steps[1:]))
    assert grid.steps[-1].core_s == pytest.approx(cheapest.steps[-1].core_s)


def test_costs_are_estimated_before_the_trial_and_counted_as_recorded(folder):
    res, s = folder
    assert s.node_cores == 2 and s.isolation == "node" and s.run_costs is not None
    eta, work = rp.estimate(res.records, s)
    record = res.records.by_key()["r1-t1-b32"]
    c = rp.candidate(record, eta.expected_s(work["r1-t1-b32"]), s)
    assert c.cores == 2                          # a timing trial keeps its node under node isolation
    assert c.expected_s != pytest.approx(record.wall_s)
    assert rp.actual_core_s(record, s) == pytest.approx(record.wall_s * 2)
    run = res.records.by_key()["conv-g64-s0"]
    assert rp.held_cores(run, s) == run.ranks * run.threads_per_rank      # a convergence run packs


def test_the_table_question_skips_the_convergence_runs(folder):
    res, s = folder
    q = rp.question_of(res.records, TABLE, s)
    t = rp.replay(res.records, q, s, rp.adaptive_policy(), rp.ADAPTIVE)
    kinds = {res.records.by_key()[st.key].kind for st in t.steps[1:]}
    assert kinds == {"throughput"}
    assert t.stop.endswith("every layout that may still be the answer is measured")
    assert all(c.kind == "convergence" for c in t.skipped) and len(t.skipped) == 12
