"""torchvision's RetinaNet, built from torchvision's parts, and the one-module training loss around it.

Training skips `GeneralizedRCNNTransform` (images arrive at the fixed size, normalized: resizing and
batching again would copy every image every step) and reuses one set of anchors (fixed size, fixed
anchors); everything else is torchvision's: backbone, heads, anchor generator, matcher, box coder and
`compute_loss`. Evaluation runs the detector itself (`detector.eval(); detector(images)`), whose transform
is configured to be the identity on such images, so the metric is the real detector's.
"""

from __future__ import annotations

import torch
import torchvision
from torch import nn
from torchvision.models.detection import RetinaNet
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.retinanet import RetinaNetClassificationHead, RetinaNetHead, _default_anchorgen, _sum
from torchvision.ops.feature_pyramid_network import LastLevelP6P7
from torchvision.ops.misc import FrozenBatchNorm2d

from workloads.retinanet.workload import FPN_CHANNELS, RetinaNetParams, level_sizes


class FocalLossClassificationHead(RetinaNetClassificationHead):
    """torchvision's classification head with a switchable focal loss (`focal_loss.get_focal_loss(impl)`)."""

    def __init__(self, in_channels: int, num_anchors: int, num_classes: int, *, focal_loss: str):
        super().__init__(in_channels, num_anchors, num_classes)
        from workloads.retinanet.focal_loss import get_focal_loss

        self.focal_loss_impl = focal_loss
        self.focal_loss = get_focal_loss(focal_loss)

    def compute_loss(self, targets, head_outputs, matched_idxs):
        # torchvision's compute_loss, line for line, with the focal loss swapped: per image, the loss summed
        # over non-ignored anchors and divided by that image's number of foreground anchors.
        losses = []
        for targets_per_image, cls_logits_per_image, matched_idxs_per_image in zip(
                targets, head_outputs["cls_logits"], matched_idxs):
            foreground = matched_idxs_per_image >= 0
            num_foreground = foreground.sum()
            gt_classes_target = torch.zeros_like(cls_logits_per_image)
            gt_classes_target[foreground, targets_per_image["labels"][matched_idxs_per_image[foreground]]] = 1.0
            valid = matched_idxs_per_image != self.BETWEEN_THRESHOLDS
            logits, target = cls_logits_per_image[valid], gt_classes_target[valid]
            # A named profiler range around the loss alone (`orch profile` reports it as a layer, forward and
            # backward); ~1 µs when no profiler runs.
            with torch.profiler.record_function("region::focal_loss"):
                loss = self.focal_loss(logits, target, reduction="sum")
            losses.append(loss / max(1, num_foreground))
        return _sum(losses) / len(targets)


def build_detector(p: RetinaNetParams) -> RetinaNet:
    """MLPerf's RetinaNet construction (P3-P7 from layer2-4 plus LastLevelP6P7 on P5, frozen batch norm,
    default anchors), randomly initialized: no weights can be downloaded here."""
    trunk = getattr(torchvision.models, p.backbone)(weights=None, norm_layer=FrozenBatchNorm2d)
    backbone = _resnet_fpn_extractor(trunk, p.trainable_layers, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(FPN_CHANNELS, FPN_CHANNELS))
    anchor_generator = _default_anchorgen()
    num_anchors = anchor_generator.num_anchors_per_location()[0]
    head = RetinaNetHead(backbone.out_channels, num_anchors, p.classes)
    head.classification_head = FocalLossClassificationHead(backbone.out_channels, num_anchors, p.classes,
                                                           focal_loss=p.focal_loss)
    size = p.image_size
    # Identity transform for our images: already size x size (fixed_size keeps them so) and normalized.
    return RetinaNet(backbone, p.classes, min_size=size, max_size=size, fixed_size=(size, size),
                     image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0], anchor_generator=anchor_generator,
                     head=head)


def forward_flops_per_image(p: RetinaNetParams) -> float:
    """FLOPs of the backbone and heads on one image (matmuls and convolutions), counted on the meta device by
    orch's FLOP counter (orch.measure: a convolution's taps inside the input, as a trial counts them)."""
    from orch.measure import flop_counter

    with torch.device("meta"):
        detector = build_detector(p)
        counter = flop_counter()
        with counter:
            features = detector.backbone(torch.empty(1, 3, p.image_size, p.image_size))
            detector.head(list(features.values()))
    return float(counter.get_total_flops())


class RetinaNetTrainingLoss(nn.Module):
    """forward(images [N, 3, S, S], targets) -> classification + box-regression loss, as one scalar.

    `dense` (backbone and heads: all the parameters and nearly all the time) runs under bf16 autocast when
    asked and is what `torch.compile` compiles; the matching and the losses are data-dependent (boolean
    indexing, per-image loops) and stay eager, in fp32.
    """

    def __init__(self, detector: RetinaNet, *, bf16: bool = False, channels_last: bool = False):
        super().__init__()
        self.detector = detector
        self.bf16, self.channels_last = bf16, channels_last
        self.dense = self._dense
        self._anchors: dict[tuple[int, int], torch.Tensor] = {}

    def _dense(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        features = list(self.detector.backbone(images).values())
        return self.detector.head(features)

    def anchors(self, height: int, width: int) -> torch.Tensor:
        """Anchors of one image of this size: torchvision's generator run once on the pyramid's shapes
        (it reads only the shapes of its inputs)."""
        if (height, width) not in self._anchors:
            if height != width:
                raise ValueError(f"images must be square, got {height}x{width}")
            shapes = [torch.empty(1, 1, side, side) for side in level_sizes(height)]
            image_list = ImageList(torch.empty(1, 3, height, width), [(height, width)])
            self._anchors[(height, width)] = self.detector.anchor_generator(image_list, shapes)[0]
        return self._anchors[(height, width)]

    def forward(self, images: torch.Tensor, targets: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            head_outputs = self.dense(images)
        head_outputs = {name: out.float() for name, out in head_outputs.items()}
        anchors = [self.anchors(*images.shape[-2:])] * images.shape[0]
        losses = self.detector.compute_loss(targets, head_outputs, anchors)
        return losses["classification"] + losses["bbox_regression"]
