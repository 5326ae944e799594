"""Detection data at a fixed square size, normalized, as (image [3, S, S], {"boxes" xyxy, "labels"}) pairs.

`SyntheticShapes` draws each image from (data_seed, split, index) alone, so every rank and every run sees
the same pixels without storing any; `CocoFolder` reads a COCO-format folder through torchvision.
"""

from __future__ import annotations

import colorsys
import math
import os
from typing import Any

import torch
from torch.nn import functional as F

# ImageNet statistics: what torchvision's detection models normalize with. The images leave this module
# normalized, so the detector's own transform is set to the identity (see model.py).
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)

SHAPES = ("square", "disc", "triangle", "cross", "ring", "diamond")
# torch's CPU generator keeps only the low 32 bits of a seed: sample i of a split gets seed base + i, the
# test split starting half the 32-bit range away from the train split, so the two never share an image.
SPLIT_OFFSETS = {"train": 0, "test": 1 << 31}
MIN_SIDE_FRACTION, MAX_SIDE_FRACTION = 0.15, 0.45
PLACEMENT_TRIES = 20


def class_style(label: int, classes: int) -> tuple[str, tuple[float, float, float]]:
    """Shape and RGB colour of a class: shapes cycle, hues are spread evenly around the colour wheel, so
    with up to six classes both shape and colour tell classes apart."""
    hue = label / classes
    return SHAPES[label % len(SHAPES)], colorsys.hsv_to_rgb(hue, 0.85, 0.95)


def shape_mask(shape: str, height: int, width: int) -> torch.Tensor:
    """Boolean [height, width] mask of `shape` inscribed in its box (pixel centres in unit coordinates)."""
    v = ((torch.arange(height) + 0.5) / height - 0.5)[:, None]   # -0.5..0.5, down
    u = ((torch.arange(width) + 0.5) / width - 0.5)[None, :]     # -0.5..0.5, right
    r2 = u * u + v * v
    if shape == "square":
        return torch.ones(height, width, dtype=torch.bool)
    if shape == "disc":
        return r2 <= 0.25
    if shape == "ring":
        return (r2 <= 0.25) & (r2 >= 0.25 * 0.55**2)
    if shape == "triangle":   # apex at the top centre, base along the bottom
        return u.abs() <= (v + 0.5) / 2
    if shape == "cross":
        return (u.abs() <= 1 / 6) | (v.abs() <= 1 / 6)
    if shape == "diamond":
        return u.abs() + v.abs() <= 0.5
    raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")


def _overlaps(box: tuple[int, int, int, int], others: list[tuple[int, int, int, int]], gap: int) -> bool:
    x0, y0, x1, y1 = box
    return any(x0 < b[2] + gap and b[0] < x1 + gap and y0 < b[3] + gap and b[1] < y1 + gap for b in others)


def _background(size: int, gen: torch.Generator) -> torch.Tensor:
    """Grey-ish base colour + a linear gradient + low-frequency blobs + pixel noise, in [0, 1]."""
    base = 0.3 + 0.4 * torch.rand(3, 1, 1, generator=gen)
    ramp = torch.linspace(-0.5, 0.5, size)
    slopes = 0.4 * (torch.rand(2, 3, 1, 1, generator=gen) - 0.5)
    gradient = slopes[0] * ramp[None, None, :] + slopes[1] * ramp[None, :, None]
    blobs = F.interpolate(0.12 * torch.randn(1, 3, 4, 4, generator=gen), size=(size, size), mode="bilinear",
                          align_corners=False)[0]
    noise = 0.04 * torch.randn(3, size, size, generator=gen)
    return (base + gradient + blobs + noise).clamp_(0, 1)


def render(size: int, classes: int, max_objects: int, seed: int) -> tuple[torch.Tensor, list[dict[str, Any]]]:
    """One synthetic image in [0, 1] and its objects, each {"label", "box" (x0, y0, x1, y1), "mask" (the
    object's pixels in its box)}. Objects never touch, so each box is exactly its visible object."""
    gen = torch.Generator().manual_seed(seed)
    image = _background(size, gen)
    count = 1 + int(torch.randint(max_objects, (1,), generator=gen))
    objects: list[dict[str, Any]] = []
    for _ in range(count):
        label = int(torch.randint(classes, (1,), generator=gen))
        shape, rgb = class_style(label, classes)
        for _try in range(PLACEMENT_TRIES):
            side, aspect, fx, fy, shade = torch.rand(5, generator=gen).tolist()
            side = size * (MIN_SIDE_FRACTION + (MAX_SIDE_FRACTION - MIN_SIDE_FRACTION) * side)
            aspect = 0.75 + 0.5 * aspect      # width / height
            w = max(6, round(side * math.sqrt(aspect)))
            h = max(6, round(side / math.sqrt(aspect)))
            x0, y0 = round(fx * (size - w)), round(fy * (size - h))
            mask = shape_mask(shape, h, w)
            ys, xs = torch.nonzero(mask, as_tuple=True)
            # the tight box of the drawn pixels, in pixel-edge coordinates
            box = (x0 + int(xs.min()), y0 + int(ys.min()), x0 + int(xs.max()) + 1, y0 + int(ys.max()) + 1)
            if not _overlaps(box, [o["box"] for o in objects], gap=2):
                break
        else:
            continue   # no room left: fewer objects in this image
        colour = torch.tensor(rgb).view(3, 1, 1) * (0.8 + 0.2 * shade)
        region = image[:, y0:y0 + h, x0:x0 + w]
        region[:, mask] = (colour + 0.03 * torch.randn(3, h, w, generator=gen)).clamp(0, 1)[:, mask]
        objects.append({"label": label, "box": box, "mask": mask, "origin": (x0, y0)})
    return image, objects


