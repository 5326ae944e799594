"""One cell's prediction and its interval where an axis has one measured level: the scaling evidence by hand,
the bounds and what sets each end, and the validation that prints, for each held-out cell, what `orch predict`
would from the training cells alone (pure: no Ray, no torch)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from predict_synthetic import BUCKETS, GRID, LINKS, TRUE, cells_from

from orchestrator.core.predict import evidence, interval, validate
from orchestrator.core.predict.step import Cell, Layout, StepModel

GEMM = {(1, 1): 100.0, (1, 2): 190.0, (2, 1): 180.0, (1, 4): 360.0, (2, 2): 350.0, (4, 1): 340.0}


def test_evidence_by_hand():
    cells = [Cell(Layout(1, 1, 8), 100.0), Cell(Layout(1, 2, 8), 160.0), Cell(Layout(2, 1, 8, 1, 2, "socket"), 170.0)]
    ev = evidence.evidence_of(cells, GEMM)
    assert ev.worst[evidence.THREADS].per_doubling == pytest.approx(0.8)       # 160 / 100 / 2
    assert ev.worst[evidence.RANKS].per_doubling == pytest.approx(0.85)
    assert ev.worst[evidence.ANY].pair == "1×2×8 over 1×1×8"
    assert ev.thread_ratio == pytest.approx(0.8 / 0.95)                         # step ÷ GEMM efficiency
    assert ev.ratio_low == pytest.approx(0.8 / 0.95)
    # two doublings of the threads at 0.8 each; the GEMM peak of 1×4 (0.9) × the lowest ratio (0.842) is higher
    low, why = ev.low_efficiency(Layout(1, 4, 8), Layout(1, 1, 8))
    assert low == pytest.approx(0.64) and "0.80 per doubling" in why
    # no pair grows the ranks beyond 2: the threads' pair stands in, with the cross-axis margin
    only_threads = evidence.evidence_of(cells[:2], GEMM)
    low, why = only_threads.low_efficiency(Layout(2, 1, 8), Layout(1, 1, 8))
    assert low == pytest.approx(0.8 * evidence.CROSS_AXIS) and "no pair grows the ranks" in why
    assert evidence.disturbed_by({(1, 1): 26.2, (1, 2): 20.5}).startswith("the GEMM peak on 1×2 (20.5 GFLOP/s)")
    assert evidence.disturbed_by(GEMM) == ""


def _basis(cells, gemm=GEMM, links=LINKS):
    return interval.basis_of(cells, links, BUCKETS, {1: 1.0, 2: 1.9, 4: 3.6}, gemm)


def _threads_one_level():
    """1- and 2-rank cells at one thread from a known model: the threads axis has one measured level."""
    truth = StepModel(TRUE, LINKS, BUCKETS)
    return cells_from(truth, [g for g in GRID if g.threads == 1 and g.ranks <= 2])


def test_one_thread_level_gets_a_bounded_interval_that_says_what_set_each_end():
    basis = _basis(_threads_one_level())
    p = interval.predict_cell(basis, Layout(1, 2, 16))
    assert p.no_interval == "" and p.low < p.value < p.high
    measured = next(c for c in basis.cells if c.layout == Layout(1, 1, 16))
    # high end: linear scaling from the 1×1 cell at the same batch (its noise on top); low end: the rank pairs'
    # worst efficiency × the cross-axis margin, or the GEMM's, whichever is lower
    assert p.high == pytest.approx(2 * measured.samples_per_s * (1 + measured.cv), rel=1e-9)
    assert p.high_why.startswith("high end: linear scaling from 1×1×16 (efficiency ≤ 1)")
    assert p.low_why.startswith("low end: ") and "1×1×16 measured" in p.low_why
    assert p.predictor == interval.GEMM_PROXY
    assert any(n.startswith("bounded (no held-out error for the largest threads") for n in p.notes)


def test_the_interval_widens_with_the_distance_from_the_data():
    basis = _basis(_threads_one_level())
    widths = []
    for threads in (2, 4, 8, 16):
        p = interval.predict_cell(basis, Layout(1, threads, 16))
        assert p.low < p.value < p.high
        widths.append(p.high / p.low)
    assert widths == sorted(widths) and widths[-1] > 2 * widths[0]


def test_a_multi_rank_layout_without_calibration_or_multi_rank_cell_falls_to_the_committed_worst():
    """Nothing here bounds the all-reduce 2 ranks add: the low end is the committed folders' worst step
    efficiency per doubling (a 2-rank step its all-reduce dominates), below the thread pair's evidence."""
    truth = StepModel(TRUE, LINKS, BUCKETS)
    single = cells_from(truth, [g for g in GRID if g.ranks == 1 and g.threads <= 2])
    lay = Layout(2, 1, 16, 1, 2, "socket")
    p = interval.predict_cell(_basis(single, links={}), lay)
    assert p.low is not None and p.high is not None and not p.no_interval
    assert p.low < truth.samples_per_s(lay) < p.high
    anchor = next(c.samples_per_s for c in single if c.layout == Layout(1, 1, 16))
    prior = anchor * 2 * evidence.PRIOR_WORST_PER_DOUBLING     # from the anchor measured, less its noise
    assert 0.95 * prior < p.low <= prior
    assert "no all-reduce calibration nor multi-rank cell here bounds" in p.low_why
    # with the calibration, the all-reduce the layout adds lowers the low end, and the note says how much
    calibrated = interval.predict_cell(_basis(single), Layout(2, 1, 16, 1, 2, "socket"))
    assert calibrated.low < calibrated.value < calibrated.high
    assert "with the all-reduce it adds" in calibrated.low_why and "as calibrated, ρ = 1" in calibrated.low_why


