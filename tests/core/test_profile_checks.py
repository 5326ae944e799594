"""The physical checks of a profile on hand-made rank results: each check fires on the figure that breaks
its bound (and names the numbers), and stays quiet on a clean target."""

import copy

import pytest
from test_profile_analysis import _target

from orchestrator.core.profile import analysis as pa
from orchestrator.core.profile import checks as pc


def _clean() -> dict:
    """1 rank, 100 ms plain steps with all its CPUs; the conv runs 20 ms a call in the model, 18 alone
    (efficiency 0.9): 2.2188 GFLOP ÷ 20 ms = 111 GFLOP/s under a 400 GFLOP/s roof."""
    t = _target("1x1x8", 1, 1, 40.0, 5.0, 100.0)
    r = t["results"][0]
    r["plain_cpu_share"] = r["verbose_cpu_share"] = r["profiler_cpu_share"] = 0.97
    r["replay"][0]["isolated_ms"] = 18.0
    r["peak"]["gemm_gflops"] = 400.0
    r["profiler"]["coverage"]["step_ms"] = 120.0          # the profiler's own cost: 19% over the plain step
    return t


def _checks(t: dict) -> list[str]:
    return [f.check for f in pc.check_target(t)]


def test_a_clean_target_passes_every_check():
    assert pc.check_target(_clean()) == []


def test_a_point_above_its_roof_is_disturbed():
    t = _clean()
    t["results"][0]["peak"]["gflops"] = 50.0      # roof 50 GFLOP/s; the conv reached 111
    (f,) = pc.check_target(t)
    assert f.check == "above roof"
    assert "110.9 GFLOP/s against 50.0 (×2.22)" in f.detail


def test_a_point_within_the_peaks_own_noise_is_not_above_its_roof():
    t = _clean()
    t["results"][0]["peak"]["gflops"] = 105.0     # the conv's 110.9 is 5.6% above: within the 10% floor
    assert "above roof" not in _checks(t)
    t["results"][0]["peak"].update(gflops=100.0, gemm_gflops=100.0, best_gflops=101.0)
    assert "above roof" in _checks(t)             # 10.9% above a peak whose GEMMs spread 1%: beyond the floor


def test_the_dram_roof_does_not_bound_data_in_cache():
    t = _clean()
    t["results"][0]["stream_triad_gbs"] = 0.001   # a bandwidth roof far below every point, the compute roof intact
    (point,) = [p for p in pa.roofline_points(t) if p.kind == "convolution"][:1]
    assert point.achieved_gflops > point.attainable_gflops   # shown above the DRAM line in the roofline
    assert pc.check_target(t) == []                                   # but nothing physical is broken


def test_an_efficiency_above_one_is_disturbed():
    t = _clean()
    t["results"][0]["replay"][0]["isolated_ms"] = 25.0    # alone slower than in the model (20 ms)
    (f,) = pc.check_target(t)
    assert f.check == "efficiency above 1" and "×1.25" in f.detail


def test_a_negative_overhead_is_disturbed():
    t = _clean()
    r = t["results"][0]
    r["verbose_step_ms"] = [90.0, 90.0]                  # 10.9% faster than the 101 ms plain step
    r["profiler"]["coverage"]["step_ms"] = 95.0            # 5.9%: within the plain steps' noise (10% floor)
    found = pc.check_target(t)
    assert [f.check for f in found] == ["negative overhead"]
    assert "10.9% faster than the plain step (101.0 ms), beyond its noise (10%)" in found[0].detail
    r["profiler"]["coverage"]["step_ms"] = 85.0            # 15.8% faster: beyond it
    found = pc.check_target(t)
    assert [f.check for f in found] == ["negative overhead"] * 2
    assert "rank 0: profiled step 85.0 ms < its plain step 101.0 ms, beyond its noise (10%)" in found[1].detail


def test_a_rank_short_of_its_cpus_is_disturbed():
    t = _clean()
    t["results"][0]["verbose_cpu_share"] = 0.228
    (f,) = pc.check_target(t)
    assert f.check == "cpu share"
    assert f.detail.startswith("rank 0 got 22.8% of its CPUs in the verbose pass")


def test_ranks_doing_the_same_work_must_agree_within_their_noise():
    t = _clean()
    slow = copy.deepcopy(t["results"][0])
    slow["onednn"]["shapes"][0]["time_ms"] *= 1.5           # 60 ms per step against rank 0's 40
    t["results"].append(slow)
    (f,) = pc.check_target(t)
    assert f.check == "same work disagrees" and "rank 1 60 against rank 0 40 (50% apart, noise 10%)" in f.detail
    slow["onednn"]["shapes"][0]["time_ms"] = 2 * 40.0 * 1.05  # 5% apart: within the noise floor
    assert pc.check_target(t) == []


def test_the_same_convolutions_in_two_variants_and_the_same_peak_must_agree():
    ref, ker = _clean(), _clean()
    ref["label"], ker["label"] = "reference-1x1x8", "kernel-1x1x8"
    ker["results"][0]["onednn"]["shapes"][0]["time_ms"] *= 1850 / 1173
    ker["results"][0]["peak"]["gemm_gflops"] = 400 * 376 / 233
    found = pc.check_across([ref, ker])
    assert {(f.target, f.detail.split(":")[0]) for f in found} == {
        ("reference-1x1x8", "the same convolutions, ms per step"), ("kernel-1x1x8", "the same convolutions, ms per step"),
        ("reference-1x1x8", "GEMM peak at 1 thread(s), None, GFLOP/s"),
        ("kernel-1x1x8", "GEMM peak at 1 thread(s), None, GFLOP/s")}
    assert pc.disturbed(found) == {"reference-1x1x8", "kernel-1x1x8"}
    assert pc.check_across([ref, _clean()]) == []


def test_the_noise_is_the_steps_own_spread_when_larger_than_the_floor():
    assert pc._noise([100.0, 130.0, 110.0]) == pytest.approx(0.3 / 1.1)
    assert pc._noise([100.0, 101.0]) == pc.NOISE_FLOOR


def test_a_replay_with_other_threads_or_cpus_than_the_rank_is_disturbed():
    """The replay must time the rank's own setting: the threads
    and CPUs it recorded are compared with the layout's threads and the rank's placement."""
    t = _clean()
    t["placement"] = [{"rank": 0, "cpus": [1]}]
    t["results"][0]["replay_setting"] = {"threads": 1, "cpus": [1]}
    assert pc.check_target(t) == []
    t["results"][0]["replay_setting"] = {"threads": 2, "cpus": [0, 1]}
    found = pc.check_target(t)
    assert [f.check for f in found] == ["replay setting"] * 2
    assert "the replay ran 2 thread(s), the rank 1" in found[0].detail
    assert "the replay could run on CPUs [0, 1], the rank was placed on [1]" in found[1].detail
