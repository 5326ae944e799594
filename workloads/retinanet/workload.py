"""`retinanet` parameters, memory formula and epoch size: torch-free, so `orch plan` can use them.

The defaults are MLPerf's RetinaNet (ResNeXt50-32x4d FPN, 800x800, 264 classes, 3 trainable backbone
stages, Adam at 1e-4). `SMALL_PARAMS` is the configuration for the default local sweep and the benchmarks: a
ResNet-18 at 128x128 with four classes, which learns the synthetic shapes in a few minutes on two cores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from orch.workload import DdpParams, RankContext, Trainer, Workload, ddp_gradient_copies, ddp_options_of, param
from workloads.ipex import IPEX_OPTION_HELP, IPEX_USS_MIB, IpexMode, ipex_applies

Backbone = Literal["resnext50_32x4d", "resnet50", "resnet18"]

# Parameters of each torchvision trunk by stage (FrozenBatchNorm2d holds buffers, not parameters; the fc
# layer is dropped by the FPN extractor). Counted with torchvision 0.29.1; tests/workloads pins them.
STAGE_PARAMS: dict[str, dict[str, int]] = {
    "resnet18": {"conv1": 9_408, "layer1": 147_456, "layer2": 524_288, "layer3": 2_097_152,
                 "layer4": 8_388_608},
    "resnet50": {"conv1": 9_408, "layer1": 212_992, "layer2": 1_212_416, "layer3": 7_077_888,
                 "layer4": 14_942_208},
    "resnext50_32x4d": {"conv1": 9_408, "layer1": 202_240, "layer2": 1_187_840, "layer3": 6_995_968,
                        "layer4": 14_516_224},
}
# Output channels of layer2, layer3, layer4: the FPN's inputs (BasicBlock vs Bottleneck).
FPN_IN_CHANNELS = {"resnet18": (128, 256, 512), "resnet50": (512, 1024, 2048),
                   "resnext50_32x4d": (512, 1024, 2048)}
FPN_CHANNELS = 256
ANCHORS_PER_LOCATION = 9      # torchvision's default generator: 3 sizes x 3 aspect ratios per level
LEVEL_STRIDES = (8, 16, 32, 64, 128)  # P3..P7

# --- Memory calibration -------------------------------------------------------------------------------
# Peak USS per rank of a 2-rank gloo job (DDP-wrapped, 1 thread per rank, 3-4 training steps of the
# orchestrator's step), torch 2.14.1, glibc malloc, measured with `python benchmarks/calibrate_memory.py`:
# resnet18@128 tl5: 798-807 / 851-862 MiB at batch 2 / 8; resnext50_32x4d@800, 264 classes: 2634-2685 /
# 3654-3705 at batch 1 / 2 (reference focal loss: 3450-3550 / 5301-5367); plus resnet18@800, resnext50@128,
# resnet50@256 and the 4-class full model, to tell what grows with parameters, pixels and classes. The
# constants below are a least-squares fit of the formula in `memory_estimate_mib` over those runs; a second,
# complete run of the script is within ±5% of the estimate for every configuration (bf16 ones included).
BASE_USS_MIB = 415.0   # interpreter, torch/torchvision heaps, gloo, oneDNN caches, malloc's retained arenas
# Activations kept for backward, per image and per megapixel (fp32; fitted at trainable_layers 3 and 5:
# the heads and FPN, which every setting trains, are most of it).
ACTIVATION_MIB_PER_MPIXEL = {"resnet18": 376.0, "resnet50": 775.0, "resnext50_32x4d": 1140.0}
BF16_ACTIVATION_FACTOR = 0.5   # bf16 activations: half the bytes
# The classification loss works on tensors of anchors x classes per image (fp32). The loss loops over the
# images, so its temporaries peak once ("transient") while what backward needs is kept for every image
# ("saved"): the head's logits, and the focal loss's own saved tensors (torchvision's composes ~10
# elementwise ops that autograd keeps; the explicit-autograd kernel keeps one gradient).
FOCAL_SAVED_COPIES = {"reference": 9.4, "kernel": 2.8}
FOCAL_TRANSIENT_COPIES = {"reference": 4.3, "kernel": 3.7}
BYTES_FP32 = 4


@dataclass(frozen=True, kw_only=True, slots=True)
class RetinaNetParams(DdpParams):
    # Model
    backbone: Backbone = param("resnext50_32x4d", "ResNet trunk of the FPN backbone (MLPerf: resnext50_32x4d)")
    trainable_layers: int = param(3, "backbone stages trained, counted from layer4 (5 = all); the rest frozen",
                                minimum=0, maximum=5)
    image_size: int = param(800, "images are square, image_size x image_size pixels (a multiple of 32)",
                          minimum=64)
    classes: int = param(264, "number of object classes (MLPerf's OpenImages subset: 264)", minimum=1)
    # Data
    dataset: Literal["synthetic", "coco"] = param(
        "synthetic", "synthetic: shapes drawn on textured backgrounds; coco: a COCO-format folder at data_path")
    data_path: str = param("", "coco only: folder with train/ and val/ images and annotations/instances_train.json"
                             " and annotations/instances_val.json")
    train_samples: int = param(2048, "training images per epoch (all ranks together); coco: the first ones by id",
                             minimum=1)
    test_samples: int = param(64, "held-out images for mAP (every rank evaluates all of them)", minimum=1)
    data_seed: int = param(1234, "seed of the synthetic images (fixed across training seeds)")
    max_objects: int = param(4, "synthetic only: at most this many objects per image (at least one)", minimum=1)
    # Optimizer
    optimizer: Literal["sgd", "adamw"] = param("adamw", "sgd (with momentum) or adamw (MLPerf uses Adam)")
    optimizer_impl: Literal["loop", "foreach", "fused"] = param(
        "fused", "torch.optim implementation: per-tensor loop, multi-tensor foreach, or one fused CPU kernel")
    lr: float = param(1e-4, "learning rate when the sweep gives none", exclusive_minimum=0)
    momentum: float = param(0.9, "sgd only: momentum", minimum=0, maximum=1)
    weight_decay: float = param(0.0, "decoupled (adamw) or L2 (sgd) weight decay", minimum=0)
    # CPU optimizations
    focal_loss: Literal["reference", "kernel"] = param(
        "kernel", "reference: torchvision.ops.sigmoid_focal_loss; kernel: one explicit-autograd kernel, fewer "
                  "temporaries")
    frozen_bn: Literal["reference", "fused"] = param(
        "fused", "reference: torchvision FrozenBatchNorm2d (2 passes + a temporary); fused: one native batch_norm op")
    precision: Literal["auto", "fp32", "bf16"] = param(
        "auto", "bf16: backbone and heads under torch.autocast(cpu, bfloat16), the losses in fp32 (image_size >= 96); "
                "auto: bf16 where every node computes bf16 natively (AVX512-BF16 or AMX, by orch's probe), else fp32; "
                "an explicit bf16 on a CPU that emulates it is refused unless constraints.allow_slow_bf16")
    memory_format: Literal["contiguous", "channels_last"] = param(
        "contiguous", "channels_last: NHWC weights and images, oneDNN's native convolution layout")
    compile: bool = param(False, "torch.compile the backbone and heads (the loss stays eager: it is data-dependent)")
    ipex: IpexMode = param("auto", IPEX_OPTION_HELP)

    def __post_init__(self) -> None:
        problems = []
        if self.image_size % 32:
            problems.append(f"image_size({self.image_size}) % 32 = {self.image_size % 32}: the backbone needs "
                            f"a multiple of 32, e.g. {32 * round(self.image_size / 32) or 32}")
        if self.precision == "bf16" and level_sizes(self.image_size)[3] < 2:
            # oneDNN 3.12 (torch 2.14.1): the bf16 weight gradient of a stride-2 3x3 conv on a 1x1 input (P7's
            # conv when P6 is 1x1) comes out non-finite at random; the canary test in test_retinanet_model.py
            # says when a torch upgrade fixes it.
            problems.append(f"precision 'bf16' needs image_size >= 96, got {self.image_size}: P6 is "
                            f"{level_sizes(self.image_size)[3]}x{level_sizes(self.image_size)[3]}, and oneDNN's bf16 "
                            f"weight gradient of the stride-2 P7 conv on a 1x1 input is non-finite at random")
        if self.dataset == "coco" and not self.data_path:
            problems.append("dataset 'coco' needs data_path (a COCO-format folder)")
        if problems:
            raise ValueError("\n".join(problems))


# The default local sweep's parameters: ~0.21 s per step of 8 images on 2 cores (bf16 runs on AMX/AVX512-BF16
# here; on CPUs without them `precision: auto` resolves to fp32, ~2x slower) and learnable from scratch: at
# local batch 8, map50 0.77 after 4 epochs, 0.99 after 8 (map 0.76), 2 minutes in all
# (benchmarks/train_retinanet_map.py). All backbone stages train: there are no pretrained weights to keep
# frozen. AdamW at the default lr 1e-4 is stable; 1e-3 and 3e-4 spike early (loss 20+) and lag far behind.
SMALL_PARAMS: dict[str, Any] = {
    "backbone": "resnet18", "trainable_layers": 5, "image_size": 128, "classes": 4,
    "train_samples": 512, "test_samples": 64, "max_objects": 3,
    "precision": "bf16", "memory_format": "channels_last",
}


def level_sizes(image_size: int) -> tuple[int, ...]:
    """Side of each pyramid level P3..P7. Every stride-2 layer (conv 3x3/7x7 with padding, max-pool,
    P6/P7 convs) maps n to ceil(n / 2): 800 -> (100, 50, 25, 13, 7)."""
    sides, n = [], image_size
    for stride in (2, 4, *LEVEL_STRIDES):
        n = math.ceil(n / 2)
        if stride in LEVEL_STRIDES:
            sides.append(n)
    return tuple(sides)


def anchors_per_image(image_size: int) -> int:
    """800 -> 9 * (100² + 50² + 25² + 13² + 7²) = 120087."""
    return ANCHORS_PER_LOCATION * sum(side * side for side in level_sizes(image_size))


def parameter_counts(p: RetinaNetParams) -> tuple[int, int]:
    """(all parameters, trainable parameters) of the detector, without building it."""
    stages = STAGE_PARAMS[p.backbone]
    trained_stages = ["layer4", "layer3", "layer2", "layer1", "conv1"][:p.trainable_layers]
    trunk = sum(stages.values())
    trunk_trainable = sum(stages[s] for s in trained_stages)
    c = FPN_CHANNELS
    conv3 = 9 * c * c + c
    fpn = sum(cin * c + c for cin in FPN_IN_CHANNELS[p.backbone]) + 3 * conv3 + 2 * conv3  # inner, layer, P6, P7
    a = ANCHORS_PER_LOCATION
    head = 8 * conv3 + (9 * c * a * p.classes + a * p.classes) + (9 * c * a * 4 + a * 4)
    return trunk + fpn + head, trunk_trainable + fpn + head


class RetinaNetWorkload(Workload[RetinaNetParams]):
    name = "retinanet"
    description = "torchvision RetinaNet (MLPerf: ResNeXt50-32x4d FPN, 800 px, 264 classes) on synthetic shapes or COCO"
    params_type = RetinaNetParams
    metrics = ("map", "map50")
    rank_modules = ("workloads.retinanet.trainer",)

    def memory_estimate_mib(self, params: RetinaNetParams, local_batch: int) -> float:
        p = params
        total, trainable = parameter_counts(p)
        state_floats = {"sgd": 1, "adamw": 2}[p.optimizer]
        # weights; then the gradients and DDP's buckets (as its switches hold them) and the optimizer state of
        # the trained ones
        copies = ddp_gradient_copies(ddp_options_of(p)) + state_floats
        model_mib = (total + trainable * copies) * BYTES_FP32 / 2**20
        activation_mib = ACTIVATION_MIB_PER_MPIXEL[p.backbone] * p.image_size ** 2 / 1e6
        if p.precision == "bf16":
            model_mib += total * 2 / 2**20   # autocast's cache of bf16 weight copies
            activation_mib *= BF16_ACTIVATION_FACTOR
        logits_mib = anchors_per_image(p.image_size) * p.classes * BYTES_FP32 / 2**20
        ipex_mib = IPEX_USS_MIB if ipex_applies(p.ipex) else 0.0
        return (BASE_USS_MIB + ipex_mib + model_mib + FOCAL_TRANSIENT_COPIES[p.focal_loss] * logits_mib
                + local_batch * (activation_mib + FOCAL_SAVED_COPIES[p.focal_loss] * logits_mib))

    def samples_per_epoch(self, params: RetinaNetParams) -> int:
        return params.train_samples

    def train_flops_per_sample(self, params: RetinaNetParams) -> float | None:
        """3 × the forward FLOPs of the backbone and heads, counted on the meta device by orch's FLOP counter (the one
        a trial and the probe count a real step with: a convolution's taps inside the input, as benchdnn and the
        compute roof count them): no memory, no compute, ~1 s with the imports. 3 ×: each convolution's input and
        weight gradients cost its forward. A real step computes less: no input gradient for the first convolution
        (the images need none; tests/workloads/test_retinanet_model.py holds the difference to exactly that, 0.6% at
        64 px), and no gradients for frozen layers (trainable_layers < 5). For the default sweep's model (resnet18,
        128 px, 4 classes) this gives 13.11 GFLOP per image against 13.04 counted in a real step at local batch 8;
        torch's own convolution formula, which counts the taps in the zero padding too, gave 14.84 and 14.76."""
        from workloads.retinanet.model import forward_flops_per_image

        return 3.0 * forward_flops_per_image(params)

    def build(self, params: RetinaNetParams, ctx: RankContext) -> Trainer:
        from workloads.retinanet.trainer import RetinaNetTrainer

        return RetinaNetTrainer(params, ctx)
