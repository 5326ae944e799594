"""The prediction models' arithmetic against hand-computed cases, and their fits recovering known
parameters from synthetic data (pure: no Ray, no torch)."""

from __future__ import annotations

import math

import pytest
from predict_synthetic import BUCKETS, GRID, LINKS, TRUE, cells_from, truth

from orchestrator.core.predict import comm, epochs, step
from orchestrator.core.predict.step import Layout

# --- all-reduce ---------------------------------------------------------------------------------------

def test_ring_allreduce_by_hand():
    # 8 ranks, 16 MiB, α = 20 µs, β = 0.5 ns/byte: 14·20e-6 + 14/8·16·2^20·0.5e-9
    expected = 14 * 20e-6 + 14 / 8 * 16 * 2**20 * 0.5e-9
    assert comm.ring_allreduce_s(8, 16 * 2**20, 20e-6, 0.5e-9) == pytest.approx(expected)
    assert comm.ring_allreduce_s(1, 16 * 2**20, 20e-6, 0.5e-9) == 0.0


def test_ddp_buckets_follow_first_bucket_and_cap():
    assert comm.ddp_buckets(0) == []
    assert comm.ddp_buckets(1000) == [1000]
    sizes = comm.ddp_buckets(100 * 2**20)
    assert sizes[0] == 2**20 and all(s <= 25 * 2**20 for s in sizes) and sum(sizes) == 100 * 2**20
    assert len(sizes) == 5     # 1 + 25 + 25 + 25 + 24


def _calibration(link, alpha, beta, ranks=(2, 4)):
    return [comm.Sample(link, n, m, comm.ring_allreduce_s(n, m, alpha, beta))
            for n in ranks for m in (4096 * 4**k for k in range(8))]


def test_link_fit_recovers_alpha_and_beta():
    fit = comm.fit_link("socket", _calibration("socket", 15e-6, 0.2e-9))
    assert fit.alpha_s == pytest.approx(15e-6, rel=1e-3)
    assert fit.beta_s_per_byte == pytest.approx(0.2e-9, rel=1e-3)
    assert fit.bandwidth_gb_per_s == pytest.approx(5.0, rel=1e-3)
    assert fit.rms_log_error < 1e-6


def test_uncalibrated_link_borrows_a_faster_class_and_says_so():
    fits = comm.fit_links(_calibration("socket", 15e-6, 0.2e-9))
    fit, note = comm.link_for("nodes", fits)
    assert fit is fits["socket"] and "across nodes were not calibrated" in note and "optimistic" in note
    assert comm.link_for("socket", fits) == (fits["socket"], "")
    assert comm.link_for("socket", {})[0] is None


def test_fit_link_refuses_a_class_without_points():
    with pytest.raises(ValueError, match="no calibration points for link class 'nodes'"):
        comm.fit_link("nodes", _calibration("socket", 1e-5, 1e-9))


# --- step time ----------------------------------------------------------------------------------------

def test_step_time_by_hand():
    m = truth()
    lay = Layout(2, 2, 32, 1, 2, "socket")
    compute = (2e-3 * (1 + 0.6) / 2 + 1e-4 * 32 * (1 + 0.15) / 2) * (1 + 0.08)
    comm_s = 1.3 * sum(comm.ring_allreduce_s(2, b, 20e-6, 1e-9) for b in BUCKETS)
    assert m.compute_s(lay) == pytest.approx(compute)
    assert m.comm(lay) == (pytest.approx(comm_s), "")
    assert m.step_s(lay) == pytest.approx((compute**1.6 + comm_s**1.6) ** (1 / 1.6))
    assert m.samples_per_s(lay) == pytest.approx(64 / m.step_s(lay))
    assert m.comm(Layout(1, 4, 32)) == (0.0, "")


