"""orch's FLOP counter (run.rank.flops) against hand counts and against torch's own: a convolution counts only the
kernel taps inside the input (core.profile.flop_count, as benchdnn, `orch profile` and the compute roof count them), in the
forward and in each gradient; matmuls stay as torch counts them. Then the probe's and a trial's count of a whole
step, and ResNet-50 against its published figure. Small tensors, or the meta device: no timing, no memory."""

from __future__ import annotations

import collections

import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from orchestrator.core.profile.flop_count import FLOPS_RULE  # noqa: E402
from orchestrator.run.rank.flops import CONVOLUTION_FORMULAS, count_flops, flop_counter  # noqa: E402
from orchestrator.run.rank.probe import _count_flops  # noqa: E402  (after the skips: it imports nothing heavy)
from orchestrator.run.rank.protocol import count_train_flops, make_step  # noqa: E402

# A 3×3 pad-1 convolution, 2 → 3 channels, on one 4×4 map: per row 2+3+3+2 = 10 taps inside, 100 per plane, so
# 2·3·2·100 = 1,200 FLOPs; torch's own formula counts every tap, 2·3·2·16·9 = 1,728
CONV_4X4 = 1_200
TORCH_CONV_4X4 = 1_728


def counts(run, counter=None):
    """(total, {op: FLOPs}) of `run()` under `counter` (orch's by default)."""
    counter = counter or flop_counter()
    with counter:
        run()
    return counter.get_total_flops(), {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}


def test_a_padded_conv_on_a_tiny_input_counts_the_taps_inside_forward_and_backward():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(2, 3, 3, padding=1, bias=False)
    x = torch.randn(1, 2, 4, 4)
    assert counts(lambda: conv(x))[0] == CONV_4X4
    assert counts(lambda: conv(x), FlopCounterMode(display=False))[0] == TORCH_CONV_4X4   # torch's own, today's
    # A training step on the images (no gradient for them): the forward and the weights' gradient, 1,200 each
    total, by_op = counts(lambda: conv(x).sum().backward())
    assert by_op == {"aten.convolution": CONV_4X4, "aten.convolution_backward": CONV_4X4} and total == 2 * CONV_4X4
    assert counts(lambda: conv(x).sum().backward(), FlopCounterMode(display=False))[0] == 2 * TORCH_CONV_4X4
    # An input that needs its gradient too: three times the forward (torch's: 5,184)
    xg = x.clone().requires_grad_()
    assert counts(lambda: conv(xg).sum().backward())[0] == 3 * CONV_4X4
    assert counts(lambda: conv(xg).sum().backward(), FlopCounterMode(display=False))[0] == 3 * TORCH_CONV_4X4


def test_each_gradient_of_a_grouped_conv_costs_its_forward():
    # 4 → 4 channels in 2 groups, 3×3 pad 1 on 4×4: 2·4·2·100 = 1,600 forward, 3,200 for both gradients.
    # torch's own weight gradient counts every input channel, not a group's: 2·4·4·16·9 = 4,608, twice its
    # 2,304 forward
    conv = torch.nn.Conv2d(4, 4, 3, padding=1, groups=2, bias=False)
    x = torch.randn(1, 4, 4, 4, requires_grad=True)
    assert counts(lambda: conv(x).sum().backward())[1] == {"aten.convolution": 1_600,
                                                           "aten.convolution_backward": 3_200}
    assert counts(lambda: conv(x).sum().backward(), FlopCounterMode(display=False))[1] == {
        "aten.convolution": 2_304, "aten.convolution_backward": 2_304 + 4_608}


def test_transposed_and_mkldnn_convolutions_are_counted_too():
    # conv_transpose1d, 3 → 6 positions, stride 2, padding 1, output padding 1: 8 taps of 9 land in the output;
    # 2 → 4 channels: 2·4·2·8 = 128 (torch's: 144)
    up = torch.nn.ConvTranspose1d(2, 4, 3, stride=2, padding=1, output_padding=1, bias=False)
    assert counts(lambda: up(torch.randn(1, 2, 3)))[0] == 128
    # torch.mkldnn_convolution (what torch.utils.mkldnn's modules call): torch's own table counts it 0
    x, w = torch.randn(1, 2, 4, 4), torch.randn(3, 2, 3, 3)
    run = lambda: torch.mkldnn_convolution(x, w, None, [1, 1], [1, 1], [1, 1], 1)  # noqa: E731
    assert counts(run)[0] == CONV_4X4 and counts(run, FlopCounterMode(display=False))[0] == 0


def test_channels_last_and_bf16_autocast_count_as_fp32():
    conv = torch.nn.Conv2d(2, 3, 3, padding=1, bias=False).to(memory_format=torch.channels_last)
    x = torch.randn(1, 2, 4, 4).to(memory_format=torch.channels_last)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert counts(lambda: conv(x).float().sum().backward())[0] == 2 * CONV_4X4


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen[func._overloadpacket] += 1
        return func(*args, **(kwargs or {}))


