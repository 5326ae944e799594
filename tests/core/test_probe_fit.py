"""The probe's pure side (core.planning.probe, core.planning.facts, the dataset rule): the memory fit, its margin, DDP's copies and
its source text; FLOPs and samples from the probe's points; the cache key; JSON round trips; which figure wins
and what the plan says of each."""

from __future__ import annotations

import json

import pytest

from orchestrator.core.planning.constraints import DATASET, MEMORY
from orchestrator.core.planning.facts import PROBE, SWEEP, UNKNOWN, WORKLOAD, workload_facts
from orchestrator.core.planning.plan import make_plan
from orchestrator.core.planning.probe import (
    MEMORY_MARGIN,
    MemoryModel,
    ProbePoint,
    ProbeResult,
    fit_memory,
    held_batches,
    probe_key,
    probe_result,
)
from orchestrator.core.planning.spec import parse_spec
from orchestrator.core.planning.view import plan_tables, plan_to_dict

from hand_topologies import one_socket_2c, xeon_2s28c

KEY_FIELDS = {"format": 1, "workload": "/home/me/net.py:workload", "code": "0123abcd", "params": {"width": 32},
              "precision": "fp32", "torch": "2.14.1", "backend": "gloo", "held_batches": 13, "batches": [2, 8],
              "steps": 3}


def point(batch: int, peak: float, *, flops: float | None = 1000.0, samples: int | None = 512,
          grads: int = 4 * 2**20, error: str | None = None) -> ProbePoint:
    return ProbePoint(local_batch=batch, peak_private_mib=peak, rank_peak_private_mib=peak, library_mib=0.0,
                      watched_peak_private_mib=peak - 1,
                      flops_per_step=None if flops is None else flops * batch, flops_error=error,
                      flops_rule=None if flops is None else "valid-taps",
                      samples_per_epoch=samples, gradient_bytes=grads, wall_s=1.5)


# --- the memory fit ----------------------------------------------------------------------------------------------

def test_two_points_give_the_line_through_them_and_the_margin_multiplies_the_whole():
    m = fit_memory((2, 8), (812.0 + 2 * 96, 812.0 + 8 * 96), ddp_mib=45.0, margin=0.15)
    assert (m.intercept_mib, m.slope_mib) == pytest.approx((812.0, 96.0))
    # at a batch not measured: (812 + 96·64 + 45) × 1.15
    assert m.mib(64) == pytest.approx((812 + 96 * 64 + 45) * 1.15)
    assert m.text() == "probe at batches 2 and 8: 812 + 96·b MiB, + 45 MiB for DDP’s gradient buckets, + 15% margin"


def test_the_libraries_counted_in_the_intercept_are_said():
    m = fit_memory((2, 8), (662.0, 664.0), ddp_mib=0.0, library_mib=320.0)
    assert m.mib(8) == pytest.approx(664.0 * 1.15)        # counted, as for a rank alone on its node
    assert m.text() == ("probe at batches 2 and 8: 661 + 0.333·b MiB (320 MiB of it libraries, as for a rank alone "
                        "on its node), + 15% margin")


def test_the_libraries_apart_are_planned_once_per_node_and_said():
    """A probe of format 2 fits private memory; the libraries' file-backed pages are apart, once per node."""
    result = probe_result(KEY_FIELDS, [ProbePoint(local_batch=b, peak_private_mib=peak, library_mib=lib,
                                                  flops_per_step=None) for b, peak, lib in ((2, 402.0, 330.0),
                                                                                            (8, 414.0, 333.0))],
                          threads=2, measured_at="t", ddp_copies=0.0)
    m = result.memory
    assert (m.intercept_mib, m.slope_mib, m.library_mib, m.libraries_mib) == pytest.approx((398.0, 2.0, 0.0, 333.0))
    assert m.mib(8) == pytest.approx(414.0 * 1.15)        # the rank's own share: no libraries in it
    assert m.text() == ("probe at batches 2 and 8: 398 + 2·b MiB private per rank, + 15% margin; + 333 MiB of "
                        "libraries once per node")
    assert workload_facts(precision="fp32", probe=result).memory.library_mib == 333.0


