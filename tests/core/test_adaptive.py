"""The adaptive sweep's pure core: the answer and its interval, the cold start, the choice by value per
core-second, the stop rules and the reasons, on hand-made cells (pure: no Ray, no torch)."""

from __future__ import annotations

import math

import pytest
from predict_synthetic import BUCKETS, LINKS, cells_from, truth

from orchestrator.core.adaptive import answer as ans
from orchestrator.core.adaptive import policy
from orchestrator.core.adaptive.outcome import Measured, outcome_lines
from orchestrator.core.measured.records import Kind
from orchestrator.core.predict.epochs import BatchPoint
from orchestrator.core.predict.step import Layout

SHAPES = ((1, 1), (1, 2), (2, 1), (2, 2))
LAYOUTS = tuple(Layout(r, t, b, 1, r, "socket" if r > 1 else None) for r, t in SHAPES for b in (8, 32, 128))
MODEL = truth()


NOISE = (0.06, -0.05, 0.02, -0.07, 0.04)      # measured off the true model by this much, in turn


def _known(layouts, points=(), noise=None):
    return ans.Known(tuple(cells_from(MODEL, layouts, noise=noise)), LINKS, BUCKETS, {1: 1.0, 2: 1.9}, {},
                     tuple(points))


def _cand(lay, cost_s=10.0, kind=Kind.THROUGHPUT, seed=None):
    key = f"r{lay.ranks}-t{lay.threads}-b{lay.local_batch}" if kind == Kind.THROUGHPUT else \
        f"conv-g{lay.global_batch}-s{seed}"
    return policy.Candidate(key, kind, lay, cost_s, lay.ranks * lay.threads, seed)


def _per_sample(layouts=LAYOUTS):
    return ans.Question(ans.FASTEST, tuple(layouts), uses_epochs=False)


def test_the_first_cell_is_the_cheapest_with_one_rank():
    q = _per_sample()
    cands = [_cand(lay, cost_s=5.0 if lay.ranks == 2 else 30.0 / lay.threads ** 2) for lay in LAYOUTS]
    choice = policy.decide(_known([]), q, cands)
    assert choice.candidate is not None and choice.candidate.layout.ranks == 1
    assert choice.candidate.layout.threads == 2          # 7.5 s × 2 cores, against 30 s × 1 core for 1 thread
    assert choice.reason.startswith("cold start: the step model needs a 1-rank cell")
    assert choice.answer.value is None and "too few measured cells" in choice.answer.why


def test_the_cold_start_measures_the_ends_of_every_axis_least_per_end():
    q = _per_sample()
    have = [Layout(1, 1, 8)]
    cands = [_cand(lay, cost_s=12.0 / (lay.ranks * lay.threads)) for lay in LAYOUTS if lay not in have]
    choice = policy.decide(_known(have), q, cands)
    # 2×2×128 is the only cell at three missing ends (largest ranks, threads and batch) for the same cost
    assert (choice.candidate.layout.ranks, choice.candidate.layout.threads, choice.candidate.layout.local_batch) \
        == (2, 2, 128)
    assert "the largest ranks (2) and the largest threads per rank (2) and the largest local batch (128)" \
        in choice.reason
    assert policy.missing_ends(_known([*have, LAYOUTS[-1]]), q, cands) == []


def test_epochs_cold_start_takes_the_ends_of_the_global_batches_then_a_second_seed():
    layouts = [lay for lay in LAYOUTS if lay.local_batch in (8, 128)]
    q = ans.Question(ans.FASTEST, tuple(layouts), samples_per_epoch=1024)
    runs = [_cand(Layout(1, 1, gb), 10.0 + gb / 100, Kind.CONVERGENCE, seed) for gb in (8, 16, 128, 256)
            for seed in (0, 1)]
    first = policy.decide(_known(layouts), q, runs)
    assert first.candidate.key == "conv-g8-s0" and "the cheaper end" in first.reason
    assert first.answer.value is None and "no global batch has converged" in first.answer.why
    one_each = [BatchPoint(8, (2.0,)), BatchPoint(256, (5.0,))]
    second = policy.decide(_known(layouts, one_each), q, [r for r in runs if r.key not in ("conv-g8-s0",
                                                                                           "conv-g256-s0")])
    assert second.candidate.key == "conv-g8-s1" and "second seed at global batch 8" in second.reason


