"""The compute roof (orchestrator.run.rank.roof) on this CPU, in short windows: every primitive is measured, a
convolution's FLOPs are benchdnn's, its batch is sized to the CPU's speed, and every rank passes the same
barriers whatever its calibrated sizes (a rank that skipped one would hang the others); and the DRAM and cache
triads the profile's roof per level measures."""

from __future__ import annotations

import os

import pytest
import torch

from orchestrator.core.profile import levels as lv
from orchestrator.run.rank import roof
from orchestrator.run.rank.profile_replay import cached_triad_gbs, level_roofs


@pytest.fixture(autouse=True)
def one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def test_every_primitive_is_measured_each_behind_its_barrier():
    barriers, calls = [], []
    rates = roof.compute_roof("fp32", seconds=0.01, barrier=lambda: barriers.append(1), on_call=lambda: calls.append(1))
    convs = [f"{s.name()} {fmt} {d}" for s in roof.ROOF_CONVS for fmt in roof.FORMATS
             for d in (("forward", "backward") if s.backward else ("forward",))]
    assert list(rates) == [f"gemm {n}" for n in roof.ROOF_GEMM_SIZES] + convs
    assert len(barriers) == len(rates) and len(calls) >= len(rates) * (2 + roof.MIN_CALLS)
    assert all(0 < r["gflops"] <= r["best_gflops"] for r in rates.values())


def test_a_rank_with_a_smaller_gemm_passes_the_same_barriers():
    counts = []
    for max_gemm in (256, 1024):
        barriers: list[int] = []
        rates = roof.compute_roof("fp32", max_gemm=max_gemm, seconds=0.0, barrier=lambda b=barriers: b.append(1))
        counts.append(len(barriers))
        assert ("gemm 1024" in rates) == (max_gemm == 1024)
    assert counts[0] == counts[1]


def test_a_convolution_is_sized_to_the_cpu_and_counted_as_benchdnn_counts_it():
    shape = roof.ConvShape(256, 16, 3)
    assert shape.descriptor(8) == "mb8_ic256oc256_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1"
    # 277 MFLOP per image (46² taps inside the input, not 16²·9): 30 ms holds 8 at 100 GFLOP/s, 1 emulated
    assert [roof.conv_batch(shape, g) for g in (100.0, 30.0, 3.0)] == [8, 3, 1]


def test_the_profile_s_roof_is_the_best_call_of_any_primitive():
    peak = roof.compute_peak(1, "fp32", seconds=0.05)
    assert peak["gflops"] == max(peak["gemm_gflops"], *peak["roof_by_primitive"].values())
    assert peak["conv_gflops"] == max(g for n, g in peak["roof_by_primitive"].items() if "conv" in n)


def test_a_cached_triad_measures_a_bandwidth():
    assert cached_triad_gbs(256 * 1024, runs=20) > 0


def test_the_roof_per_level_sizes_each_triad_inside_its_level():
    cpus = sorted(os.sched_getaffinity(0))[:1]
    rows = level_roofs(cpus, threads=1)
    if not rows:
        pytest.skip("this machine's sysfs lists no caches")
    by_level = {r["level"]: r for r in rows}
    assert list(by_level)[-1] == lv.DRAM and by_level[lv.DRAM]["triad_bytes"] >= lv.DRAM_MIN_BYTES
    for name, r in by_level.items():
        if name == "L1":
            assert r["gbs"] is None
        elif name != lv.DRAM:
            assert 0 < r["triad_bytes"] <= r["fits_bytes"] and r["gbs"] > 0


@pytest.mark.isa
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_roof_ends_in_bounded_time_where_bf16_is_emulated(precision):
    """Under ONEDNN_MAX_CPU_ISA=AVX2 a bf16 convolution is emulated, 30-65× slower: sized by the small GEMM's
    rate, each call stays short and every call is a heartbeat for the watchdog."""
    import time

    beats = [time.perf_counter()]
    rates = roof.compute_roof(precision, max_gemm=512, seconds=0.05, on_call=lambda: beats.append(time.perf_counter()))
    assert beats[-1] - beats[0] < 60 and max(b - a for a, b in zip(beats, beats[1:])) < 10
    assert all(r["gflops"] > 0 for r in rates.values())
