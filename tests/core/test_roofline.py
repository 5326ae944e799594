"""Roofline arithmetic against hand-computed cases."""

import pytest

from orchestrator.core import roofline as rl


def test_conv_3x3_same_padding_by_hand():
    # N=8, IC=OC=256, 16×16 → 16×16, 3×3: 2·8·256·16·16·256·9 = 2,415,919,104 FLOPs.
    c = rl.conv_problem("mb8_ic256oc256_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1")
    assert (c.mb, c.groups, c.ic, c.oc, c.out_spatial, c.kernel) == (8, 1, 256, 256, (1, 16, 16), (1, 3, 3))
    assert rl.conv_flops(c) == 2_415_919_104
    cost = rl.conv_cost(c, 2)
    # bf16 bytes: src 8·256·16·16 + weights 256·256·9 + dst 8·256·16·16 = 524,288+589,824+524,288 elements.
    assert cost.bytes == 2 * (524_288 + 589_824 + 524_288)
    assert cost.intensity == pytest.approx(2_415_919_104 / 3_276_800)


def test_grouped_strided_conv_by_hand():
    # ResNeXt's grouped 3×3: N=2, G=32, IC=OC=128, 56→28 with stride 2: 2·2·128·28·28·(128/32)·9 = 14,450,688.
    c = rl.conv_problem("mb2_g32ic128oc128_ih56oh28kh3sh2dh0ph1_iw56ow28kw3sw2dw0pw1")
    assert c.groups == 32 and c.stride == (1, 2, 2) and c.padding == (0, 1, 1)
    assert rl.conv_flops(c) == 14_450_688
    assert rl.conv_cost(c, 4).bytes == 4 * (2 * 128 * 56 * 56 + 128 * 4 * 9 + 2 * 128 * 28 * 28)


def test_pointwise_conv_with_defaults():
    # 1×1 with only the sizes printed: stride 1, no padding, groups 1. 2·4·64·7·7·32 = 802,816.
    c = rl.conv_problem("mb4_ic32oc64_ih7oh7kh1_iw7ow7kw1")
    assert rl.conv_flops(c) == 802_816


def test_matmul_by_hand():
    mm = rl.matmul_problem("2x512:512x10")
    assert (mm.batch, mm.m, mm.k, mm.n) == (1, 2, 512, 10)
    cost = rl.matmul_cost(mm, 4)
    assert cost.flops == 2 * 2 * 512 * 10 == 20_480
    assert cost.bytes == 4 * (2 * 512 + 512 * 10 + 2 * 10)


def test_batched_matmul_broadcasts():
    mm = rl.matmul_problem("4x3x5:1x5x7")
    assert (mm.batch, mm.m, mm.k, mm.n) == (4, 3, 5, 7)
    assert rl.matmul_cost(mm, 2).flops == 2 * 4 * 3 * 5 * 7


def test_inner_product_counts_spatial_inputs():
    # N=2, IC=64 over 7×7, OC=10: K = 64·49 = 3136 → 2·2·10·3136 = 125,440.
    assert rl.inner_product_cost("mb2ic64ih7iw7oc10", 4).flops == 125_440


def test_streaming_kinds_move_bytes():
    assert rl.primitive_cost("reorder", "256x256x3x3", "bf16") == rl.Cost(0.0, 2 * 589_824 * 2)
    assert rl.primitive_cost("eltwise", "2x8x16x16", "f32") == rl.Cost(4096.0, 2 * 4096 * 4)
    assert rl.primitive_cost("batch_normalization", "mb2ic8ih16iw16", "f32").bytes == 2 * 4096 * 4
    assert rl.primitive_cost("pooling", "mb2ic8_ih16oh8kh2sh2ph0_iw16ow8kw2sw2pw0", "f32") is None


def test_attainable_is_the_lower_roof():
    # Ridge at 300 GFLOP/s ÷ 40 GB/s = 7.5 FLOP/byte.
    assert rl.ridge_point(300.0, 40.0) == 7.5
    assert rl.attainable_gflops(2.0, 300.0, 40.0) == 80.0
    assert rl.attainable_gflops(100.0, 300.0, 40.0) == 300.0
    with pytest.raises(ValueError, match=r"peak_gflops\(0.0\) and bandwidth_gbs\(40.0\) must be > 0"):
        rl.attainable_gflops(1.0, 0.0, 40.0)


@pytest.mark.parametrize("desc, match", [("2x512", "expected AxK:KxN"), ("2x512:256x10", "inner dimensions"),
                                         ("*x512:512x10", "runtime dimensions")])
def test_bad_matmul_descriptors(desc, match):
    with pytest.raises(ValueError, match=match):
        rl.matmul_problem(desc)


def test_bad_conv_descriptor():
    with pytest.raises(ValueError, match="not a convolution descriptor"):
        rl.conv_problem("2x8x16x16")
