"""The probe's FLOP count against a published figure: torchvision's ResNet-50 at 224 × 224 costs about 4.1 GMAC
(8.2 GFLOP) per image forward (He et al. 2016 give 3.8 GFLOPs counting multiply-adds, torchvision's model card
4.09 GFLOPS, also MACs), and a training step about three times that. Counted on the meta device: no memory and
no compute, so a test can afford the full size."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

from orchestrator.run.kinds.probe import _count_flops  # noqa: E402  (after the skips: it imports nothing heavy)
from orchestrator.run.protocol import make_step  # noqa: E402

BATCH = 2
# conv1 (7×7, stride 2, 3 → 64 channels, 112 × 112 out): 2 · 64 · 112 · 112 · 3 · 7 · 7 FLOPs per image, which the
# backward pass does not repeat for the input's gradient (the images need none)
CONV1_FLOPS = 2 * 64 * 112 * 112 * 3 * 7 * 7


class WithLoss(torch.nn.Module):
    """The shape orch's training step expects: forward(*batch) -> the scalar loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, images, labels):
        return torch.nn.functional.cross_entropy(self.model(images), labels)


def test_resnet50_training_flops_are_three_forwards_of_the_published_4_1_gmac():
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        module = WithLoss(torchvision.models.resnet50())
    images = torch.randn(BATCH, 3, 224, 224, device="meta")
    labels = torch.randint(0, 1000, (BATCH,), device="meta")
    forward = FlopCounterMode(display=False)
    with forward, torch.no_grad():
        module.model(images)
    forward_per_image = forward.get_total_flops() / BATCH
    assert 2 * 4.0e9 < forward_per_image < 2 * 4.2e9      # 4.09 GMAC: 8.18 GFLOP

    # the probe's own count of one training step (forward, backward, optimizer step), as it counts a rank's
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    step_flops, error = _count_flops(make_step(module, optimizer), (images, labels))
    assert error is None
    train_per_image = step_flops / BATCH
    # backward = 2 forwards (the inputs' and the weights' gradients) but conv1's input gradient: 24.3 GFLOP
    assert train_per_image == pytest.approx(3 * forward_per_image - CONV1_FLOPS, rel=1e-9)
    assert 2.95 < train_per_image / forward_per_image < 3.0


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
