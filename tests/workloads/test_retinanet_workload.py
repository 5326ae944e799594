"""The torch-free side of the retinanet workload: registry, strict params, memory formula, no torch import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orchestrator.io.workload_finder import find_workload, parse_params
from workloads.retinanet.workload import (
    SMALL_PARAMS,
    RetinaNetParams,
    RetinaNetWorkload,
    anchors_per_image,
    level_sizes,
)


def parse(**params):
    return parse_params(find_workload("retinanet").workload, params)


def test_registry_returns_the_retinanet_workload():
    workload = find_workload("retinanet").workload
    assert isinstance(workload, RetinaNetWorkload)
    assert workload.metrics == ("map", "map50")


def test_defaults_are_the_mlperf_model():
    p, problems = parse()
    assert problems == []
    assert (p.backbone, p.image_size, p.classes, p.trainable_layers) == ("resnext50_32x4d", 800, 264, 3)
    assert (p.focal_loss, p.frozen_bn) == ("kernel", "fused")


def test_unknown_and_invalid_params_are_all_reported():
    p, problems = parse(backbone="vgg16", focal_losss="kernel", image_size=16)
    assert p is None
    text = "\n".join(map(str, problems))
    assert "workload.params.focal_losss: unknown key; valid keys are:" in text and "focal_loss" in text
    assert "workload.params.backbone: must be one of" in text
    assert "workload.params.image_size: must be >= 64, got 16" in text


def test_cross_field_checks_show_the_numbers():
    _, problems = parse(image_size=100, dataset="coco")
    messages = [p.message for p in problems]
    assert any("image_size(100) % 32 = 4" in m for m in messages)
    assert any("dataset 'coco' needs data_path" in m for m in messages)


def test_small_params_parse():
    p, problems = parse(**SMALL_PARAMS)
    assert problems == [] and p.backbone == "resnet18"


def test_workload_module_imports_without_torch():
    code = ("import sys; from orchestrator.io.workload_finder import find_workload, parse_params; "
            "w = find_workload('retinanet').workload; p, _ = parse_params(w, {}); "
            "w.memory_estimate_mib(p, 2); w.samples_per_epoch(p); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_level_sizes_and_anchor_count():
    assert level_sizes(800) == (100, 50, 25, 13, 7)
    assert level_sizes(128) == (16, 8, 4, 2, 1)
    assert anchors_per_image(800) == 9 * (100**2 + 50**2 + 25**2 + 13**2 + 7**2) == 120087


def test_memory_estimate_grows_with_batch_and_with_the_reference_focal_loss():
    w = RetinaNetWorkload()
    full = RetinaNetParams()
    assert w.memory_estimate_mib(full, 2) > w.memory_estimate_mib(full, 1)
    reference = RetinaNetParams(focal_loss="reference")
    # anchors x classes x 4 bytes = 121 MiB per tensor at 800 px and 264 classes: several tensors' worth
    assert w.memory_estimate_mib(reference, 1) - w.memory_estimate_mib(full, 1) > 4 * 121
    assert w.memory_estimate_mib(RetinaNetParams(precision="bf16"), 2) < w.memory_estimate_mib(full, 2)
    sgd = RetinaNetParams(optimizer="sgd")
    trainable_mib = 36_849_004 * 4 / 2**20   # one fp32 copy of the trained parameters: AdamW keeps one more
    assert w.memory_estimate_mib(full, 1) - w.memory_estimate_mib(sgd, 1) == pytest.approx(trainable_mib)



def test_memory_estimate_follows_the_ddp_switches():
    """Gradients as views into DDP's buckets save one fp32 copy of the trained parameters; a 16-bit hook's
    compressed buckets cost half of one (benchmarks/calibrate_memory.py, small-bf16*)."""
    w = RetinaNetWorkload()
    small = {"backbone": "resnet18", "trainable_layers": 5, "image_size": 128, "classes": 4, "precision": "bf16"}
    trainable_mib = 19_234_056 * 4 / 2**20

    def estimate(**ddp):
        return w.memory_estimate_mib(RetinaNetParams(**small, **ddp), 8)

    base = estimate()
    assert estimate(ddp_grad_as_bucket_view=True) == pytest.approx(base - trainable_mib)
    assert estimate(ddp_comm_hook="bf16") == pytest.approx(base + trainable_mib / 2)
    assert estimate(ddp_comm_hook="fp16", ddp_grad_as_bucket_view=True) == pytest.approx(base - trainable_mib / 2)
    assert estimate(ddp_bucket_mb=100) == base


# Peak USS per rank measured by benchmarks/calibrate_memory.py (2-rank gloo job, torch 2.14.1); the estimate
# must stay within 20% of them.
MEASURED_USS_MIB = [
    ({"backbone": "resnet18", "trainable_layers": 5, "image_size": 128, "classes": 4}, 2, 807),
    ({"backbone": "resnet18", "trainable_layers": 5, "image_size": 128, "classes": 4}, 8, 862),
    ({}, 1, 2634),
    ({}, 2, 3705),
    ({"focal_loss": "reference"}, 2, 5367),
    # the default sweep's DDP switches (bf16 hook, gradients as bucket views), bf16: 805 and 807 MiB
    ({"backbone": "resnet18", "trainable_layers": 5, "image_size": 128, "classes": 4, "precision": "bf16",
      "memory_format": "channels_last", "ddp_comm_hook": "bf16", "ddp_grad_as_bucket_view": True}, 8, 807),
]


@pytest.mark.parametrize("params,local_batch,measured_mib", MEASURED_USS_MIB)
def test_memory_estimate_is_within_20_percent_of_the_measurements(params, local_batch, measured_mib):
    estimate = RetinaNetWorkload().memory_estimate_mib(RetinaNetParams(**params), local_batch)
    assert abs(estimate - measured_mib) <= 0.2 * measured_mib


def test_samples_per_epoch_is_the_train_samples():
    assert RetinaNetWorkload().samples_per_epoch(RetinaNetParams(train_samples=300)) == 300