def test_a_probe_of_format_1_still_reads_and_plans_as_it_did():
    """What a probe.json kept in an older results folder holds: unique memory, the libraries in every rank."""
    older = {"local_batch": 2, "peak_uss_mib": 662.0, "rank_peak_uss_mib": 662.0, "library_mib": 320.0,
             "watched_peak_uss_mib": 360.0, "flops_per_step": None}
    p = ProbePoint.from_json(older)
    assert p.peak_mib == 662.0 and p.peak_private_mib is None and p.to_json() == older
    m = MemoryModel.from_json({"batches": [2, 8], "peak_mib": [662.0, 664.0], "intercept_mib": 661.3,
                               "slope_mib": 0.333, "ddp_mib": 0.0, "margin": 0.15, "notes": [], "library_mib": 320.0})
    assert m.libraries_mib == 0.0 and m.mib(0) == pytest.approx(661.3 * 1.15)   # the libraries are in each rank's
    assert "(320 MiB of it libraries, as for a rank alone on its node)" in m.text()


def test_more_points_are_fitted_by_least_squares():
    m = fit_memory((2, 4, 8), (500.0, 508.0, 520.0), ddp_mib=0.0, margin=0.0)
    # slope = Σ(b−b̄)(m−m̄) / Σ(b−b̄)² with b̄ = 14/3, m̄ = 509.33: 61.33 / 18.67 = 3.2857, through the means
    assert m.slope_mib == pytest.approx(23 / 7)
    assert m.intercept_mib + m.slope_mib * 14 / 3 == pytest.approx(1528 / 3)
    assert m.text() == "probe at batches 2 and 4 and 8: 494 + 3.29·b MiB, + 0% margin"


def test_a_peak_that_falls_with_the_batch_is_jitter_the_slope_is_zero_and_the_note_says_so():
    m = fit_memory((2, 8), (361.9, 361.1), ddp_mib=0.0)
    assert m.slope_mib == 0.0 and m.intercept_mib == 361.9   # the larger peak: never below what was measured
    assert m.mib(1024) == pytest.approx(361.9 * (1 + MEMORY_MARGIN))
    assert m.notes == ("the peak fell by 0.8 MiB from batch 2 to 8: jitter, slope taken as 0",)
    assert m.text().endswith("(the peak fell by 0.8 MiB from batch 2 to 8: jitter, slope taken as 0)")


@pytest.mark.parametrize("batches, peaks, match", [
    ((2,), (400.0,), "two distinct batches"),
    ((4, 4), (400.0, 410.0), "two distinct batches"),
    ((2, 8), (400.0,), "two distinct batches"),
    ((2, 8), (400.0, float("nan")), "positive numbers"),
    ((2, 8), (0.0, 10.0), "positive numbers"),
])
def test_a_fit_without_two_good_points_is_refused(batches, peaks, match):
    with pytest.raises(ValueError, match=match):
        fit_memory(batches, peaks, ddp_mib=0.0)


def test_the_batches_a_throughput_trial_holds_are_what_the_probe_holds():
    assert held_batches("memory", 3, 10) == 13     # the default measure section
    assert held_batches("memory", 10, 40) == 16    # at most 16
    assert held_batches("memory", 1, 0) == 1
    assert held_batches("stream", 3, 10) == 0      # streamed: none prepared ahead


# --- the result -------------------------------------------------------------------------------------------------

def test_the_result_adds_ddps_copies_of_the_measured_gradients_and_states_each_source():
    result = probe_result(KEY_FIELDS, [point(8, 868.0), point(2, 820.0)], threads=2, measured_at="2026-11-26T00:00:00Z",
                          ddp_copies=1.0)
    assert [p.local_batch for p in result.points] == [2, 8]          # sorted
    assert result.memory.ddp_mib == pytest.approx(4.0)               # 1 copy × 4 MiB of gradients
    assert result.memory.mib(8) == pytest.approx((868.0 + 4.0) * 1.15)
    assert result.flops_per_sample == 1000.0
    assert result.flops_source == ("counted by orch's FLOP counter (torch's, convolutions over the taps inside the "
                                   "input) on a training step at local batch 8 in the probe: 1 kFLOP per sample")
    assert result.flops_rule == "valid-taps"                          # what the rank's counter said it counted by
    assert result.samples_per_epoch == 512
    assert result.samples_source == "the train split's length in the probe (Trainer.samples_per_epoch): 512"
    assert result.key == probe_key(KEY_FIELDS) and result.workload == KEY_FIELDS["workload"]


