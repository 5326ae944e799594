"""`torchvision`: any torchvision image classifier by name (`resnet50`, `resnet18`, `vit_b_16`, ...), built with
weights=None and trained from scratch with cross-entropy, through the function adapter (`model_workload`).

Data: synthetic by default, learnable and deterministic from `data_seed` (each class a smooth random pattern,
shifted at random per image under Gaussian noise: a convolutional network learns it in a few epochs), made
one image at a time so that any size costs no memory up front; or a folder in ImageFolder layout
(`data_path`, ImageNet's `train/` and `val/`).

The defaults are a small setting that learns in minutes on two cores; MLPerf's ResNet-50 is
`arch: resnet50` at `image_size: 224` (`classes: 1000` for ImageNet). Memory per rank and training FLOPs
are measured by orch's probe, not declared.

This module is torch-free: `orch plan` reads the parameters without importing torch or torchvision.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from orch.workload import ModelParams, accuracy, model_workload, param

# torchvision 0.29's classification builders (torchvision.models.list_models(module=torchvision.models)),
# listed here so that a misspelt name is refused at plan time without importing torchvision;
# tests/workloads/test_vision.py checks the list against the installed torchvision.
ARCHS = (
    "alexnet", "convnext_base", "convnext_large", "convnext_small", "convnext_tiny", "densenet121", "densenet161",
    "densenet169", "densenet201", "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3",
    "efficientnet_b4", "efficientnet_b5", "efficientnet_b6", "efficientnet_b7", "efficientnet_v2_l",
    "efficientnet_v2_m", "efficientnet_v2_s", "googlenet", "inception_v3", "maxvit_t", "mnasnet0_5", "mnasnet0_75",
    "mnasnet1_0", "mnasnet1_3", "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small", "regnet_x_16gf",
    "regnet_x_1_6gf", "regnet_x_32gf", "regnet_x_3_2gf", "regnet_x_400mf", "regnet_x_800mf", "regnet_x_8gf",
    "regnet_y_128gf", "regnet_y_16gf", "regnet_y_1_6gf", "regnet_y_32gf", "regnet_y_3_2gf", "regnet_y_400mf",
    "regnet_y_800mf", "regnet_y_8gf", "resnet101", "resnet152", "resnet18", "resnet34", "resnet50",
    "resnext101_32x8d", "resnext101_64x4d", "resnext50_32x4d", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
    "shufflenet_v2_x1_5", "shufflenet_v2_x2_0", "squeezenet1_0", "squeezenet1_1", "swin_b", "swin_s", "swin_t",
    "swin_v2_b", "swin_v2_s", "swin_v2_t", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19",
    "vgg19_bn", "vit_b_16", "vit_b_32", "vit_h_14", "vit_l_16", "vit_l_32", "wide_resnet101_2", "wide_resnet50_2",
)
# Input sizes a builder cannot take, known without building it: a vision transformer cuts the image into
# square patches; Inception v3's stem needs 75 px.
VIT_PATCH = {"vit_b_16": 16, "vit_b_32": 32, "vit_h_14": 14, "vit_l_16": 16, "vit_l_32": 32}
MIN_IMAGE_SIZE = {"inception_v3": 75}
# The smallest side every other builder takes: five stride-2 stages down to 1 × 1.
DEFAULT_MIN_IMAGE_SIZE = 32


@dataclass(frozen=True, kw_only=True, slots=True)
class VisionParams(ModelParams):
    arch: str = param("resnet18", "a torchvision.models classification builder (resnet50, vit_b_16, ...; a name "
                                  "that is not one lists those alike), built with weights=None")
    image_size: int = param(32, "image side, pixels (MLPerf's ResNet-50: 224); vit_*: a multiple of its patch",
                            minimum=1)
    classes: int = param(10, "number of classes (ImageNet: 1000); with data_path, the class folders", minimum=2)
    memory_format: Literal["contiguous", "channels_last"] = param(
        "contiguous", "the model's weights and activations as contiguous (NCHW) or channels_last (NHWC) tensors")
    train_samples: int = param(2048, "synthetic data: training images per epoch (all ranks together)", minimum=1,
                               maximum=2**31 - 1)
    eval_samples: int = param(512, "synthetic data: held-out images the metrics are computed on", minimum=1,
                              maximum=2**31 - 1)
    noise: float = param(1.0, "synthetic data: Gaussian noise over each class pattern (unit std); higher is harder",
                         minimum=0)
    data_seed: int = param(1234, "synthetic data: the task's seed (the same for every training seed)", minimum=0,
                           maximum=2**31 - 1)
    data_path: str = param("", "real data: an absolute path to a folder in ImageFolder layout (train/ and val/, "
                               "one folder of images per class), ImageNet's; empty: synthetic data")
    lr: float = param(0.02, "learning rate when the sweep gives none (a convergence run scales its own)",
                      exclusive_minimum=0)

    def __post_init__(self) -> None:
        problems = []
        if self.arch not in ARCHS:
            close = [a for a in ARCHS if a.startswith(self.arch[:3])] or ARCHS
            problems.append(f"arch({self.arch!r}) is not a torchvision classification model; it may be one of: "
                            f"{', '.join(close)}")
        patch = VIT_PATCH.get(self.arch)
        if patch is not None and self.image_size % patch:
            problems.append(f"image_size({self.image_size}) must be a multiple of {self.arch}'s patch ({patch})")
        least = MIN_IMAGE_SIZE.get(self.arch, DEFAULT_MIN_IMAGE_SIZE)
        if self.image_size < least:
            problems.append(f"image_size({self.image_size}) < {least}: the smallest {self.arch} takes")
        if self.data_path and not os.path.isabs(self.data_path):
            problems.append(f"data_path({self.data_path!r}) must be absolute: ranks may run in another folder")
        if problems:
            raise ValueError("\n".join(problems))


def build_model(p: VisionParams) -> Any:
    from workloads.vision.data import build_model as build

    return build(p)


def train_set(p: VisionParams) -> Any:
    from workloads.vision.data import dataset

    return dataset(p, "train")


def eval_set(p: VisionParams) -> Any:
    from workloads.vision.data import dataset

    return dataset(p, "eval")


def cross_entropy(output: Any, target: Any) -> Any:
    import torch

    return torch.nn.functional.cross_entropy(output, target)


def samples_per_epoch(p: VisionParams) -> int | None:
    """The synthetic set's size; a folder's is read in the rank (the probe records it)."""
    return None if p.data_path else p.train_samples


workload = model_workload(
    name="torchvision", params=VisionParams, model=build_model, train_data=train_set, eval_data=eval_set,
    loss=cross_entropy, metrics={"accuracy": accuracy}, samples_per_epoch=samples_per_epoch,
    description="a torchvision image classifier by name (arch), from scratch; synthetic learnable images or an "
                "ImageFolder; resnet18 at 32 px learns in minutes on two cores, resnet50 at 224 px is MLPerf's")
workload.rank_modules = ("workloads.vision.data",)