def test_fit_recovers_known_parameters():
    fitted = step.fit_step_model(cells_from(truth(), GRID), LINKS, BUCKETS)
    assert fitted.frozen.keys() == {"kappa"} or fitted.frozen.keys() == set()
    for name in ("a_s", "c_s", "sigma", "sigma_a", "mu", "rho", "gamma"):
        assert fitted.params[name] == pytest.approx(TRUE[name], rel=0.02), name
    assert fitted.rms_log_error < 1e-4


def test_kappa_is_fitted_with_three_thread_counts_and_frozen_with_two():
    three = step.fit_step_model(cells_from(truth(), GRID), LINKS, BUCKETS)
    assert "kappa" not in three.frozen
    two = step.fit_step_model(cells_from(truth(), [g for g in GRID if g.threads <= 2]), LINKS, BUCKETS)
    assert two.params["kappa"] == 0.0 and "fewer than 3 thread counts" in two.frozen["kappa"]


def test_parameters_the_cells_cannot_determine_are_frozen_and_said():
    single = [Layout(1, 1, b) for b in (8, 16, 32)]
    fitted = step.fit_step_model(cells_from(truth(), single), LINKS, BUCKETS, thread_prior={1: 1.0, 2: 1.6})
    assert fitted.params["sigma"] == pytest.approx(0.25)     # from the GEMM peak: 2 / 1.6 − 1
    assert "GEMM peak (1.60× on 2 threads)" in fitted.frozen["sigma"]
    assert fitted.params["gamma"] == 1.0 and "no multi-rank cell" in fitted.frozen["gamma"]
    assert fitted.params["mu"] == 0.0 and "socket sharing not modelled" in fitted.frozen["mu"]
    one_batch = step.fit_step_model(cells_from(truth(), [Layout(1, 1, 16), Layout(1, 2, 16)]), LINKS, BUCKETS)
    assert one_batch.params["a_s"] == 0.0 and "one local batch only" in one_batch.frozen["a_s"]
    assert one_batch.params["sigma_a"] == one_batch.params["sigma"] and "tied to σ" in one_batch.frozen["sigma_a"]


def test_without_calibration_overlap_is_not_fitted():
    fitted = step.fit_step_model(cells_from(truth(), GRID), {}, BUCKETS)
    assert fitted.params["gamma"] == 1.0 and "no all-reduce calibration" in fitted.frozen["gamma"]
    assert fitted.params["rho"] == 1.0 and "all-reduce as calibrated" in fitted.frozen["rho"]


def test_fit_needs_a_cell():
    with pytest.raises(ValueError, match="no measured cell"):
        step.fit_step_model([], LINKS, BUCKETS)


# --- epochs -------------------------------------------------------------------------------------------

def test_critical_batch_fit_recovers_known_parameters():
    pts = [epochs.BatchPoint(b, tuple(epochs.critical_batch_epochs(b, 3.0, 500.0) * f for f in (0.97, 1.0, 1.03)))
           for b in (64, 128, 256, 512, 1024)]
    m = epochs.fit_epochs(pts)
    assert m.e_min == pytest.approx(3.0, rel=0.01) and m.b_crit == pytest.approx(500.0, rel=0.02)
    assert m.seed_sd_log == pytest.approx(math.sqrt(((math.log(0.97) ** 2 + math.log(1.03) ** 2) / 3)
                                                    - ((math.log(0.97) + math.log(1.03)) / 3) ** 2), rel=1e-6)


def test_epochs_prediction_is_measured_interpolated_or_extrapolated():
    pts = [epochs.BatchPoint(4, (2.0, 2.5, 3.0)), epochs.BatchPoint(8, (3.0, 3.5, 4.0)),
           epochs.BatchPoint(16, (5.0, 6.0, 7.0))]
    m = epochs.fit_epochs(pts)
    at8 = m.predict(8)
    assert (at8.status, at8.epochs) == (epochs.MEASURED, 3.5)
    mid = m.predict(12)
    assert mid.status == epochs.INTERPOLATED and 3.5 < mid.epochs < 6.0 and mid.low < mid.epochs < mid.high
    far = m.predict(64)
    assert far.status == epochs.EXTRAPOLATED and far.note == "extrapolated beyond global batch 16"
    assert m.predict(2).note == "extrapolated below global batch 4"


