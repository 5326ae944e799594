"""COCO-style mAP through pycocotools: perfect detections score 1, perturbed ones less, none 0."""

from __future__ import annotations

import torch

from orch.workload import RankContext
from orchestrator.io.workload_finder import find_workload, parse_params
from workloads.retinanet.data import SyntheticShapes
from workloads.retinanet.evaluate import coco_ground_truth, mean_average_precision

CLASSES = 3


def ground_truth(n=12):
    data = SyntheticShapes(128, classes=CLASSES, max_objects=4, data_seed=5, split="test", num_samples=n)
    return [data[i][1] for i in range(n)]


def as_detections(targets, shift=0.0, relabel=False):
    out = []
    for t in targets:
        labels = (t["labels"] + 1) % CLASSES if relabel else t["labels"]
        out.append({"boxes": t["boxes"] + shift, "scores": torch.linspace(0.9, 0.5, len(labels)), "labels": labels})
    return out


def test_perfect_detections_score_one():
    targets = ground_truth()
    assert mean_average_precision(targets, as_detections(targets), CLASSES) == {"map": 1.0, "map50": 1.0}


def test_shifted_boxes_lose_the_strict_ious_first():
    targets = ground_truth()
    metrics = mean_average_precision(targets, as_detections(targets, shift=4.0), CLASSES)
    assert metrics["map50"] > 0.9          # still overlapping by more than half
    assert metrics["map"] < 0.8            # but not at IoU 0.75..0.95


def test_wrong_labels_and_missing_detections_score_low():
    targets = ground_truth()
    assert mean_average_precision(targets, as_detections(targets, relabel=True), CLASSES)["map50"] == 0.0
    empty = [{"boxes": torch.zeros(0, 4), "scores": torch.zeros(0), "labels": torch.zeros(0, dtype=torch.int64)}
             for _ in targets]
    assert mean_average_precision(targets, empty, CLASSES) == {"map": 0.0, "map50": 0.0}
    half = as_detections(targets[:6]) + empty[6:]
    assert 0.3 < mean_average_precision(targets, half, CLASSES)["map50"] < 0.7


def test_ground_truth_document_is_coco_shaped():
    doc = coco_ground_truth([{"boxes": torch.tensor([[1.0, 2.0, 11.0, 7.0]]), "labels": torch.tensor([2])}], 3)
    assert doc["annotations"] == [{"id": 1, "image_id": 1, "category_id": 3, "bbox": [1.0, 2.0, 10.0, 5.0],
                                   "area": 50.0, "iscrowd": 0}]
    assert [c["id"] for c in doc["categories"]] == [1, 2, 3]


def test_trainer_evaluate_runs_the_detector_and_restores_train_mode(capsys):
    params = {"backbone": "resnet18", "image_size": 64, "classes": CLASSES, "train_samples": 4, "test_samples": 3,
              "focal_loss": "reference", "frozen_bn": "reference"}
    p, problems = parse_params(find_workload("retinanet").workload, params)
    assert problems == []
    trainer = find_workload("retinanet").workload.build(p, RankContext(rank=0, world_size=1, local_batch=2, seed=0, threads=1))
    metrics = trainer.evaluate()
    assert set(metrics) == {"map", "map50"} and all(0.0 <= v <= 1.0 for v in metrics.values())
    assert trainer.module.training and trainer.module.detector.training
    assert capsys.readouterr().out == ""   # pycocotools' chatter is silenced


def test_bf16_evaluation_runs_the_heads_in_bf16_and_decodes_boxes_in_fp32():
    """A bf16 trainer evaluates as it trains: the dense part under bf16 autocast (its head outputs are bf16
    values), the box decoding and NMS in fp32. Decoded in bf16, every coordinate would be a bf16 number."""
    params = {"backbone": "resnet18", "image_size": 96, "classes": CLASSES, "train_samples": 4, "test_samples": 4,
              "precision": "bf16"}
    p, problems = parse_params(find_workload("retinanet").workload, params)
    assert problems == []
    trainer = find_workload("retinanet").workload.build(p, RankContext(rank=0, world_size=1, local_batch=2, seed=0, threads=1))
    trainer.module.detector.score_thresh = 0.0   # untrained scores are ~0.01 (the head's prior): keep them
    head = trainer.module.detector.head
    seen: list[dict] = []
    head.register_forward_hook(lambda _m, _i, out: seen.append(out))   # runs before detect's cast to fp32
    _, detections = trainer.evaluate_shard(0, 1)
    assert seen and all(t.dtype == torch.bfloat16 for out in seen for t in out.values())
    boxes = torch.cat([d["boxes"] for d in detections])
    assert boxes.dtype == torch.float32 and len(boxes) > 100
    off_bf16_grid = (boxes != boxes.bfloat16().float()).float().mean().item()
    assert off_bf16_grid > 0.5, f"only {off_bf16_grid:.0%} of the coordinates are off bf16's grid"
    assert len(head._forward_hooks) == 1   # detect's own hook is gone: only the test's remains
