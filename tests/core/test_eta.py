"""The sweep's time estimate (orchestrator.core.execution.eta), by hand."""

from __future__ import annotations

import math

import pytest

from orchestrator.core.execution import eta
from orchestrator.core.execution.eta import Eta, Work


def test_a_step_is_its_flops_at_the_stated_share_of_the_cores_gemm_rate():
    # 10 GFLOP per sample × 8 samples = 80 GFLOP, on 2 cores of 100 GFLOP/s at 53%: 80 / 106 = 0.755 s
    assert eta.step_s(10e9, 8, 2, 100.0) == pytest.approx(80 / (0.53 * 200))


def test_trial_costs_by_hand():
    # throughput: 3 s start-up + (3 warm-up + 12 × 3 timed + 1 under the FLOP counter) steps of 0.5 s = 3 + 20;
    # with DDP, 5 more after timing (the all-reduce check's 2, the 3 noting when its buckets are ready)
    assert eta.throughput_s(0.5, 3, 12, 3) == pytest.approx(23.0)
    assert eta.throughput_s(0.5, 3, 12, 3, ranks=2) == pytest.approx(25.5)
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


# --- a convergence run's cost, from what the sweep measured ------------------------------------------------

from orchestrator.core.measured import records as rec  # noqa: E402

COSTS = eta.RunCosts(samples_per_epoch=256, max_epochs=10.0, eval_every_epochs=0.5, eval_samples=32, node_cores=2)


def _sweep() -> Eta:
    """The default sweep's shape on a 2-core node: two 1-core and one 2-core convergence runs."""
    work = [Work("peak-r1-t1", "peak", 6.5, 1), Work("peak-r2-t1", "peak", 6.5, 2),
            Work("r1-t1-b8", "throughput", 20.0, 1, eta.Shape(1, 1, 8), 0.2),
            Work("r2-t1-b8", "throughput", 20.0, 2, eta.Shape(2, 1, 8), 0.2)]
    for key, shape, cores in (("conv-g8-s0", eta.Shape(1, 1, 8), 1), ("conv-g8-s1", eta.Shape(1, 1, 8), 1),
                              ("conv-g16-s0", eta.Shape(2, 1, 8), 2)):
        first = eta.convergence_run_s(COSTS, shape, 0.2, epochs=5.0)
        work.append(Work(key, "convergence", first, cores, shape, 0.2))
    return Eta(work, cores=2, costs=COSTS)


def _record(kind, key, ranks, *, startup_s=None, **sections):
    return rec.Record(kind=kind, key=key, status="ok", ranks=ranks, threads_per_rank=1, local_batch=8,
                      global_batch=8 * ranks, startup_s=startup_s, **sections)


def test_a_convergence_run_is_its_start_up_steps_and_evaluations_by_hand():
    # 5 epochs × 256 / 8 = 160 steps of 0.2 s = 32 s; 10 evaluations × 32 samples × 0.2 / 8 s × 0.5 = 4 s; 3 s
    assert eta.convergence_run_s(COSTS, eta.Shape(1, 1, 8), 0.2, epochs=5.0) == pytest.approx(39.0)
    # 2 ranks share the eval set: 16 samples each; the packing slows steps and evaluations alike
    two = eta.convergence_run_s(COSTS, eta.Shape(2, 1, 8), 0.3, epochs=5.0, startup_s=4.0, packing=1.5)
    assert two == pytest.approx(4.0 + (80 * 0.3 + 10 * 16 * 0.3 / 8 * 0.5) * 1.5)
    assert eta.packing_of({(1, 1): 100.0, (2, 1): 100.0}) == pytest.approx(2.0)     # two vCPUs of one core