def _hash32(value: int) -> int:
    """splitmix64's finalizer, top 32 bits: nearby data seeds give unrelated seed ranges."""
    z = (value + 0x9E3779B97F4A7C15) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    return (z ^ (z >> 31)) >> 32


def normalize(image: torch.Tensor) -> torch.Tensor:
    return (image - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(3, 1, 1)


class SyntheticShapes:
    """`num_samples` images of `split`: sample i depends only on (data_seed, split, i).

    >>> image, target = SyntheticShapes(128, classes=4, max_objects=3, data_seed=0, split="train", num_samples=8)[0]
    >>> image.shape, target["boxes"].shape[1]
    (torch.Size([3, 128, 128]), 4)
    """

    def __init__(self, size: int, *, classes: int, max_objects: int, data_seed: int, split: str, num_samples: int):
        self.size, self.classes, self.max_objects, self.num_samples = size, classes, max_objects, num_samples
        self.seed_base = _hash32(data_seed) + SPLIT_OFFSETS[split]

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if not 0 <= index < self.num_samples:
            raise IndexError(f"index {index} out of range for {self.num_samples} samples")
        image, objects = render(self.size, self.classes, self.max_objects, (self.seed_base + index) % 2**32)
        boxes = torch.tensor([o["box"] for o in objects], dtype=torch.float32).reshape(-1, 4)
        labels = torch.tensor([o["label"] for o in objects], dtype=torch.int64)
        return normalize(image), {"boxes": boxes, "labels": labels}


class CocoFolder:
    """The first `num_samples` images (by id) of a COCO-format split, resized to size x size (aspect ratio
    not kept, boxes scaled with them), crowd boxes dropped, category ids mapped to 0..K-1 in id order.

    Layout of `root`: `{split}/` images and `annotations/instances_{split}.json`, split in (train, val).
    """

    def __init__(self, root: str, split: str, size: int, *, classes: int, num_samples: int):
        from torchvision import datasets, tv_tensors
        from torchvision.transforms import v2

        folder = {"train": "train", "test": "val"}[split]
        images = os.path.join(root, folder)
        annotations = os.path.join(root, "annotations", f"instances_{folder}.json")
        for path in (images, annotations):
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path} not found: data_path {root!r} must hold {folder}/ and "
                                        f"annotations/instances_{folder}.json (COCO layout)")
        coco = datasets.CocoDetection(images, annotations)
        if len(coco) < num_samples:
            raise ValueError(f"{annotations} has {len(coco)} images, fewer than the {num_samples} asked for")
        category_ids = sorted(coco.coco.getCatIds())
        if len(category_ids) > classes:
            raise ValueError(f"{annotations} has {len(category_ids)} categories but classes={classes}")
        self.label_of = {cat: i for i, cat in enumerate(category_ids)}
        self.dataset = datasets.wrap_dataset_for_transforms_v2(coco, target_keys={"boxes", "labels", "iscrowd"})
        self.num_samples, self.size, self._tv_tensors = num_samples, size, tv_tensors
        self.transform = v2.Compose([v2.ToImage(), v2.Resize((size, size), antialias=True),
                                     v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if not 0 <= index < self.num_samples:
            raise IndexError(f"index {index} out of range for {self.num_samples} samples")
        pil, target = self.dataset[index]
        boxes = target.get("boxes")
        if boxes is None:   # an image without annotations
            boxes = self._tv_tensors.BoundingBoxes(torch.zeros(0, 4), format="XYXY", canvas_size=pil.size[::-1])
        keep = torch.tensor([not c for c in target.get("iscrowd", [])], dtype=torch.bool)
        category = target.get("labels", torch.zeros(0, dtype=torch.int64))
        boxes = self._tv_tensors.wrap(boxes.float(), like=boxes)   # COCO's integer boxes would be truncated
        image, boxes = self.transform(pil, boxes)
        boxes = boxes.as_subclass(torch.Tensor)
        keep &= (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])   # degenerate after scaling
        labels = torch.tensor([self.label_of[int(c)] for c in category], dtype=torch.int64)
        return image, {"boxes": boxes[keep].float(), "labels": labels[keep]}


def make_dataset(p: Any, split: str):
    """The train or test split that `p` (RetinaNetParams) describes."""
    num = p.train_samples if split == "train" else p.test_samples
    if p.dataset == "coco":
        return CocoFolder(p.data_path, split, p.image_size, classes=p.classes, num_samples=num)
    return SyntheticShapes(p.image_size, classes=p.classes, max_objects=p.max_objects, data_seed=p.data_seed,
                           split=split, num_samples=num)


def collate(samples: list[tuple[torch.Tensor, dict[str, torch.Tensor]]]) -> tuple[torch.Tensor, list[dict]]:
    """Images stacked into one [N, 3, S, S] tensor (all the same size), targets kept as a list."""
    return torch.stack([image for image, _ in samples]), [target for _, target in samples]
