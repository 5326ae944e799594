"""Layer attribution and step coverage from profiler events, on hand-made event trees."""

import pytest

from orchestrator.core.planning.layout import layout_label, parse_layout
from orchestrator.core.planning.trial import Trial
from orchestrator.core.profile.events import UNATTRIBUTED_BACKWARD, Event, coverage, layer_times

BWD = "autograd::engine::evaluate_function: "


def _step() -> list[Event]:
    """One 1000 µs step: module `net` holds `net.conv` (an op with seq 1) and an op of its own (seq 2);
    a region `focal_loss` (seq 3); backward nodes for seq 1, 2, 3 and one for an unknown seq 9."""
    return [
        Event(0, "ProfilerStep#1", 0, 1000, None, -1),
        Event(1, "module::net", 0, 400, 0, -1),
        Event(2, "module::net.conv", 10, 210, 1, -1),
        Event(3, "aten::conv2d", 20, 200, 2, 1),
        Event(4, "aten::mkldnn_convolution", 30, 190, 3, -1),   # inner op: no sequence number
        Event(5, "aten::relu", 220, 380, 1, 2),
        Event(6, "region::focal_loss", 400, 500, 0, -1),
        Event(7, "aten::sigmoid", 410, 490, 6, 3),
        Event(8, BWD + "ConvolutionBackward0", 500, 800, 0, 1),
        Event(9, "aten::convolution_backward", 510, 790, 8, -1),
        Event(10, BWD + "ReluBackward0", 800, 850, 0, 2),
        Event(11, BWD + "SigmoidBackward0", 850, 950, 0, 3),
        Event(12, BWD + "AccumulateGrad", 950, 990, 0, 9),
    ]


def test_forward_is_exclusive_of_nested_regions_and_backward_follows_sequence_numbers():
    rows = {r.name: (r.forward_ms, r.backward_ms) for r in layer_times(_step(), steps=1)}
    assert rows == {"net.conv": (0.2, 0.3), "net": (0.2, 0.05), "focal_loss": (0.1, 0.1),
                    UNATTRIBUTED_BACKWARD: (0.0, 0.04)}


def test_layer_times_are_per_step_and_sorted():
    two = _step() + [Event(e.id + 100, e.name, e.start_us + 1000, e.end_us + 1000,
                           None if e.parent is None else e.parent + 100, e.seq) for e in _step()]
    rows = layer_times(two, steps=2)
    assert [r.name for r in rows] == ["net.conv", "net", "focal_loss", UNATTRIBUTED_BACKWARD]
    assert rows[0].total_ms == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"steps\(0\) must be >= 1"):
        layer_times(two, steps=0)


def test_coverage_counts_gaps_in_steps_and_regions_as_other():
    cov = coverage(_step())
    # Gaps: the step's self time (1000 − 400 − 100 − 300 − 50 − 100 − 40 = 10 µs), net's own
    # (400 − 200 − 160 = 40), net.conv's (200 − 180 = 20), focal_loss's (100 − 80 = 20): 90 µs.
    assert cov.step_ms == 1.0
    assert cov.other_ms == pytest.approx(0.09)
    assert cov.named_share == pytest.approx(0.91)


def test_coverage_needs_step_markers():
    with pytest.raises(ValueError, match="no ProfilerStep"):
        coverage([Event(0, "aten::relu", 0, 1, None, -1)])


def test_layouts():
    assert parse_layout("2x1x8") == Trial(2, 1, 8)
    assert parse_layout(" 1 × 2 × 16 ") == Trial(1, 2, 16)
    assert layout_label(Trial(1, 2, 8)) == "1x2x8"
    with pytest.raises(ValueError, match=r"'1x2' is not RxTxB"):
        parse_layout("1x2")
    with pytest.raises(ValueError, match=r"'0x2x8': ranks must be >= 1"):
        parse_layout("0x2x8")


def test_the_gap_after_a_ddp_bucket_copy_is_the_allreduce_wait():
    evs = [Event(0, "ProfilerStep#1", 0, 1000, None, -1),
           Event(1, "aten::conv2d", 0, 500, 0, 1),
           Event(2, "torch.distributed.ddp.reducer::copy_bucket_to_grad", 500, 520, 0, -1),
           Event(3, "aten::as_strided", 820, 830, 0, -1),      # 300 µs waited for the next bucket
           Event(4, "Optimizer.step#AdamW.step", 900, 990, 0, -1)]  # 70 µs of Python before it
    cov = coverage(evs)
    assert cov.wait_ms == pytest.approx(0.3)
    assert cov.other_ms == pytest.approx(0.08)                    # 70 + the 10 µs at the end
    # Named ops alone: 500 + 20 + 10 + 90 = 620 µs. Earlier this test asserted 0.92, the named ops
    # plus the inferred wait: the wait is now apart, in attributed_share, never in the named share.
    assert cov.named_share == pytest.approx(0.62)
    assert cov.attributed_share == pytest.approx(0.92)


def test_a_record_function_range_is_not_a_named_op():
    # The optimizer's range (900–990 µs) holds one op of 30 µs: its other 60 µs are Python, not an op.
    evs = [Event(0, "ProfilerStep#1", 0, 1000, None, -1),
           Event(1, "aten::conv2d", 0, 800, 0, 1),
           Event(2, "Optimizer.step#AdamW.step", 900, 990, 0, -1, annotation=True),
           Event(3, "aten::_foreach_add_", 930, 960, 2, -1)]
    cov = coverage(evs)
    assert cov.named_ms == pytest.approx(0.83)        # 800 + 30
    assert cov.other_ms == pytest.approx(0.17)        # step's own 110 + the range's own 60
    assert cov.named_ms + cov.other_ms + cov.wait_ms == pytest.approx(cov.step_ms)
