"""Roofline arithmetic against hand-computed cases. Convolution FLOPs follow benchdnn's `prb_t::count_ops`
(oneDNN, tests/benchdnn/conv/conv.cpp): 2 · N · OC · IC/G · (kernel taps that land inside the input),
summed over output positions; per spatial dimension the tap count is worked out by hand in each case."""

import pytest

from orchestrator.core.profile import roofline as rl


def test_conv_3x3_same_padding_by_hand():
    # N=8, IC=OC=256, 16×16 → 16×16, 3×3 pad 1. Per row: the output at each edge has one tap in the padding
    # (2 valid), the 14 inner ones have 3: 2 + 14·3 + 2 = 46; per plane 46² = 2,116 (not 16²·9 = 2,304:
    # this test asserted 2,415,919,104 when orch counted the padded taps as work).
    # 2·8·256·256·2,116 = 2,218,786,816 FLOPs.
    c = rl.conv_problem("mb8_ic256oc256_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1")
    assert (c.mb, c.groups, c.ic, c.oc, c.out_spatial, c.kernel) == (8, 1, 256, 256, (1, 16, 16), (1, 3, 3))
    assert rl.conv_flops(c) == 2_218_786_816
    cost = rl.conv_cost(c, 2)
    # bf16 bytes: src 8·256·16·16 + weights 256·256·9 + dst 8·256·16·16 = 524,288+589,824+524,288 elements.
    assert cost.bytes == 2 * (524_288 + 589_824 + 524_288)
    assert cost.intensity == pytest.approx(2_218_786_816 / 3_276_800)


def test_grouped_strided_conv_by_hand():
    # ResNeXt's grouped 3×3: N=2, G=32, IC=OC=128, 56→28, stride 2, pad 1. Output o reads inputs 2o−1..2o+1:
    # only o=0 has one tap in the padding (input −1); the last, o=27, reads 53..55, inside. Per row
    # 2 + 27·3 = 83, per plane 83² = 6,889 (not 28²·9 = 7,056; before, this test said 14,450,688).
    # 2·2·128·(128/32)·6,889 = 14,108,672.
    c = rl.conv_problem("mb2_g32ic128oc128_ih56oh28kh3sh2dh0ph1_iw56ow28kw3sw2dw0pw1")
    assert c.groups == 32 and c.stride == (1, 2, 2) and c.padding == (0, 1, 1)
    assert rl.conv_flops(c) == 14_108_672
    assert rl.conv_cost(c, 4).bytes == 4 * (2 * 128 * 56 * 56 + 128 * 4 * 9 + 2 * 128 * 28 * 28)


def test_pointwise_conv_with_defaults():
    # 1×1 with only the sizes printed: stride 1, no padding, groups 1. 2·4·64·7·7·32 = 802,816.
    c = rl.conv_problem("mb4_ic32oc64_ih7oh7kh1_iw7ow7kw1")
    assert rl.conv_flops(c) == 802_816


def test_padding_taps_are_not_work():
    # RetinaNet's P6/P7 at 1×1 spatial: a 3×3 pad-1 kernel on a 1×1 input. Of the 3 taps per row only the
    # centre (input 0) is inside; taps at −1 and +1 are padding: 1 tap of 9. 2·8·256·256·1 = 1,048,576
    # FLOPs, 9× fewer than 2·N·OC·OH·OW·IC·KH·KW = 9,437,184 (the formula orch used before).
    c = rl.conv_problem("mb8_ic256oc256_ih1oh1kh3sh1dh0ph1_iw1ow1kw3sw1dw0pw1")
    assert rl.conv_flops(c) == 1_048_576
    # 4×4 input, 3×3 pad 1, stride 1 → 4×4: edge outputs have 2 taps, inner 3: 2+3+3+2 = 10 per row,
    # 100 per plane (not 16·9 = 144). N=1, IC=2, OC=3: 2·1·3·2·100 = 1,200.
    assert rl.conv_flops(rl.conv_problem("mb1_ic2oc3_ih4oh4kh3sh1dh0ph1_iw4ow4kw3sw1dw0pw1")) == 1_200


def test_stride_and_dilation_by_hand():
    # Stride 2: 5 inputs, 3 taps, pad 1 → 3 outputs reading −1..1, 1..3, 3..5: 2 + 3 + 2 = 7 per row.
    assert rl.valid_taps(outputs=3, inputs=5, kernel=3, stride=2, padding=1, dilation=0) == 7
    # Dilation (oneDNN dh1 = torch dilation 2): 5 inputs, 3 taps 2 apart, pad 2 → 5 outputs reading
    # o−2, o, o+2: o=0 → −2,0,2 (2 inside); o=1 → −1,1,3 (2); o=2 → 0,2,4 (3); o=3 → 1,3,5 (2);
    # o=4 → 2,4,6 (2): 11 per row.
    assert rl.valid_taps(outputs=5, inputs=5, kernel=3, stride=1, padding=2, dilation=1) == 11
    # Both rows together in a descriptor: N=1, IC=OC=1, height strided, width dilated: 2·7·11 = 154.
    c = rl.conv_problem("mb1_ic1oc1_ih5oh3kh3sh2dh0ph1_iw5ow5kw3sw1dw1pw2")
    assert rl.conv_flops(c) == 154


def test_every_direction_counts_the_same_work():
    # benchdnn's count_ops is one number per problem whatever --dir: backward-data and backward-weights do
    # the forward's multiply-adds, so the log's prop_kind does not change the cost.
    desc = "mb8_ic256oc256_ih1oh1kh3sh1dh0ph1_iw1ow1kw3sw1dw0pw1"
    assert rl.primitive_cost("convolution", desc, "bf16").flops == 1_048_576


def test_deconvolution_walks_the_transposed_problem():
    # benchdnn swaps input and output for a deconvolution: 2×2 → 4×4, 3×3, stride 2, pad 1. Walking the
    # 2 inputs against the 4 outputs: i=0 reaches −1,0,1 (2 inside), i=1 reaches 1,2,3 (3): 5 per row, 25
    # per plane. N=1, IC=OC=1: 2·25 = 50.
    c = rl.conv_problem("mb1_ic1oc1_ih2oh4kh3sh2dh0ph1_iw2ow4kw3sw2dw0pw1")
    assert rl.conv_flops(c, deconvolution=True) == 50


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
    # The weights (batch 1) are read once, not four times: 4·3·5 + 1·5·7 + 4·3·7 = 179 elements of 2 bytes.
    assert rl.matmul_cost(mm, 2).bytes == 2 * (4 * 3 * 5 + 5 * 7 + 4 * 3 * 7)


def test_inner_product_counts_spatial_inputs():
    # N=2, IC=64 over 7×7, OC=10: K = 64·49 = 3136 → 2·2·10·3136 = 125,440.
    assert rl.inner_product_cost("mb2ic64ih7iw7oc10", 4).flops == 125_440


def test_streaming_kinds_move_bytes():
    assert rl.primitive_cost("reorder", "256x256x3x3", "bf16") == rl.Cost(0.0, 2 * 589_824 * 2)
    # Autocast's weight cast: read f32 (4 bytes), write bf16 (2 bytes) per element.
    assert rl.primitive_cost("reorder", "256x256x3x3", "f32", "bf16") == rl.Cost(0.0, 589_824 * (4 + 2))
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
