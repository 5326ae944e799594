"""Synthetic shapes (determinism, exact boxes), the COCO-format loader, and per-rank sharding."""

from __future__ import annotations

import json

import pytest
import torch

from orch.workload import RankContext, Trainer
from orchestrator.io.workload_finder import find_workload, parse_params
from workloads.retinanet.data import MEAN, STD, CocoFolder, SyntheticShapes, class_style, render

SIZE = 64


def synthetic(split="train", data_seed=7, n=16, classes=3, max_objects=3):
    return SyntheticShapes(SIZE, classes=classes, max_objects=max_objects, data_seed=data_seed, split=split,
                           num_samples=n)


def test_samples_depend_only_on_seed_split_and_index():
    a, b = synthetic()[5], synthetic()[5]
    assert torch.equal(a[0], b[0]) and torch.equal(a[1]["boxes"], b[1]["boxes"])
    assert not torch.equal(synthetic(data_seed=8)[5][0], a[0])
    assert not torch.equal(synthetic(split="test")[5][0], a[0])
    assert not torch.equal(synthetic()[6][0], a[0])


def test_boxes_are_inside_the_image_and_labels_in_range():
    data = synthetic(n=64, classes=5, max_objects=4)
    counts = []
    for i in range(len(data)):
        image, target = data[i]
        assert image.shape == (3, SIZE, SIZE) and image.dtype == torch.float32
        boxes = target["boxes"]
        assert ((boxes[:, :2] >= 0) & (boxes[:, 2:] <= SIZE) & (boxes[:, 2:] > boxes[:, :2])).all()
        assert ((target["labels"] >= 0) & (target["labels"] < 5)).all()
        counts.append(len(boxes))
    assert min(counts) >= 1 and max(counts) <= 4 and len(set(counts)) > 1


def test_each_box_is_the_tight_box_of_its_drawn_object():
    image, objects = render(SIZE, classes=4, max_objects=4, seed=3)
    assert objects
    for obj in objects:
        x0, y0 = obj["origin"]
        ys, xs = torch.nonzero(obj["mask"], as_tuple=True)
        tight = (x0 + xs.min().item(), y0 + ys.min().item(), x0 + xs.max().item() + 1, y0 + ys.max().item() + 1)
        assert obj["box"] == tight
        # the object's pixels carry its class colour (up to the shading and the noise)
        _, rgb = class_style(obj["label"], 4)
        h, w = obj["mask"].shape
        pixels = image[:, y0:y0 + h, x0:x0 + w][:, obj["mask"]]
        ratio = pixels.mean(dim=1) / torch.tensor(rgb).clamp(min=0.05)
        bright = torch.tensor(rgb) > 0.3
        assert ((ratio[bright] > 0.7) & (ratio[bright] < 1.1)).all(), (obj["label"], ratio)


