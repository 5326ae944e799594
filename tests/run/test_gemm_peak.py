"""The GEMM peak on a slow CPU is slow, not hung: its matmul is sized from a probe, its time is bounded, and
every matmul is a heartbeat for the watchdog (orchestrator.run.rank.protocol)."""

from __future__ import annotations

import time

import pytest
import torch

from orchestrator.run.rank import protocol


def test_the_gemm_is_sized_to_the_time_one_matmul_may_take():
    torch.set_num_threads(1)
    small, large = protocol.gemm_size(torch.float32, matmul_s=1e-4), protocol.gemm_size(torch.float32, matmul_s=5.0)
    assert small == protocol.GEMM_MIN_SIZE            # 0.1 ms holds no more than the smallest size
    assert large == protocol.GEMM_MAX_SIZE            # 5 s holds a 2048² fp32 matmul on any x86-64 core
    assert all(s % protocol.GEMM_SIZE_STEP == 0 for s in (small, large))


@pytest.mark.isa
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_peak_ends_in_bounded_time_and_beats_per_matmul(precision):
    torch.set_num_threads(1)
    beats = []
    started = time.perf_counter()
    report = protocol.gemm_peak(1, precision, seconds=0.5, on_matmul=lambda: beats.append(time.perf_counter()))
    took_s = time.perf_counter() - started
    # 2 warm-up matmuls and at least 3 timed ones, each followed by a heartbeat
    assert len(beats) == report["matmuls"] + 2 and report["matmuls"] >= 3
    # sized for ~0.5 s per matmul: 5 matmuls, the window and the sizing stay far below the watchdog's 180 s
    # even where bf16 is emulated (a 2048² bf16 matmul took ~14 s on an AVX2-only core; unsized, ~70 s here)
    assert took_s < 30, took_s
    assert max(b - a for a, b in zip([started, *beats], beats)) < 10
    assert report["precision"] == precision and report["gflops"] > 0
