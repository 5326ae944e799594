"""The CPU what-if's arithmetic, by hand."""

from __future__ import annotations

import pytest

from orchestrator.core.machine.isa import CpuIsa
from orchestrator.core.predict.machine import SourceCpu, what_if


def test_peak_ratio_from_the_slowest_target_node_and_bandwidth_at_the_other_end():
    source = SourceCpu("EPYC", "bf16", 400.0, CpuIsa(triad_gb_per_s_per_core=10.0))
    nodes = [CpuIsa(peak_bf16_gflops_per_core=1200.0, triad_gb_per_s_per_core=8.0),
             CpuIsa(peak_bf16_gflops_per_core=800.0, triad_gb_per_s_per_core=12.0)]
    w = what_if(source, nodes)
    assert w.compute_scale == pytest.approx(400 / 800)        # the 800 node paces the step: ×2
    assert w.other_end_scale == pytest.approx(10 / 8)          # memory-bound end: the 8 GB/s node, ×0.8
    assert "bf16 GEMM peak" in w.note and "800.0 ÷ 400.0 GFLOP/s = ×2.00" in w.note
    assert "memory-bandwidth ratio ×0.80" in w.note


def test_probe_is_compared_only_with_a_probe():
    probe_only = [CpuIsa(fp32_gflops=90.0)]
    assert what_if(SourceCpu("A", "fp32", 100.0), probe_only).compute_scale == 1.0    # a peak is not a probe
    w = what_if(SourceCpu("A", "fp32", 100.0, CpuIsa(fp32_gflops=30.0)), probe_only)
    assert w.compute_scale == pytest.approx(30 / 90) and "probe" in w.note
    assert w.other_end_scale == 1.0 and "no change" in w.note


def test_a_node_without_figures_leaves_compute_as_measured():
    w = what_if(SourceCpu("A", "fp32", 100.0), [CpuIsa(peak_fp32_gflops_per_core=200.0), None])
    assert (w.compute_scale, w.other_end_scale) == (1.0, 1.0)
    assert w.note.startswith("CPU assumed as fast as the measured A")
