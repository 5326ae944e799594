"""COCO-style mAP with pycocotools: ground truth and detections converted to COCO's formats in memory.

`map` is COCOeval's AP at IoU 0.50:0.95 (stats[0]) and `map50` its AP at IoU 0.50 (stats[1]), both over all
areas with at most 100 detections per image.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable
from typing import Any, cast

import torch


def coco_ground_truth(targets: list[dict[str, torch.Tensor]], classes: int) -> dict:
    """A COCO instances document: image i is id i + 1, label l is category l + 1 (COCO ids start at 1)."""
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for image_id, target in enumerate(targets, start=1):
        images.append({"id": image_id})
        for box, label in zip(target["boxes"].tolist(), target["labels"].tolist()):
            x0, y0, x1, y1 = box
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": label + 1,
                                "bbox": [x0, y0, x1 - x0, y1 - y0], "area": (x1 - x0) * (y1 - y0),
                                "iscrowd": 0})
    categories = [{"id": c + 1, "name": str(c)} for c in range(classes)]
    return {"images": images, "annotations": annotations, "categories": categories}


def coco_detections(detections: list[dict[str, torch.Tensor]]) -> list[dict]:
    """torchvision detections ({"boxes" xyxy, "scores", "labels"} per image) as COCO result records."""
    records = []
    for image_id, det in enumerate(detections, start=1):
        for box, score, label in zip(det["boxes"].tolist(), det["scores"].tolist(), det["labels"].tolist()):
            x0, y0, x1, y1 = box
            records.append({"image_id": image_id, "category_id": int(label) + 1,
                            "bbox": [x0, y0, x1 - x0, y1 - y0], "score": float(score)})
    return records


def mean_average_precision(targets: list[dict[str, torch.Tensor]], detections: list[dict[str, torch.Tensor]],
                           classes: int) -> dict[str, float]:
    """{"map": AP@[.5:.95], "map50": AP@.5}; 0 when there are no detections at all.

    >>> t = [{"boxes": torch.tensor([[10., 10., 50., 40.]]), "labels": torch.tensor([1])}]
    >>> d = [{"boxes": t[0]["boxes"], "scores": torch.tensor([0.9]), "labels": t[0]["labels"]}]
    >>> mean_average_precision(t, d, classes=2)
    {'map': 1.0, 'map50': 1.0}
    """
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    if len(targets) != len(detections):
        raise ValueError(f"{len(targets)} targets but {len(detections)} detections")
    results = coco_detections(detections)
    if not results:   # COCO.loadRes rejects an empty list
        return {"map": 0.0, "map50": 0.0}
    with contextlib.redirect_stdout(io.StringIO()):   # pycocotools prints progress and the summary table
        truth = COCO()
        truth.dataset = coco_ground_truth(targets, classes)
        truth.createIndex()
        evaluation = COCOeval(truth, truth.loadRes(results), iouType="bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    # COCOeval reports -1 where there is no ground truth at all; that is no evidence of skill either.
    return {"map": max(0.0, float(evaluation.stats[0])), "map50": max(0.0, float(evaluation.stats[1]))}


def _outputs_to_fp32(_module: torch.nn.Module, _inputs: Any, outputs: dict[str, torch.Tensor]) -> dict:
    return {name: out.float() for name, out in outputs.items()}


@torch.no_grad()
def detect(detector: torch.nn.Module, batches: Iterable[torch.Tensor], *, bf16: bool = False) -> list[dict]:
    """The detector's own eval path (transform, heads, postprocess with score threshold and NMS).

    With `bf16` the backbone and heads run under bf16 autocast, as in training, and the heads' outputs are cast
    to fp32 before postprocessing, as the training loss casts them: torchvision's box decoding converts the
    anchors to its input's dtype, and in bf16 (8 significant bits) a box edge near 128 px would move by up to
    half a pixel, and the scores would tie."""
    was_training = detector.training
    detector.eval()
    head = cast(torch.nn.Module, detector.head)
    to_fp32 = head.register_forward_hook(_outputs_to_fp32) if bf16 else None
    try:
        detections: list[dict[str, torch.Tensor]] = []
        for images in batches:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = detector(list(images))
            detections.extend({k: v.float() if v.is_floating_point() else v for k, v in d.items()} for d in out)
        return detections
    finally:
        detector.train(was_training)
        if to_fp32 is not None:
            to_fp32.remove()
