"""The torchvision family's torch side (imported in rank processes only): the model from its builder, and the
data, synthetic or an ImageFolder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torchvision
from torch.nn import functional

from workloads.vision.workload import VisionParams

# ImageNet's per-channel statistics, as torchvision's reference training normalizes with them.
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
# Eval crops the centre of an image resized to image_size × 256/224, as torchvision's references do.
EVAL_RESIZE = 256 / 224
# Each class pattern is drawn at this coarse resolution and upsampled: smooth, so that a shifted, noisy copy
# is still recognisable and a network must pool over positions to learn it.
PATTERN_CELLS = 4
# Item i's seed is (data_seed << 32) + i, plus this for the eval split: no eval image repeats a training one,
# and no two data seeds share an image.
EVAL_OFFSET = 1 << 31


def build_model(p: VisionParams) -> torch.nn.Module:
    """`p.arch` from torchvision's builder, weights=None, `p.classes` outputs. Builders with auxiliary heads
    (googlenet, inception_v3) are built without them: their training outputs are not one logits tensor."""
    kwargs: dict[str, Any] = {"weights": None, "num_classes": p.classes}
    if p.arch.startswith("vit_"):
        kwargs["image_size"] = p.image_size
    elif p.arch == "maxvit_t":
        kwargs["input_size"] = (p.image_size, p.image_size)
    elif p.arch in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    model: torch.nn.Module = torchvision.models.get_model(p.arch, **kwargs)
    if p.memory_format == "channels_last":
        model = model.to(memory_format=torch.channels_last)
    return model


class SyntheticImages(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """`classes` smooth random patterns; image i is one of them, circularly shifted by a random offset, plus
    Gaussian noise of std `noise`, with its class as label. Deterministic from (data_seed, split, i), and made
    when asked for, so the set's size costs nothing up front."""

    def __init__(self, p: VisionParams, split: str):
        gen = torch.Generator().manual_seed(p.data_seed)
        coarse = torch.randn(p.classes, 3, PATTERN_CELLS, PATTERN_CELLS, generator=gen)
        patterns = functional.interpolate(coarse, size=(p.image_size, p.image_size), mode="bicubic",
                                          align_corners=False)
        self.patterns = patterns / patterns.flatten(1).std(dim=1).view(-1, 1, 1, 1)   # unit std per class
        self.samples = p.train_samples if split == "train" else p.eval_samples
        self.offset = (p.data_seed << 32) + (0 if split == "train" else EVAL_OFFSET)
        self.noise, self.size = p.noise, p.image_size

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if not 0 <= index < self.samples:
            raise IndexError(index)
        gen = torch.Generator().manual_seed(self.offset + index)
        label = int(torch.randint(len(self.patterns), (), generator=gen))
        dy, dx = (int(v) for v in torch.randint(self.size, (2,), generator=gen))
        image = self.patterns[label].roll((dy, dx), dims=(1, 2))
        return image + self.noise * torch.randn(image.shape, generator=gen), label


def image_folder(p: VisionParams, split: str) -> torch.utils.data.Dataset[Any]:
    """`p.data_path`/train or /val in ImageFolder layout, with torchvision's reference transforms: a random
    resized crop and flip for training, resize and centre crop for eval, ImageNet normalization."""
    from torchvision import transforms

    folder = Path(p.data_path) / ("train" if split == "train" else "val")
    if not folder.is_dir():
        raise ValueError(f"data_path {p.data_path}: no {folder.name}/ folder (ImageFolder layout: train/ and val/, "
                         "each with one folder of images per class)")
    normalize = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    if split == "train":
        transform = transforms.Compose([transforms.RandomResizedCrop(p.image_size), transforms.RandomHorizontalFlip(),
                                        transforms.ToTensor(), normalize])
    else:
        transform = transforms.Compose([transforms.Resize(round(p.image_size * EVAL_RESIZE)),
                                        transforms.CenterCrop(p.image_size), transforms.ToTensor(), normalize])
    data = torchvision.datasets.ImageFolder(str(folder), transform=transform)
    if len(data.classes) != p.classes:
        raise ValueError(f"data_path {folder} has {len(data.classes)} class folders but classes is {p.classes}: "
                         f"set classes: {len(data.classes)}")
    return data


def dataset(p: VisionParams, split: str) -> torch.utils.data.Dataset[Any]:
    return image_folder(p, split) if p.data_path else SyntheticImages(p, split)
