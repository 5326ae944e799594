"""The projection of a profiled step onto another CPU, on hand-computed cases."""

import pytest

from orchestrator.core.profile import projection as pj
from orchestrator.core.profile.roofline import conv_cost, conv_problem

# 3×3 convolution, 8 × 256 → 256 channels at 16×16, pad 1: 2·8·256·256·46² = 2,218,786,816 FLOPs (46 taps
# per row of 16 outputs × 3 taps, less the 2 that fall in the padding); bf16 bytes: (8·256·256 src + 256·256·9
# weights + 8·256·256 dst) × 2 = 3,276,800. Intensity 677.1 FLOP/byte: compute-bound on any CPU here.
CONV = "mb8_ic256oc256_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1"
# A reorder of 256·256·3·3 = 589,824 bf16 elements: 2 + 2 bytes each, no FLOPs.
REORDER = "256x256x3x3"
SOURCE = pj.Roof(gflops=200.0, gbs=20.0)
AVX2 = pj.Roof(gflops=80.0, gbs=16.0)


def _rank(plain_ms: float = 100.0) -> dict:
    return {"steps": 2, "plain_step_ms": [plain_ms, plain_ms + 2, plain_ms - 2],
            "onednn": {"shapes": [
                {"kind": "convolution", "direction": "forward", "problem": CONV, "dtype": "bf16", "calls": 4,
                 "time_ms": 80.0},
                {"kind": "reorder", "direction": "undef", "problem": REORDER, "dtype": "bf16", "dst_dtype": "bf16",
                 "calls": 2, "time_ms": 10.0},
                {"kind": "pooling", "direction": "forward", "problem": "mb8ic64_ih32oh16", "dtype": "bf16",
                 "calls": 2, "time_ms": 6.0}]}}


def test_the_convolution_cost_behind_these_cases():
    cost = conv_cost(conv_problem(CONV), 2)
    assert (cost.flops, cost.bytes) == (2_218_786_816, 3_276_800)


def test_each_primitive_is_scaled_by_whichever_roof_bounds_it():
    p = pj.project_rank(_rank(), 0, SOURCE, AVX2)
    rows = {r.kind: r for r in p.rows}
    # convolution: 40 ms per step, compute-bound on both: × 200 / 80 = 2.5 → 100 ms
    assert (rows["convolution"].bound, rows["convolution"].scale) == ("compute", pytest.approx(2.5))
    assert rows["convolution"].projected_ms == pytest.approx(100.0)
    # reorder: 5 ms per step, no FLOPs: × 20 / 16 = 1.25 → 6.25 ms
    assert (rows["reorder"].bound, rows["reorder"].projected_ms) == ("bandwidth", pytest.approx(6.25))
    # pooling has no cost model here: scaled as everything else (kept): 3 ms
    assert (rows["pooling"].bound, rows["pooling"].projected_ms) == ("other", 3.0)
    # plain step 100 ms (median of 98, 100, 102), primitives 48 ms: 52 ms elsewhere
    assert (p.plain_step_ms, p.onednn_ms, p.other_ms) == (100.0, 48.0, 52.0)
    assert p.projected_step_ms(pj.OtherRule.SAME) == pytest.approx(100 + 6.25 + 3 + 52)
    assert p.projected_step_ms(pj.OtherRule.BANDWIDTH) == pytest.approx(100 + 6.25 + 3 + 52 * 1.25)
    assert p.projected_step_ms(pj.OtherRule.PEAK) == pytest.approx(100 + 6.25 + 3 + 52 * 2.5)


def test_a_primitive_that_crosses_the_ridge_scales_by_the_roofline_mix():
    # intensity 6: source roof min(200, 6·20) = 120 (memory-bound), target min(80, 6·16) = 80 (compute-bound)
    assert pj.primitive_scale(6.0, SOURCE, AVX2) == pytest.approx(120 / 80)
    assert pj._bound(6.0, SOURCE, AVX2) == "ridge"
    assert pj._bound(1.0, SOURCE, AVX2) == "memory"