def test_a_16_bit_hook_with_gradient_views_adds_half_a_copy():
    # ddp_gradient_copies(bf16 hook, views) = 1.5, less the gradients the probe measured: 0.5
    result = probe_result(KEY_FIELDS, [point(2, 820.0), point(8, 868.0)], threads=2, measured_at="t", ddp_copies=0.5)
    assert result.memory.ddp_mib == pytest.approx(2.0)


@pytest.mark.parametrize("largest, expected", [
    (point(8, 868.0, flops=None, error="RuntimeError: nonzero is data-dependent"),
     "not counted: orch's FLOP counter (torch's) failed on a training step (RuntimeError: nonzero is "
     "data-dependent)"),
    (point(8, 868.0, flops=0.0), "not counted: orch's FLOP counter (torch's) found no matmul or convolution in a "
                                 "training step (it counts only those); give the workload's train_flops_per_sample"),
])
def test_flops_that_could_not_be_counted_are_none_with_the_reason(largest, expected):
    result = probe_result(KEY_FIELDS, [point(2, 820.0), largest], threads=2, measured_at="t", ddp_copies=1.0)
    assert result.flops_per_sample is None and result.flops_source == expected and result.flops_rule is None


@pytest.mark.parametrize("samples, expected", [
    ((None, None), "not known: the workload's trainer does not say (Trainer.samples_per_epoch returned None)"),
    ((512, 256), "not known: the probe's trainers disagreed ([256, 512])"),
])
def test_samples_the_trainer_does_not_tell_are_none_with_the_reason(samples, expected):
    points = [point(2, 820.0, samples=samples[0]), point(8, 868.0, samples=samples[1])]
    result = probe_result(KEY_FIELDS, points, threads=2, measured_at="t", ddp_copies=1.0)
    assert result.samples_per_epoch is None and result.samples_source == expected


def test_the_result_round_trips_through_json_unchanged():
    result = probe_result(KEY_FIELDS, [point(2, 820.0), point(8, 868.0, flops=None, error="x")], threads=2,
                          measured_at="t", ddp_copies=1.0)
    text = json.dumps(result.to_json())
    back = ProbeResult.from_json(json.loads(text))
    assert back == result and json.dumps(back.to_json()) == text
    assert isinstance(back.memory, MemoryModel) and isinstance(back.points[0], ProbePoint)
    assert back.memory.mib(32) == result.memory.mib(32)


def test_the_cache_key_changes_with_every_field_and_not_with_their_order():
    assert probe_key(KEY_FIELDS) == probe_key(dict(reversed(list(KEY_FIELDS.items()))))
    changed = {"format": 2, "workload": "other:workload", "code": "ffff0000", "params": {"width": 64},
               "precision": "bf16", "torch": "2.15.0", "backend": "ccl", "held_batches": 16, "batches": [2, 4],
               "steps": 4}
    keys = {probe_key({**KEY_FIELDS, name: value}) for name, value in changed.items()}
    assert len(keys) == len(changed) and probe_key(KEY_FIELDS) not in keys


# --- the facts: which figure wins ---------------------------------------------------------------------------------

PROBED = probe_result(KEY_FIELDS, [point(2, 820.0), point(8, 868.0)], threads=2, measured_at="t", ddp_copies=1.0)


def test_the_sweep_files_memory_wins_then_the_workloads_then_the_probes():
    def formula(b: int) -> float:
        return 400.0 + b

    cases = [
        (dict(sweep_memory_mib=2000.0, declared_memory=formula, probe=PROBED), SWEEP, 2000.0,
         "constraints.rank_memory_mib in the sweep file: 2,000 MiB"),
        (dict(declared_memory=formula, probe=PROBED), WORKLOAD, 464.0, "the workload’s formula (memory_estimate_mib)"),
        (dict(probe=PROBED), PROBE, PROBED.memory.mib(64), PROBED.memory.text()),
        ({}, UNKNOWN, None, "not known yet: no probe has run for these parameters in fp32"),
    ]
    for inputs, origin, mib, source in cases:
        memory = workload_facts(precision="fp32", **inputs).memory
        assert (memory.origin, memory.mib(64), memory.source) == (origin, mib, source)
    assert workload_facts(precision="fp32").memory.need_mib(64) == 0.0   # unknown: the rule passes