def test_every_convolution_op_a_cpu_step_dispatches_has_orchs_formula():
    """What torch dispatches for convolutions on this CPU (the counter sees the ops below autograd): 1-, 2- and
    3-d, grouped, strided and dilated, transposed, channels-last, under bf16 autocast, and mkldnn's own. A
    convolution op outside orch's table would be counted by torch's formula, or not at all."""
    torch.manual_seed(0)
    layers = [(torch.nn.Conv1d(2, 4, 3, padding=1), torch.randn(2, 2, 5)),
              (torch.nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=2, stride=2), torch.randn(2, 4, 6, 6)),
              (torch.nn.Conv3d(2, 2, 3, padding=1), torch.randn(1, 2, 3, 3, 3)),
              (torch.nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1), torch.randn(1, 2, 3, 3))]
    log = OpLog()
    with log:
        for layer, x in layers:
            layer(x.requires_grad_()).sum().backward()
        cl = torch.nn.Conv2d(2, 2, 3, padding=1).to(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cl(torch.randn(1, 2, 4, 4).to(memory_format=torch.channels_last)).float().sum().backward()
        x, w = torch.randn(1, 2, 4, 4, requires_grad=True), torch.randn(3, 2, 3, 3, requires_grad=True)
        torch.mkldnn_convolution(x, w, None, [1, 1], [1, 1], [1, 1], 1).sum().backward()
    convolutions = {op for op in log.seen if "conv" in str(op)}
    assert convolutions and convolutions <= set(CONVOLUTION_FORMULAS), convolutions - set(CONVOLUTION_FORMULAS)


class SmallNet(torch.nn.Module):
    """A 3×3 pad-1 convolution 2 → 3 channels on 4×4 images, then Linear(48, 5): forward(images, labels) -> loss."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.fc = torch.nn.Linear(48, 5)

    def forward(self, images, labels):
        return torch.nn.functional.cross_entropy(self.fc(self.conv(images).relu().flatten(1)), labels)


# Per image: the convolution's forward and its weights' gradient (the images need none), 1,200 each; the linear
# layer's forward, input gradient and weight gradient, 2·48·5 = 480 each: 3,840 (torch's own: 2·1,728 + 1,440 = 4,896)
SMALLNET_PER_IMAGE = 2 * CONV_4X4 + 3 * 480
TORCH_SMALLNET_PER_IMAGE = 2 * TORCH_CONV_4X4 + 3 * 480


def test_the_probe_and_a_trial_count_a_small_models_step_by_the_valid_taps():
    torch.manual_seed(0)
    module = SmallNet()
    step = make_step(module, torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9))
    batch = (torch.randn(2, 2, 4, 4), torch.tensor([0, 3]))
    assert _count_flops(step, batch) == (2 * SMALLNET_PER_IMAGE, None)          # the probe's
    assert count_train_flops(step, batch) == 2 * SMALLNET_PER_IMAGE             # a throughput trial's
    before = FlopCounterMode(display=False)
    with before:
        step(batch)
    assert before.get_total_flops() == 2 * TORCH_SMALLNET_PER_IMAGE             # what both counted before
    assert FLOPS_RULE == "valid-taps"


class WithLoss(torch.nn.Module):
    """The shape orch's training step expects: forward(*batch) -> the scalar loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, images, labels):
        return torch.nn.functional.cross_entropy(self.model(images), labels)


BATCH = 2


def test_resnet50_counts_the_published_4_1_gmac_less_its_padded_taps_and_trains_at_three_forwards():
    """torchvision's ResNet-50 at 224 × 224 costs about 4.1 GMAC (8.2 GFLOP) per image forward (He et al. 2016
    give 3.8 GFLOPs counting multiply-adds, torchvision's model card 4.09 GFLOPS, also MACs), counting every
    tap; its 3×3 convolutions on 7×7 to 56×56 maps have some of theirs in the padding. Counted on the meta device."""
    with torch.device("meta"):
        module = WithLoss(torchvision.models.resnet50())
    images = torch.randn(BATCH, 3, 224, 224, device="meta")
    labels = torch.randint(0, 1000, (BATCH,), device="meta")
    every_tap = FlopCounterMode(display=False)
    with every_tap, torch.no_grad():
        module.model(images)
    assert 2 * 4.0e9 < every_tap.get_total_flops() / BATCH < 2 * 4.2e9      # 4.09 GMAC: 8.18 GFLOP
    forward_per_image = count_flops(lambda: module.model(images))[0] / BATCH
    # 7.90 GFLOP: 3.4% of the taps torch counts fall in the padding
    assert 0.96 < forward_per_image / (every_tap.get_total_flops() / BATCH) < 0.97

    # the probe's own count of one training step (forward, backward, optimizer step), as it counts a rank's
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    step_flops, error = _count_flops(make_step(module, optimizer), (images, labels))
    assert error is None
    # backward = 2 forwards (the inputs' and the weights' gradients) but conv1's input gradient: 7×7, stride 2,
    # pad 3, 3 → 64 channels, 224 → 112. Per dimension output o reads inputs 2o − 3 .. 2o + 3: o = 0 has 4 inside,
    # o = 1 has 6, o = 2..110 all 7, o = 111 has 5: 778 (not 112·7 = 784)
    conv1 = count_flops(lambda: module.model.conv1(images))[0] / BATCH
    assert conv1 == 2 * 64 * 3 * 778 * 778
    assert step_flops / BATCH == pytest.approx(3 * forward_per_image - conv1, rel=1e-9)


def test_a_step_the_counter_cannot_follow_is_none_with_the_reason():
    class DataDependent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            kept = x[x.sum(dim=1) > 0]       # a shape the meta device cannot know
            return self.linear(kept).sum()

    module = DataDependent().to("meta")
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    flops, error = _count_flops(make_step(module, optimizer), (torch.randn(8, 4, device="meta"),))
    assert flops is None and error is not None and error.split(":")[0].endswith("Error")