def test_a_batch_that_did_not_converge_stops_predictions_at_and_beyond_it():
    pts = [epochs.BatchPoint(4, (2.0,)), epochs.BatchPoint(8, (3.0,)), epochs.BatchPoint(16, (), max_epochs=10.0)]
    m = epochs.fit_epochs(pts)
    assert m.predict(8).epochs == 3.0
    beyond = m.predict(32)
    assert beyond.epochs is None and beyond.status == epochs.NOT_CONVERGED
    assert beyond.note == "global batch 16 did not converge by 10 epochs"


def test_one_global_batch_freezes_the_critical_batch():
    m = epochs.fit_epochs([epochs.BatchPoint(32, (4.0, 4.0, 4.0))])
    assert math.isinf(m.b_crit) and "one global batch only (32)" in m.frozen_why
    assert m.predict(64).epochs == pytest.approx(4.0)


def test_fit_recovers_every_term_with_usl_contention():
    """κ ≠ 0 with 3 thread counts (1, 2, 4), and μ, ρ, γ away from their neutral values: every term recovered."""
    truth_k = step.StepModel({**TRUE, "kappa": 0.02, "mu": 0.15, "rho": 1.8, "gamma": 2.5}, LINKS, BUCKETS)
    fitted = step.fit_step_model(cells_from(truth_k, GRID), LINKS, BUCKETS, starts=3)
    assert fitted.frozen == {} and fitted.solver_note == ""
    for name in step.PARAMS:
        assert fitted.params[name] == pytest.approx(truth_k.params[name], rel=0.02), name


def test_kappa_changes_the_step_time_by_hand():
    # U(4; σ=0.15, κ=0.02) = (1 + 0.15·3 + 0.02·4·3) / 4 = 1.69 / 4; the fixed part's U(4; 0.6, 0.02) = 3.04 / 4
    m = step.StepModel({**TRUE, "kappa": 0.02}, LINKS, BUCKETS)
    assert m.compute_s(Layout(1, 4, 32)) == pytest.approx(2e-3 * 3.04 / 4 + 1e-4 * 32 * 1.69 / 4)


def test_uncalibrated_within_socket_link_borrows_a_slower_class_not_zero():
    fits = {"nodes": LINKS["nodes"]}
    fit, note = comm.link_for("socket", fits)
    assert fit is LINKS["nodes"] and "pessimistic" in note
    m = step.StepModel(TRUE, fits, BUCKETS)
    assert m.comm(Layout(2, 1, 8, 1, 2, "socket"))[0] > 0


def test_the_fits_analytic_jacobian_matches_finite_differences():
    """The fit's Jacobian is written out by hand (one evaluation per iteration instead of one per parameter):
    it must be the derivative of the vectorised model, which must be StepModel.step_s, at every term."""
    import numpy as np

    cells = cells_from(truth(), GRID)
    design = step.Design.of(cells, LINKS, BUCKETS)
    p = np.array([{**TRUE, "kappa": 0.01}[name] for name in step.PARAMS])
    model = step.StepModel(dict(zip(step.PARAMS, p)), LINKS, BUCKETS)
    assert np.allclose(design.log_step_s_of(step.StepParams(*p)), [math.log(model.step_s(c.layout)) for c in cells],
                       rtol=1e-12)
    jac = design.jacobian(step.StepParams(*p))
    for i in range(len(p)):
        h = 1e-6 * abs(p[i]) if p[i] else 1e-7
        up, down = p.copy(), p.copy()
        up[i] += h
        down[i] -= h
        numeric = (design.log_step_s_of(step.StepParams(*up)) - design.log_step_s_of(step.StepParams(*down))) / (2 * h)
        assert np.allclose(jac[:, i], numeric, rtol=1e-5, atol=1e-7), step.PARAMS[i]