def test_a_declared_flop_count_is_asked_only_when_its_value_is_needed():
    asked = []

    def count() -> float:
        asked.append(1)
        return 6.0e6

    facts = workload_facts(precision="fp32", declared_flops=count, declared_samples=100, declared_memory=lambda b: 1.0)
    # `orch plan` asks for the origin and source only: a workload may import torch to count, the plan must not
    assert (facts.flops.origin, facts.flops.source, facts.unknown()) == (WORKLOAD, "the workload’s train_flops_per_sample", [])
    assert asked == []
    assert facts.flops.value == 6.0e6 and facts.flops.value == 6.0e6 and asked == [1]   # asked once
    assert not facts.needs_probe()


def test_a_declaration_that_gives_none_lets_the_probe_stand_in():
    facts = workload_facts(precision="fp32", declared_flops=lambda: None, probe=PROBED)
    assert facts.flops.value == 1000.0 and facts.flops.origin == PROBE and facts.flops.source == PROBED.flops_source
    unprobed = workload_facts(precision="bf16", declared_flops=lambda: None, declared_samples=1,
                              declared_memory=lambda b: 1.0)
    assert unprobed.needs_probe() and unprobed.unknown() == ["FLOPs per sample"]


def test_samples_come_from_the_workload_else_the_probe():
    assert workload_facts(precision="fp32", declared_samples=8192, probe=PROBED).samples.value == 8192
    probed = workload_facts(precision="fp32", probe=PROBED).samples
    assert (probed.value, probed.origin, probed.source) == (512, PROBE, PROBED.samples_source)
    assert workload_facts(precision="fp32").needs_probe()
    assert not workload_facts(precision="fp32", probe=PROBED).needs_probe()   # it ran: nothing more to learn


# --- the plan: memory by the probe, the dataset rule ------------------------------------------------------------------

def spec_of(grid: dict, **extra):
    spec, problems = parse_spec({"name": "t", "workload": {"name": "classifier"}, "grid": grid, **extra})
    assert problems == []
    return spec


def test_the_plan_refuses_layouts_by_the_probes_memory_and_says_it_was_measured():
    facts = workload_facts(precision="fp32", probe=PROBED)   # 868 MiB at 8 → ~1,000 MiB a rank
    spec = spec_of({"ranks": [1, 2], "threads_per_rank": [1], "local_batch": [8]},
                   constraints={"memory_budget_mib": 1000.0})
    plan = make_plan(spec, one_socket_2c(), rank_memory_mib=facts.memory.mib, ccl_available=False, facts=facts)
    assert [r.code for r in plan.cell(1, 1, 8).reasons] == [MEMORY]
    assert plan.cell(1, 1, 8).rank_memory_mib == pytest.approx((868.0 + 4.0) * 1.15)
    assert "(measured by the probe)" in plan_tables(plan)[0].caption
    data = plan_to_dict(plan)["facts"]
    assert data["memory"] == {"origin": PROBE, "source": PROBED.memory.text()}
    assert data["samples_per_epoch"]["value"] == 512 and data["probe_key"] == PROBED.key


def test_a_dataset_smaller_than_one_batch_per_rank_makes_those_points_infeasible_with_the_numbers():
    spec = spec_of({"ranks": [1, 2, 4], "threads_per_rank": [1], "local_batch": [16, 64]},
                   convergence={"metric": "accuracy", "target": 0.9, "base_lr": 0.1, "base_batch": 16})
    plan = make_plan(spec, xeon_2s28c(), rank_memory_mib=lambda b: 100.0, ccl_available=False, samples_per_epoch=200)
    infeasible = {p.trial.key: [r.message for r in p.reasons] for p in plan.trials if not p.feasible}
    # 200 ÷ 4 = 50 < 64, 200 ÷ 2 = 100 ≥ 64, 200 ÷ 4 = 50 ≥ 16
    assert infeasible == {"r4-t1-b64": ["200 training samples ÷ 4 ranks = 50 per rank < local batch 64: not one batch "
                                     "per rank"]}
    assert plan.cell(4, 1, 64).reasons[0].code == DATASET
    assert 256 not in {run.global_batch for run in plan.convergence}   # no convergence run at 4 × 64
    table = next(t for t in plan_tables(plan) if t.name == "plan-b64")
    assert table.footnotes == ("a: the dataset (200 samples) holds less than one batch per rank",)