def test_the_step_is_the_slowest_ranks_and_kinds_add_up():
    target = {"results": [_rank(100.0), _rank(130.0)]}
    ranks = pj.project_target(target, SOURCE, AVX2)
    assert pj.projected_step_ms(ranks) == pytest.approx(100 + 6.25 + 3 + 82)   # rank 1: 130 − 48 elsewhere
    kinds = pj.by_kind(ranks)
    assert kinds["convolution forward"] == (40.0, pytest.approx(100.0))
    assert kinds[pj.OUTSIDE] == (52.0, 52.0)
    assert sum(m for m, _ in kinds.values()) == pytest.approx(ranks[0].plain_step_ms)


def test_the_same_cpu_projects_the_measured_step():
    ranks = pj.project_target({"results": [_rank()]}, SOURCE, SOURCE)
    assert pj.projected_step_ms(ranks) == pytest.approx(100.0)


def test_primitives_above_the_plain_step_leave_nothing_elsewhere():
    p = pj.project_rank(_rank(plain_ms=40.0), 0, SOURCE, SOURCE)   # 48 ms of primitives in a 40 ms step
    assert p.other_ms == 0.0


def test_errors_roofs_and_topology_roofs():
    assert pj.relative_error(110.0, 100.0) == pytest.approx(0.10)
    with pytest.raises(ValueError, match=r"measured\(0.0\) must be > 0"):
        pj.relative_error(1.0, 0.0)
    with pytest.raises(ValueError, match=r"gflops\(0.0\) > 0"):
        pj.Roof(0.0, 1.0)
    assert pj.scaled_roof(40.0, 5.0, threads=4) == pj.Roof(160.0, 20.0)


def test_validation_compares_kind_by_kind_and_the_step():
    native = pj.project_target({"results": [_rank()]}, SOURCE, AVX2)   # projected step 161.25 ms
    capped = _rank(plain_ms=170.0)
    capped["onednn"]["shapes"][0]["time_ms"] = 180.0                   # 90 ms per step of convolution
    capped["onednn"]["shapes"][0]["implementation"] = "brg_conv_fwd:avx2"
    rows = {r.part: r for r in pj.validation_rows(native, {"results": [capped]})}
    assert rows["convolution forward"].to_json() == {"part": "convolution forward", "native_ms": 40.0, "projected_ms": 100.0,
                                           "measured_ms": 90.0, "error": pytest.approx(100 / 90 - 1)}
    # capped: 170 ms plain step, 90 + 5 + 3 ms of primitives: 72 ms elsewhere, against 52 projected (kept)
    assert rows[pj.OUTSIDE].measured_ms == 72.0 and rows[pj.OUTSIDE].projected_ms == 52.0
    assert rows["step (slowest rank)"].error == pytest.approx(161.25 / 170 - 1)
    assert pj.kernels_above({"results": [capped]}) == []
    capped["onednn"]["shapes"][1]["implementation"] = "jit:avx512_core"
    assert pj.kernels_above({"results": [capped]}) == ["jit:avx512_core"]


def test_a_class_with_its_own_measured_roof_on_both_cpus_scales_by_that_roof():
    """Under the AVX2 cap the Zen 4 here ran GEMMs and forward convolutions as fast as natively and
    backward-weights convolutions 1.44× slower: each class is scaled by its own kernel's roof."""
    src = pj.Roof(200.0, 20.0, {"convolution forward": 150.0})
    tgt = pj.Roof(80.0, 16.0, {"convolution forward": 100.0})
    rows = {r.kind: r for r in pj.project_rank(_rank(), 0, src, tgt).rows}
    assert rows["convolution"].scale == pytest.approx(1.5)      # 150 / 100, not 200 / 80
    # a class measured on one CPU only falls back to the overall roofs on both
    one_sided = pj.Roof(80.0, 16.0, {"convolution backward_data": 10.0})
    assert pj.project_rank(_rank(), 0, src, one_sided).rows[0].scale == pytest.approx(2.5)
    with pytest.raises(ValueError, match="every class's roof > 0"):
        pj.Roof(1.0, 1.0, {"convolution forward": 0.0})