def test_the_cell_whose_measurement_shrinks_the_answer_most_is_chosen():
    q = _per_sample()
    fastest, slowest = LAYOUTS[-1], Layout(1, 1, 32)           # 2×2×128 and a 1×1 cell inside the data
    have = [lay for lay in LAYOUTS if lay not in (fastest, slowest)]
    known = _known(have, noise=NOISE)
    before = ans.answer_of(known, q)
    assert before.layout == fastest and not any(r.measured for r in before.rows if r.layout == fastest)
    choice = policy.decide(known, q, [_cand(slowest), _cand(fastest)])
    assert choice.candidate.layout == fastest and choice.expected_shrink > 0
    assert choice.reason.startswith("expected to narrow the answer's interval from ±")
    assert "core-s: the most per core-second of 2 cell(s)" in choice.reason
    # exact cells leave nothing to learn: the model predicts 2×2×128 within the cells' noise already
    exact = policy.decide(_known(have), q, [_cand(slowest), _cand(fastest)])
    assert exact.expected_shrink is None and exact.reason.startswith("no cell left is expected to narrow")


def test_a_measured_layout_answers_for_itself_within_its_noise():
    q = _per_sample()
    a = ans.answer_of(_known(LAYOUTS), q)
    row = next(r for r in a.rows if r.layout == a.layout)
    assert row.measured and a.layout == LAYOUTS[-1]
    assert a.value == pytest.approx(1 / MODEL.samples_per_s(LAYOUTS[-1]))
    assert a.width == pytest.approx(2 * 0.01, rel=0.05)         # cv 1%: [v/1.01, v·1.01]
    assert a.low <= a.value <= a.high


def test_stop_rules_and_their_reasons():
    q = _per_sample()
    known = _known(LAYOUTS)
    done = policy.decide(known, q, [])
    assert done.stopped and done.stop == policy.ALL_MEASURED and "every planned cell is measured" in done.reason
    extra = _cand(Layout(2, 2, 64, 1, 2, "socket"), cost_s=120.0)
    broke = policy.decide(known, q, [extra], budget_left_s=30.0)
    assert broke.stopped and broke.stop == policy.BUDGET
    assert broke.reason == ("budget spent: 30 s left, and the quickest cell left, r2-t2-b64, needs about 120 s")
    narrow = policy.decide(known, q, [extra], target_width=0.5)
    assert narrow.stopped and narrow.stop == policy.NARROW and "narrow enough: ±1.0%, target ±25.0%" in narrow.reason
    # both stops hold: the width leads (the answer is sure enough), the budget is said beside it
    both = policy.decide(known, q, [extra], target_width=0.5, budget_left_s=30.0)
    assert both.stopped and both.stop == policy.NARROW
    assert both.reason == ("the answer's interval is narrow enough: ±1.0%, target ±25.0% (and the budget spent: "
                           "30 s left, and the quickest cell left, r2-t2-b64, needs about 120 s)")
    wide = policy.decide(known, q, [extra], target_width=0.001, budget_left_s=30.0)
    assert wide.stopped and wide.stop == policy.BUDGET and wide.reason.startswith("budget spent: 30 s left")


def test_a_narrow_answer_is_confirmed_on_its_own_layout_before_the_stop():
    q = _per_sample()
    have = [lay for lay in LAYOUTS if lay != LAYOUTS[-1]]
    choice = policy.decide(_known(have), q, [_cand(LAYOUTS[-1])], target_width=5.0)
    assert choice.candidate is not None and choice.candidate.layout == LAYOUTS[-1]
    assert choice.reason.startswith("confirming the answer before the stop (the answer's interval is narrow enough")


