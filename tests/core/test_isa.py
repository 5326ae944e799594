"""The CPU verdict and the precision chosen from it (orchestrator.core.machine.isa): pure, with made-up probe figures."""

from __future__ import annotations

import pytest

from orchestrator.core.machine.isa import FILE, FLAGS, PROBE, CpuIsa, features_from_flags, resolve_precision

# What the probe saw on the development machine (AMD EPYC Zen 4, one core), natively and under the AVX2 cap
NATIVE = CpuIsa(features=("avx2", "avx512f", "avx512_bf16"), fp32_gflops=102.0, bf16_gflops=204.0, source=PROBE)
EMULATED = CpuIsa(features=("avx2", "avx512f", "avx512_bf16"), fp32_gflops=102.0, bf16_gflops=3.2, source=PROBE,
                  isa_cap="AVX2")


def test_the_probe_decides_over_the_flags():
    # the flags say avx512_bf16 in both cases; only the probe sees that the cap makes bf16 32x slower
    assert NATIVE.bf16_native and not EMULATED.bf16_native
    assert EMULATED.bf16_slowdown == pytest.approx(102.0 / 3.2)
    assert EMULATED.verdict() == ("bf16 not native: a bf16 GEMM ran 31.9× slower than fp32 "
                                  "(probe: 3.2 against 102.0 GFLOP/s on one core)")
    assert NATIVE.verdict().startswith("bf16 native: a bf16 GEMM ran 2.0× as fast as fp32")


def test_bf16_no_faster_than_fp32_is_not_native():
    # AVX-512 without bf16 instructions: oneDNN converts, at about fp32's speed; bf16 would only lose precision
    assert not CpuIsa(fp32_gflops=100.0, bf16_gflops=95.0, source=PROBE).bf16_native
    assert CpuIsa(fp32_gflops=100.0, bf16_gflops=100.0, source=PROBE).bf16_native


def test_flags_alone_and_the_onednn_cap():
    assert features_from_flags("fpu sse avx2 fma amx_tile amx_bf16 avx512f") == ("avx2", "avx512f", "amx_tile",
                                                                                   "amx_bf16")
    assert CpuIsa(features=("avx2", "amx_bf16"), source=FLAGS).bf16_native
    assert not CpuIsa(features=("avx2", "avx512f"), source=FLAGS).bf16_native
    capped = CpuIsa(features=("avx512_bf16",), isa_cap="AVX2", source=FLAGS)
    assert not capped.bf16_native and "ONEDNN_MAX_CPU_ISA=AVX2 keeps oneDNN below it" in capped.verdict()
    assert CpuIsa(features=("avx512_bf16",), isa_cap="AVX512_CORE_BF16", source=FLAGS).bf16_native


def test_a_stated_verdict_wins_and_round_trips():
    stated = CpuIsa(features=("avx2",), native_bf16=True, source=FILE)
    assert stated.bf16_native and stated.verdict() == "bf16 native (as the topology file states)"
    for isa in (NATIVE, EMULATED, stated):
        assert CpuIsa.from_dict(isa.to_dict()) == isa


@pytest.mark.parametrize("isas,chosen", [([NATIVE], "bf16"), ([EMULATED], "fp32"), ([NATIVE, EMULATED], "fp32"),
                                         ([None], "fp32"), ([], "fp32")])
def test_auto_is_bf16_only_where_every_node_is_native(isas, chosen):
    choice = resolve_precision("auto", isas)
    assert choice.chosen == chosen and choice.error is None
    assert choice.reason.startswith(f"auto: {chosen}")


def test_auto_names_the_node_and_its_evidence():
    choice = resolve_precision("auto", [NATIVE, EMULATED], names=["a", "b"])
    assert choice.reason == f"auto: fp32, because on b: {EMULATED.verdict()}"
    assert choice.per_node == (f"a: {NATIVE.verdict()}", f"b: {EMULATED.verdict()}")


def test_explicit_bf16_on_an_emulating_cpu_is_refused_unless_allowed():
    refused = resolve_precision("bf16", [EMULATED], names=["vm"])
    assert refused.chosen == "bf16" and refused.error is not None
    assert refused.error.startswith("precision bf16 on node vm: bf16 not native: a bf16 GEMM ran 31.9× slower")
    assert "constraints.allow_slow_bf16: true" in refused.error
    allowed = resolve_precision("bf16", [EMULATED], allow_slow_bf16=True)
    assert allowed.chosen == "bf16" and allowed.error is None and "allow_slow_bf16" in allowed.reason
    assert resolve_precision("bf16", [NATIVE]).error is None
    assert resolve_precision("fp32", [EMULATED]) .chosen == "fp32"