def test_measured_steps_start_ups_packing_epochs_and_evaluation_replace_the_priors():
    e = _sweep()
    conv_g8, conv_g16 = e.work["conv-g8-s1"], e.work["conv-g16-s0"]
    assert e.expected_s(conv_g8) == pytest.approx(39.0)
    e.finished("peak-r1-t1", 6.0, _record("peak", "peak-r1-t1", 1, peak=rec.PeakSection(precision="fp32", gflops=100.0,
                                                                                          concurrent=True)))
    e.finished("peak-r2-t1", 6.0, _record("peak", "peak-r2-t1", 2, peak=rec.PeakSection(precision="fp32", gflops=125.0,
                                                                                          concurrent=True)))
    assert e.measured.packing == pytest.approx(1.6)            # 2 × 100 / 125: a 1-core run slowed beside another
    e.finished("r1-t1-b8", 20.0, _record("throughput", "r1-t1-b8", 1, startup_s=4.0,
                                         throughput=rec.ThroughputSection(samples_per_s=20.0)))   # 0.4 s steps
    e.finished("r2-t1-b8", 20.0, _record("throughput", "r2-t1-b8", 2, startup_s=5.0,
                                         throughput=rec.ThroughputSection(samples_per_s=32.0)))   # 0.5 s steps
    assert e.expected_s(conv_g8) == pytest.approx(4.0 + (160 * 0.4 + 10 * 32 * 0.4 / 8 * 0.5) * 1.6)
    assert e.expected_s(conv_g16) == pytest.approx(5.0 + 80 * 0.5 + 10 * 16 * 0.5 / 8 * 0.5)     # no packing
    # a g8 run took 6 epochs, its evaluations (12 of 32 samples) 9.6 s beyond its steps at 1.6 × 0.4 s
    run = rec.ConvergenceSection(epochs_run=6.0, train_s=192 * 0.4 * 1.6 + 9.6, curve=[[0.5, 0.1]] * 12)
    e.finished("conv-g8-s0", 140.0, _record("convergence", "conv-g8-s0", 1, startup_s=7.0, convergence=run))
    assert e.measured.eval_costs == [pytest.approx(9.6 / 1.6 / (12 * 32 * 0.4 / 8))]
    assert e.expected_s(conv_g8) == pytest.approx(7.0 + (192 * 0.4 + 12 * 32 * 0.4 / 8 * 0.3125) * 1.6)
    # g16 has no finished seed: its epochs are g8's grown as epochs grow with the global batch (1.29× per doubling)
    epochs = 6.0 * 2 ** eta.EPOCHS_BATCH_EXPONENT
    assert epochs == pytest.approx(7.70, abs=0.01)
    evaluations = math.floor(epochs / 0.5)
    assert e.expected_s(conv_g16) == pytest.approx(7.0 + epochs * 16 * 0.5 + evaluations * 16 * 0.5 / 8 * 0.3125)


def test_replay_tells_the_estimate_what_each_record_measured():
    e = _sweep()
    finished = [(0.0, 6.0, _record("peak", "peak-r1-t1", 1, peak=rec.PeakSection(precision="fp32", gflops=100.0))),
                (6.0, 20.0, _record("throughput", "r1-t1-b8", 1, startup_s=4.0,
                                    throughput=rec.ThroughputSection(samples_per_s=20.0)))]
    r = eta.replay(list(e.work.values()), 2, COSTS, finished)
    assert r.first_s == pytest.approx(e.total_s) and r.actual_s == pytest.approx(26.0)
    assert [p[0] for p in r.points] == [6.0, 26.0] and r.points[-1][2] == 0.0


def test_packed_runs_are_scheduled_as_the_driver_starts_them_not_as_a_perfect_packing():
    runs = [eta.Work(f"conv-g8-s{i}", "convergence", 100.0, 1) for i in range(3)] + [
        eta.Work("conv-g16-s0", "convergence", 50.0, 2)]
    e = eta.Eta(runs, cores=2)
    # two 1-core runs side by side, the third alone (its neighbour core idle: the 2-core run cannot use it), then
    # the 2-core run: 250 s, where core-seconds over cores say 200 s
    assert e.remaining_s() == pytest.approx(250.0)
    # 70 s into the first two: they hold both cores 30 s more
    assert e.remaining_s({"conv-g8-s0": 70.0, "conv-g8-s1": 70.0}) == pytest.approx(180.0)
    e.finished("conv-g8-s0", 100.0)
    e.finished("conv-g8-s1", 100.0)
    # the third in flight for 40 s: the 2-core run waits for it
    assert e.remaining_s({"conv-g8-s2": 40.0}) == pytest.approx(110.0)
