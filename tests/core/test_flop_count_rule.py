"""orch's FLOP rule for convolutions as aten states them (core.profile.flop_count): benchdnn's count (only the kernel taps
inside the input, core.profile.roofline) from torch's shapes and arguments, the forward and each gradient the
same, worked out by hand. torch's own formula, 2 · N · OC · OH · OW · (IC / G) · KH · KW, is beside each case where
it differs."""

import pytest

from orchestrator.core.profile import flop_count as fc
from orchestrator.core.profile import roofline as rl


def test_a_padded_3x3_on_a_4x4_map_counts_the_taps_inside():
    # N=1, IC=2, OC=3, 4×4 → 4×4, 3×3 pad 1: per row the edge outputs have 2 taps inside, the inner ones 3:
    # 2+3+3+2 = 10, per plane 100 (torch: 16·9 = 144). 2·1·3·2·100 = 1,200 (torch: 1,728).
    args = dict(stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1)
    assert fc.conv_forward_flops([1, 2, 4, 4], [3, 2, 3, 3], [1, 3, 4, 4], **args) == 1_200
    assert 2 * 1 * 3 * 2 * 4 * 4 * 3 * 3 == 1_728
    # the backward: each gradient the forward's; the first layer's computes the weights' only
    assert fc.conv_backward_flops([1, 3, 4, 4], [1, 2, 4, 4], [3, 2, 3, 3], output_mask=[True, True, True],
                                  **args) == 2_400
    assert fc.conv_backward_flops([1, 3, 4, 4], [1, 2, 4, 4], [3, 2, 3, 3], output_mask=[False, True, False],
                                  **args) == 1_200
    assert fc.conv_backward_flops([1, 3, 4, 4], [1, 2, 4, 4], [3, 2, 3, 3], output_mask=[False, False, True],
                                  **args) == 0


def test_retinanets_deep_maps_are_mostly_padding():
    # P7 of the small RetinaNet: 3×3 pad 1 on a 1×1 map, 256 → 256 channels, N=8: 1 tap of 9 inside,
    # 2·8·256·256 = 1,048,576 (torch: 9,437,184)
    assert fc.conv_forward_flops([8, 256, 1, 1], [256, 256, 3, 3], [8, 256, 1, 1], stride=[1, 1], padding=[1, 1],
                                 dilation=[1, 1], groups=1) == 1_048_576
    # a 2×2 map: per row 2 + 2 taps of 6, 16 of 36 per plane: 2·8·256·256·16 = 16,777,216 (torch: 37,748,736)
    assert fc.conv_forward_flops([8, 256, 2, 2], [256, 256, 3, 3], [8, 256, 2, 2], stride=[1, 1], padding=[1, 1],
                                 dilation=[1, 1], groups=1) == 16_777_216


def test_grouped_strided_conv_matches_the_roofline_count():
    # ResNeXt's grouped 3×3 (tests/core/test_roofline.py): 2·2·128·4·83² = 14,108,672, and each gradient as much
    c = fc.torch_conv([2, 128, 56, 56], [128, 4, 3, 3], [2, 128, 28, 28], stride=[2, 2], padding=[1, 1],
                      dilation=[1, 1], groups=32)
    assert c == rl.conv_problem("mb2_g32ic128oc128_ih56oh28kh3sh2dh0ph1_iw56ow28kw3sw2dw0pw1")
    assert rl.conv_flops(c) == 14_108_672
    assert fc.conv_backward_flops([2, 128, 28, 28], [2, 128, 56, 56], [128, 4, 3, 3], stride=[2, 2],
                                  padding=[1, 1], dilation=[1, 1], groups=32,
                                  output_mask=[True, True, False]) == 2 * 14_108_672


def test_dilation_is_torchs_and_one_value_stands_for_every_dimension():
    # conv1d, torch's dilation 2 (oneDNN's 1): 5 inputs, 3 taps 2 apart, pad 2 → 5 outputs with 2,2,3,2,2 taps
    # inside: 11 (tests/core/test_roofline.py); N = IC = OC = 1: 22 FLOPs (torch: 2·5·3 = 30)
    assert fc.conv_forward_flops([1, 1, 5], [1, 1, 3], [1, 1, 5], stride=[1], padding=[2], dilation=[2],
                                 groups=1) == 22
    # a 2-d convolution given one stride, padding and dilation for both dimensions (aten expands them so)
    assert fc.conv_forward_flops([1, 2, 4, 4], [3, 2, 3, 3], [1, 3, 4, 4], stride=[1], padding=[1], dilation=[1],
                                 groups=1) == 1_200
    # 3-d: a 3×3×3 pad 1 kernel on a 1×1×1 volume, 1 tap of 27: 2·1·4·2·1 = 16
    assert fc.conv_forward_flops([1, 2, 1, 1, 1], [4, 2, 3, 3, 3], [1, 4, 1, 1, 1], stride=[1, 1, 1],
                                 padding=[1, 1, 1], dilation=[1, 1, 1], groups=1) == 16


def test_a_transposed_convolution_walks_its_input_against_its_output():
    # conv_transpose1d: 3 inputs, kernel 3, stride 2, padding 1, output_padding 1 → 6 outputs. Input i writes
    # outputs 2i − 1 + k: i=0 → −1,0,1 (2 inside); i=1 → 1,2,3 (3); i=2 → 3,4,5 (3): 8 taps (torch: 3·3 = 9).
    # IC=2, OC=4 (weight IC × OC/G × K = 2×4×3): 2·1·4·2·8 = 128 (torch: 144)
    args = dict(stride=[2], padding=[1], dilation=[1], groups=1, transposed=True)
    assert fc.conv_forward_flops([1, 2, 3], [2, 4, 3], [1, 4, 6], **args) == 128
    assert fc.conv_backward_flops([1, 4, 6], [1, 2, 3], [2, 4, 3], output_mask=[True, True, True], **args) == 256


def test_shapes_that_are_no_convolution_are_refused_with_them():
    with pytest.raises(ValueError, match=r"not a convolution: input \[1, 2\], weight \[3, 2\]"):
        fc.torch_conv([1, 2], [3, 2], [1, 3], stride=[1], padding=[0], dilation=[1], groups=1)
    with pytest.raises(ValueError, match=r"padding \[1, 1, 1\] has 3 values for 2 spatial dimension\(s\)"):
        fc.torch_conv([1, 2, 4, 4], [3, 2, 3, 3], [1, 3, 4, 4], stride=[1], padding=[1, 1, 1], dilation=[1],
                      groups=1)


def test_a_record_says_its_rule_or_is_read_as_torchs_own():
    assert fc.rule_of(fc.VALID_TAPS) == fc.VALID_TAPS == fc.FLOPS_RULE
    assert fc.rule_of(None) == fc.TORCH_DEFAULT                   # a record older than the field
    assert fc.rule_of(None, stated=True) == fc.STATED             # an older script record: the script's figure
    assert fc.rule_of(fc.STATED) == fc.STATED
