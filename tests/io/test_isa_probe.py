"""Reading the CPU's flags and probing bf16 against fp32 on this machine (orchestrator.io.isa): real torch."""

from __future__ import annotations

import os

import pytest

from orchestrator.io import isa


def test_flags_and_model_from_a_cpuinfo_file(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7763\nflags\t\t: fpu avx2 fma avx512f\n\n"
                       "processor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n")
    assert isa.cpu_flags(cpuinfo) == ("fpu avx2 fma avx512f", "AMD EPYC 7763")
    got = isa.from_flags(cpuinfo)
    assert got.features == ("avx2", "avx512f") and got.cpu_model == "AMD EPYC 7763" and not got.bf16_native
    assert isa.cpu_flags(tmp_path / "missing") == ("", "")


@pytest.mark.isa
def test_the_probe_times_both_precisions_and_agrees_with_what_the_cpu_is():
    got = isa.probe()
    assert got.source == "probe" and got.fp32_gflops and got.bf16_gflops
    assert got.fp32_gflops > 1.0          # any x86-64 core multiplies fp32 faster than 1 GFLOP/s
    assert got.torch_capability in ("AVX512", "AVX2", "DEFAULT", "ZVECTOR", "VSX")
    capped = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in ("AVX2", "AVX", "SSE41")
    if capped or not any(f in got.features for f in ("avx512_bf16", "amx_bf16")):
        # no bf16 instructions in use: emulated bf16 is many times slower (32-65× seen)
        assert not got.bf16_native and got.bf16_slowdown is not None and got.bf16_slowdown > 2
    else:
        assert got.bf16_native
    assert got.isa_cap == (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"))


@pytest.mark.parametrize("var", ["ONEDNN_MAX_CPU_ISA"])
def test_the_cap_is_read_from_the_environment(monkeypatch, var):
    monkeypatch.setenv(var, "AVX2")
    assert isa.isa_cap() == "AVX2"


@pytest.mark.isa
def test_auto_is_decided_on_this_cpu_where_no_sweep_decided_it():
    from workloads.retinanet.workload import RetinaNetParams

    native = isa.probe().bf16_native
    assert isa.decided_here(RetinaNetParams(image_size=128)).precision == ("bf16" if native else "fp32")
    assert isa.decided_here(RetinaNetParams(image_size=64)).precision == "fp32"   # bf16 needs >= 96 px
    assert isa.decided_here(RetinaNetParams(precision="bf16")).precision == "bf16"   # explicit stays
    other = object()
    assert isa.decided_here(other) is other                                           # no precision: unchanged