def test_without_a_known_epoch_size_no_point_is_refused_for_its_data():
    spec = spec_of({"ranks": [4], "threads_per_rank": [1], "local_batch": [64]})
    plan = make_plan(spec, xeon_2s28c(), rank_memory_mib=lambda b: 100.0, ccl_available=False)
    assert plan.cell(4, 1, 64).feasible


# --- the step the probe timed -------------------------------------------------------------------------------------

def timed(steps: dict[int, float | None], *, cpu: str | None = "cpu A (avx2)", threads: int = 2,
          startups: tuple[float | None, ...] = (4.0, 6.0)) -> ProbeResult:
    points = [ProbePoint(local_batch=b, peak_private_mib=500.0 + b, rank_peak_private_mib=500.0 + b, library_mib=0.0,
                         watched_peak_private_mib=500.0, flops_per_step=None, step_s=s, startup_s=startup)
              for (b, s), startup in zip(steps.items(), startups, strict=False)]
    return probe_result(KEY_FIELDS, points, threads=threads, measured_at="now", ddp_copies=0.0, cpu=cpu)


def test_a_timed_step_is_affine_in_the_batch_and_linear_in_threads_on_the_cpu_it_ran_on():
    result = timed({2: 0.2, 8: 0.5})                      # 0.1 s fixed + 0.05 s per sample, on 2 threads
    assert result.step_s(8, 2, "cpu A (avx2)") == pytest.approx(0.5)
    assert result.step_s(32, 2, "cpu A (avx2)") == pytest.approx(0.1 + 0.05 * 32)
    assert result.step_s(16, 1, "cpu A (avx2)") == pytest.approx(2 * (0.1 + 0.05 * 16))   # half the threads
    assert result.step_s(4, 4, "cpu A (avx2)") == pytest.approx((0.1 + 0.05 * 4) / 2)
    assert result.startup_s("cpu A (avx2)") == pytest.approx(5.0)


def test_another_cpu_or_no_timed_step_gives_no_step():
    assert timed({2: 0.2, 8: 0.5}).step_s(8, 2, "cpu A (avx2 avx512f)") is None   # same name, other ISA
    assert timed({2: 0.2, 8: 0.5}).startup_s("cpu B (avx2)") is None
    assert timed({2: 0.2, 8: 0.5}, cpu=None).step_s(8, 2, "cpu A (avx2)") is None  # an older probe: CPU unknown
    assert timed({2: None, 8: None}).step_s(8, 2, "cpu A (avx2)") is None
    assert timed({2: None, 8: None}, startups=(None, None)).startup_s("cpu A (avx2)") is None


def test_a_step_that_fell_with_the_batch_is_jitter_and_one_timed_batch_scales_in_proportion():
    falling = timed({2: 0.5, 8: 0.4})
    assert falling.step_s(8, 2, "cpu A (avx2)") == pytest.approx(0.5)   # slope taken as 0: the fixed part alone
    one = timed({2: None, 8: 0.4})
    assert one.step_s(16, 2, "cpu A (avx2)") == pytest.approx(0.8)
    assert one.step_s(2, 2, "cpu A (avx2)") == pytest.approx(0.1)
    # below the smallest batch timed, never less than in proportion to it
    assert timed({4: 0.2, 8: 0.8}).step_s(1, 2, "cpu A (avx2)") == pytest.approx(0.05)


def test_timed_steps_and_the_cpu_round_trip_and_an_older_probe_without_them_still_reads():
    result = timed({2: 0.2, 8: 0.5})
    assert ProbeResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    older = result.to_json()
    older.pop("cpu")
    for p in older["points"]:
        p.pop("step_s"), p.pop("startup_s")
    read = ProbeResult.from_json(older)
    assert read.cpu is None and read.step_s(8, 2, "cpu A (avx2)") is None
