"""The CPU what-if's arithmetic, by hand."""

from __future__ import annotations

import pytest

from orchestrator.core.machine.isa import CpuIsa
from orchestrator.core.predict.machine import CPU_SPREAD, SourceCpu, what_if


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


def test_a_bf16_sweep_planned_for_a_cpu_without_native_bf16_is_costed_in_fp32():
    # measured in bf16 (peak 400 per core); the target's CPU lists its flags, none of them bf16's, and states its
    # fp32 peak: the target computes in fp32, at 100 ÷ 400 of the measured rate, and the row says why
    source = SourceCpu("Xeon AMX", "bf16", 400.0, CpuIsa(fp32_gflops=150.0, bf16_gflops=700.0))
    target = CpuIsa(features=("avx2",), peak_fp32_gflops_per_core=100.0)
    w = what_if(source, [target])
    assert w.precision == "fp32" and w.compute_scale == pytest.approx(400 / 100)
    assert "computes in fp32" in w.note and "fp32 GEMM peak" in w.note
    # without a stated peak, the measured CPU's own probes of the two precisions slow it, and the interval spans
    # the CPUs orch has measured per core in fp32 (against the measured CPU's own fp32 probe, 150)
    w = what_if(source, [CpuIsa(features=("avx2",))])
    low, high = CPU_SPREAD["fp32"]
    assert w.precision == "fp32" and w.compute_scale == pytest.approx(700 / 150)
    assert w.spread == pytest.approx((700 / 150 * 150 / high, 700 / 150 * 150 / low))
    # a node that says nothing of its CPU keeps the measured precision
    assert what_if(source, [None]).precision == "bf16"


def test_the_cpu_spread_is_the_committed_folders_own_probes():
    import json
    from pathlib import Path

    probes: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for env in (Path(__file__).resolve().parents[2] / "results").glob("*/environment.json"):
        for cpu in json.loads(env.read_text()).get("cpus") or []:
            probes["fp32"] += [cpu["fp32_gflops"]] if cpu.get("fp32_gflops") else []
            probes["bf16"] += [cpu["bf16_gflops"]] if cpu.get("bf16_gflops") and cpu.get("bf16_native") else []
    assert CPU_SPREAD == {k: (min(v), max(v)) for k, v in probes.items()}


def test_a_target_without_figures_is_as_fast_as_measured_and_widened_to_every_cpu_measured():
    from orchestrator.core.predict.interval import basis_of, predict_cell
    from orchestrator.core.predict.step import Cell, Layout

    cells = ([Cell(Layout(1, 1, b), b / (0.01 + 0.002 * b), 0.01) for b in (8, 16, 32)]
             + [Cell(Layout(1, 2, b), b / (0.006 + 0.0012 * b), 0.01) for b in (8, 16, 32)])
    basis = basis_of(cells, {}, [], None, {})
    lay = Layout(1, 2, 16)
    same = predict_cell(basis, lay)
    other = predict_cell(basis, lay, what_if(SourceCpu("A", "fp32", 100.0, CpuIsa(fp32_gflops=100.0)), [None]))
    assert other.value == pytest.approx(same.value)               # compute as measured: no figure to scale by
    assert other.low < same.low and other.high > same.high       # but the interval spans the CPUs measured
    assert "slowest per-core speed" in other.low_why and "fastest per-core speed" in other.high_why


def test_smt_siblings_are_not_extrapolated_as_cores():
    # measured: one thread per core, 1 and 2 threads. Asked: 4 threads on 2 cores (2 hardware threads each). The
    # central value is the 2-core prediction (a busy core's sibling adds little); the high end no lower than the
    # 4-cores prediction would be; the low end the 2-core one's
    from dataclasses import replace

    from orchestrator.core.predict.interval import basis_of, predict_cell
    from orchestrator.core.predict.step import Cell, Layout

    cells = ([Cell(Layout(1, 1, b), b / (0.01 + 0.002 * b), 0.01) for b in (8, 16, 32)]
             + [Cell(Layout(1, 2, b), b / (0.006 + 0.0012 * b), 0.01) for b in (8, 16, 32)])
    basis = basis_of(cells, {}, [], None, {})
    smt = predict_cell(basis, Layout(1, 4, 16, threads_per_core=2))
    two, four = predict_cell(basis, Layout(1, 2, 16)), predict_cell(basis, Layout(1, 4, 16))
    assert smt.value == two.value and smt.low == two.low and smt.high >= four.value
    assert any("4 threads per rank on 2 cores" in n for n in smt.notes) and "SMT" in smt.high_why
    assert replace(Layout(1, 4, 16, threads_per_core=2), threads_per_core=1) == Layout(1, 4, 16)
