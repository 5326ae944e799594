"""The sweep's time estimate (orchestrator.core.eta), by hand."""

from __future__ import annotations

import pytest

from orchestrator.core import eta
from orchestrator.core.eta import Eta, Work


def test_a_step_is_its_flops_at_the_stated_share_of_the_cores_gemm_rate():
    # 10 GFLOP per sample × 8 samples = 80 GFLOP, on 2 cores of 100 GFLOP/s at 60%: 80 / 120 = 0.667 s
    assert eta.step_s(10e9, 8, 2, 100.0) == pytest.approx(80 / (0.6 * 200))


def test_trial_costs_by_hand():
    # throughput: 3 s start-up + (3 warm-up + 12 × 3 timed) steps of 0.5 s = 3 + 19.5
    assert eta.throughput_s(0.5, 3, 12, 3) == pytest.approx(22.5)
    # convergence: half of 10 epochs of 256 samples at global batch 8 = 160 steps of 0.5 s, +10% evaluation
    assert eta.convergence_s(0.5, 256, 8, 10.0) == pytest.approx(3 + 160 * 0.5 * 1.1)


def test_timing_trials_add_up_and_convergence_runs_pack_onto_the_cores():
    work = [Work("peak", "peak", 10.0, 1), Work("a", "convergence", 100.0, 1), Work("b", "convergence", 100.0, 1),
            Work("c", "convergence", 100.0, 2)]
    # 10 serial, then 100×1 + 100×1 + 100×2 = 400 core-seconds on 2 cores = 200 s
    assert Eta(work, cores=2).remaining_s() == pytest.approx(210.0)
    # one long run cannot be packed below its own length
    assert Eta([Work("x", "convergence", 300.0, 1)], cores=8).remaining_s() == pytest.approx(300.0)


def test_finished_trials_rescale_their_kind_and_running_ones_count_down():
    e = Eta([Work("t1", "throughput", 20.0, 1), Work("t2", "throughput", 20.0, 1), Work("p", "peak", 5.0, 1)],
            cores=2)
    assert e.total_s == pytest.approx(45.0)
    e.finished("t1", 30.0)                   # 1.5× its estimate: t2 is now expected at 30 s
    assert e.remaining_s() == pytest.approx(35.0)
    assert e.remaining_s({"t2": 12.0}) == pytest.approx(23.0)
    assert e.remaining_s({"t2": 99.0}) == pytest.approx(5.0)   # overdue: 0, never negative
    e.finished("t1", 1000.0)                 # a second report of the same trial changes nothing
    assert e.remaining_s() == pytest.approx(35.0)
    assert e.total_s == pytest.approx(45.0)   # the first estimate stays what it was