def test_image_is_normalized_with_imagenet_statistics():
    image, objects = render(SIZE, classes=3, max_objects=2, seed=11)
    normalized = SyntheticShapes(SIZE, classes=3, max_objects=2, data_seed=0, split="train", num_samples=1)
    normalized.seed_base = 11   # sample 0 then renders seed 11
    expected = (image - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(3, 1, 1)
    assert torch.allclose(normalized[0][0], expected)


def tiny_params(**extra):
    params = {"backbone": "resnet18", "image_size": SIZE, "classes": 3, "train_samples": 24, "test_samples": 4,
              "focal_loss": "reference", "frozen_bn": "reference", **extra}
    p, problems = parse_params(find_workload("retinanet").workload, params)
    assert problems == []
    return p


def test_rank_shards_are_disjoint_and_deterministic():
    p = tiny_params()
    workload = find_workload("retinanet").workload
    trainers = [workload.build(p, RankContext(rank=r, world_size=2, local_batch=4, seed=1, threads=1))
                for r in range(2)]

    def fingerprints(trainer, epoch):
        return [float(image.double().sum()) for images, _ in trainer.batches(epoch) for image in images]

    rank0, rank1 = fingerprints(trainers[0], 0), fingerprints(trainers[1], 0)
    assert len(rank0) == len(rank1) == 12
    assert not set(rank0) & set(rank1)
    assert fingerprints(trainers[0], 0) == rank0            # same epoch, same shard
    assert fingerprints(trainers[0], 1) != rank0            # reshuffled across epochs
    images, targets = next(trainers[0].batches(0))
    assert images.shape == (4, 3, SIZE, SIZE) and len(targets) == 4


@pytest.mark.parametrize("name", ["retinanet", "classifier"])
@pytest.mark.parametrize("samples,world_size,local_batch", [(50, 2, 4), (50, 3, 4), (24, 1, 3), (7, 2, 4)])
def test_steps_per_epoch_matches_the_batches_yielded(name, samples, world_size, local_batch):
    """Trainers answer steps_per_epoch from their sample count (iterating would render every image); it must
    equal what `batches` yields, which the base class's default counts."""
    workload = find_workload(name).workload
    if name == "retinanet":
        p = tiny_params(train_samples=samples)
    else:
        p, problems = parse_params(workload, {"train_samples": samples})
        assert problems == []
    for rank in range(world_size):
        trainer = workload.build(p, RankContext(rank=rank, world_size=world_size, local_batch=local_batch, seed=3,
                                                threads=1))
        counted = Trainer.steps_per_epoch(trainer)
        assert trainer.steps_per_epoch() == counted == sum(1 for _ in trainer.batches(2))
    assert counted == samples // world_size // local_batch


# --- COCO-format loader ------------------------------------------------------------------------------

def write_tiny_coco(root, split="train"):
    """Three PNGs of different sizes: two with annotations (category ids 3 and 7, one crowd box), one
    without; ids deliberately out of file order."""
    from PIL import Image

    (root / split).mkdir(parents=True)
    (root / "annotations").mkdir(exist_ok=True)
    images = [{"id": 10, "file_name": "b.png", "width": 80, "height": 40},
              {"id": 2, "file_name": "a.png", "width": 50, "height": 100},
              {"id": 30, "file_name": "c.png", "width": 60, "height": 60}]
    for info in images:
        Image.new("RGB", (info["width"], info["height"]), (200, 30, 30)).save(root / split / info["file_name"])
    annotations = [
        {"id": 1, "image_id": 2, "category_id": 7, "bbox": [5, 10, 20, 30], "area": 600, "iscrowd": 0},
        {"id": 2, "image_id": 2, "category_id": 3, "bbox": [0, 50, 50, 50], "area": 2500, "iscrowd": 1},
        {"id": 3, "image_id": 10, "category_id": 3, "bbox": [40, 0, 40, 20], "area": 800, "iscrowd": 0},
    ]
    categories = [{"id": 3, "name": "three"}, {"id": 7, "name": "seven"}]
    with open(root / "annotations" / f"instances_{split}.json", "w") as f:
        json.dump({"images": images, "annotations": annotations, "categories": categories}, f)


def test_coco_folder_resizes_scales_boxes_and_maps_categories(tmp_path):
    write_tiny_coco(tmp_path)
    data = CocoFolder(str(tmp_path), "train", SIZE, classes=2, num_samples=3)
    assert len(data) == 3
    # images come by id: 2 (50x100), 10 (80x40), 30 (60x60, no annotations)
    image, target = data[0]
    assert image.shape == (3, SIZE, SIZE)
    assert torch.allclose(image[:, 5, 5], (torch.tensor([200, 30, 30]) / 255 - torch.tensor(MEAN)) / torch.tensor(STD),
                          atol=1e-3)
    sx, sy = SIZE / 50, SIZE / 100
    assert torch.allclose(target["boxes"], torch.tensor([[5 * sx, 10 * sy, 25 * sx, 40 * sy]]))  # crowd dropped
    assert target["labels"].tolist() == [1]   # category 7 -> label 1
    _, target = data[1]
    assert torch.allclose(target["boxes"], torch.tensor([[40 * SIZE / 80, 0.0, SIZE, 20 * SIZE / 40]]))
    assert target["labels"].tolist() == [0]   # category 3 -> label 0
    _, target = data[2]
    assert target["boxes"].shape == (0, 4) and target["labels"].shape == (0,)


def test_coco_folder_rejects_what_it_cannot_serve(tmp_path):
    with pytest.raises(FileNotFoundError, match="must hold train/"):
        CocoFolder(str(tmp_path), "train", SIZE, classes=2, num_samples=1)
    write_tiny_coco(tmp_path)
    with pytest.raises(ValueError, match="has 3 images, fewer than the 4 asked for"):
        CocoFolder(str(tmp_path), "train", SIZE, classes=2, num_samples=4)
    with pytest.raises(ValueError, match="has 2 categories but classes=1"):
        CocoFolder(str(tmp_path), "train", SIZE, classes=1, num_samples=3)


def test_trainer_trains_and_evaluates_on_a_coco_folder(tmp_path):
    write_tiny_coco(tmp_path, "train")
    write_tiny_coco(tmp_path, "val")
    p = tiny_params(dataset="coco", data_path=str(tmp_path), classes=2, train_samples=3, test_samples=3)
    trainer = find_workload("retinanet").workload.build(p, RankContext(rank=0, world_size=1, local_batch=3, seed=0,
                                                              threads=1))
    (batch,) = list(trainer.batches(0))
    loss = trainer.module(*batch)
    loss.backward()
    assert torch.isfinite(loss)
    metrics = trainer.evaluate()
    assert set(metrics) == {"map", "map50"} and all(0.0 <= v <= 1.0 for v in metrics.values())