def test_the_table_question_is_as_wide_as_its_widest_row():
    q = ans.Question(ans.TABLE, LAYOUTS)
    have = [lay for lay in LAYOUTS if lay != Layout(2, 2, 32, 1, 2, "socket")]
    a = ans.answer_of(_known(have), q)
    assert len(a.rows) == len(LAYOUTS) and a.width == max(r.width for r in a.rows)
    assert a.objective == pytest.approx(sum(min(r.width, ans.WIDTH_CAP) for r in a.rows))
    assert not next(r for r in a.rows if r.layout.local_batch == 32 and r.layout.ranks == 2
                    and r.layout.threads == 2).measured


def test_time_to_train_joins_epochs_and_throughput_and_is_the_smallest():
    layouts = [lay for lay in LAYOUTS if lay.local_batch in (8, 128)]
    q = ans.Question(ans.FASTEST, tuple(layouts), samples_per_epoch=3600)
    points = [BatchPoint(gb, (e, e * 1.1)) for gb, e in ((8, 2.0), (16, 2.1), (128, 3.0), (256, 4.0))]
    a = ans.answer_of(_known(layouts, points), q)
    hours = {r.layout: r.value for r in a.rows}
    best = min(hours, key=lambda lay: hours[lay])
    assert a.layout == best and a.value == hours[best] and a.unit == "h"
    # a measured batch: its olympic mean (of two seeds: their mean) × samples ÷ samples/s, in hours
    mean = {8: 2.1, 16: 2.205, 128: 3.15, 256: 4.2}[best.global_batch]
    assert a.value == pytest.approx(mean * 3600 / MODEL.samples_per_s(best) / 3600)
    assert a.low == min(r.low for r in a.rows) and a.high == min(r.high for r in a.rows)


def test_no_seed_spread_means_no_epochs_interval():
    layouts = [lay for lay in LAYOUTS if lay.local_batch in (8, 128)]
    q = ans.Question(ans.FASTEST, tuple(layouts), samples_per_epoch=3600)
    a = ans.answer_of(_known(layouts, [BatchPoint(8, (2.0,)), BatchPoint(256, (4.0,))]), q)
    assert a.value is not None and math.isinf(a.width) and a.low == 0.0
    assert any("no two seeds of one global batch yet" in r.why for r in a.rows)


def test_what_a_stopped_sweep_prints():
    a = ans.answer_of(_known(LAYOUTS), _per_sample())
    skipped = [_cand(Layout(1, 1, 64), cost_s=30.0), _cand(Layout(2, 1, 64, 1, 2, "socket"), cost_s=90.0)]
    lines = outcome_lines(a, "budget spent", [Measured("r1-t1-b8", "cold start")], skipped)
    assert lines[0].startswith("fastest per sample (no convergence runs): 2×2×128, ")
    assert lines[1:4] == ["stopped: budget spent", "measured 1 trial(s):", "  r1-t1-b8: cold start"]
    assert lines[4] == "skipped 2 cell(s), which would have cost about 2 min (210 core-s) more:"
    assert lines[5:] == ["  r1-t1-b64: about 30 s (30 core-s)", "  r2-t1-b64: about 1 min 30 s (180 core-s)"]


def test_where_the_gemm_peaks_say_the_machine_was_busy_no_prediction_bounds_a_layout():
    q = _per_sample()
    have = [lay for lay in LAYOUTS if lay.local_batch != 32]
    known = ans.Known(tuple(cells_from(MODEL, have, noise=NOISE)), LINKS, BUCKETS, {1: 1.0, 2: 1.9},
                      {(1, 1): 100.0, (1, 2): 80.0}, ())
    a = ans.answer_of(known, q)
    unmeasured = [r for r in a.rows if not r.measured]
    assert len(unmeasured) == 4 and all(r.low == 0.0 and math.isinf(r.high) for r in unmeasured)
    assert all("the scaling evidence is disturbed (the GEMM peak on 1×2" in r.why for r in unmeasured)
    # each layout without an interval counts WIDTH_CAP in the objective: measuring any of them is progress
    assert a.objective >= 4 * ans.WIDTH_CAP and a.low == 0.0
    choice = policy.decide(known, q, [_cand(r.layout) for r in unmeasured])
    assert choice.candidate is not None and choice.expected_shrink >= ans.WIDTH_CAP * 0.99