def test_without_any_pair_the_committed_folders_stand_in_and_scaling_down_is_bounded_by_linear():
    truth = StepModel(TRUE, LINKS, BUCKETS)
    two_threads = cells_from(truth, [Layout(1, 2, b) for b in (8, 16, 32)])
    basis = _basis(two_threads, gemm={})
    p = interval.predict_cell(basis, Layout(1, 1, 16))
    anchor = next(c for c in two_threads if c.layout.local_batch == 16)
    assert p.low == pytest.approx(anchor.samples_per_s / 2 / (1 + anchor.cv), rel=1e-9)   # linear, downwards
    assert p.low_why.startswith("low end: linear scaling down from 1×2×16")
    assert f"{evidence.PRIOR_WORST_PER_DOUBLING:.2f} per doubling" in p.high_why
    assert any("committed folders" in n for n in p.notes)
    assert p.low < p.value < p.high and math.isfinite(p.high)


def test_the_printed_estimate_of_a_held_out_cell_never_sees_that_cell():
    """The validation's printed estimate and interval come from the training cells alone: changing a held-out
    cell's measurement changes its error, not what is printed for it."""
    truth = StepModel(TRUE, LINKS, BUCKETS)
    cells = cells_from(truth, [g for g in GRID if g.threads <= 2 and g.ranks <= 2 and g.local_batch <= 32])
    show = interval.printer(LINKS, BUCKETS, {1: 1.0, 2: 1.9}, GEMM)

    def printed(cs):
        results = validate.validate_step(cs, LINKS, BUCKETS, {1: 1.0, 2: 1.9}, printer=show,
                                         only=lambda s: s.name == "largest threads (2)")
        return {h.cell.layout: h for h in results[0].held_out}

    before = printed(cells)
    moved = [replace(c, samples_per_s=c.samples_per_s * 3) if c.layout == Layout(1, 2, 16) else c for c in cells]
    after = printed(moved)
    assert after[Layout(1, 2, 16)].printed == before[Layout(1, 2, 16)].printed
    assert before[Layout(1, 2, 16)].inside is True and after[Layout(1, 2, 16)].inside is False


def test_validation_reports_coverage_and_width_per_scheme():
    truth = StepModel(TRUE, LINKS, BUCKETS)
    cells = cells_from(truth, [g for g in GRID if g.threads <= 2 and g.ranks <= 2], [0.01, -0.01, 0.005])
    show = interval.printer(LINKS, BUCKETS, {1: 1.0, 2: 1.9}, GEMM)
    results = {r.scheme: r for r in validate.validate_step(cells, LINKS, BUCKETS, {1: 1.0, 2: 1.9}, printer=show)}
    threads = results["largest threads (2)"]
    assert threads.with_interval == len(threads.held_out) == 10            # 1×2 and 2×2 at 5 batches
    assert threads.inside >= 9 and threads.median_width_pct > 0
    assert threads.printed is not None and math.isfinite(threads.printed.median_abs_pct)
    assert results["leave one cell out"].printed is not None


def test_a_baseline_does_not_predict_a_local_batch_its_base_cell_was_not_measured_at():
    """Four cells of the committed RetinaNet grid (local batch 2, and 1×2 at 16): the baselines win the
    leave-one-cell-out choice on the batch-2 cells, but at local batch 16 their base (1×1) is the batch-2 cell,
    taken as if samples/s did not depend on the batch: 2×1×16 was printed 18.3 [12.5–18.3] (measured 35.2)."""
    from orchestrator.core.predict.fit import basis_from_records
    from orchestrator.io.store import load_results

    folder = load_results(Path(__file__).resolve().parents[2] / "results" / "example-predict-retinanet")
    keep = {"r1-t1-b2", "r1-t2-b2", "r2-t1-b2", "r1-t2-b16"}
    basis = basis_from_records(r for r in folder.records if r.kind in ("peak", "allreduce") or r.key in keep)
    measured = {c.layout.label: c for c in basis_from_records(folder.records).cells}
    for label in ("2×1×16", "1×1×16", "2×1×8"):
        p = interval.predict_cell(basis, measured[label].layout)
        assert p.predictor == validate.MODEL
        assert p.low is not None and p.high is not None
        assert p.low <= measured[label].samples_per_s <= p.high
    assert interval.predict_cell(basis, measured["2×1×2"].layout).predictor == validate.LINEAR   # its base is there


def test_a_parameter_fitted_at_its_bound_is_said_on_every_row_it_touches():
    from orchestrator.core.predict import comm
    from orchestrator.core.predict.interval import _notes
    from orchestrator.core.predict.step import BOUNDS, Layout, StepModel

    params = {"a_s": 1e-3, "c_s": 1e-4, "sigma": 0.1, "sigma_a": 0.1, "kappa": 0.0, "mu": 0.0,
              "rho": BOUNDS["rho"][1], "gamma": 1.0}
    model = StepModel(params, {"socket": comm.LinkFit("socket", 1e-4, 1e-9, 8, 0.0)}, (1 << 20,))
    assert model.at_bound() == {"rho": BOUNDS["rho"][1]}         # γ = 1 is the plain sum's form, not a bound hit
    two = " ".join(_notes(model, Layout(2, 1, 16, 1, 2, "socket")))
    assert "ρ (the all-reduce's cost in a step ÷ alone) fitted at its bound (8)" in two and "memory bandwidth" in two
    assert "fitted at its bound" not in " ".join(_notes(model, Layout(1, 2, 16)))    # one rank: ρ plays no part
