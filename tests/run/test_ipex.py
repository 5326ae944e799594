"""Intel Extension for PyTorch for real, in the environment `scripts/setup.sh --ipex` makes (torch 2.8 + IPEX
2.8): `ipex.optimize` applied on real training steps of both workloads, and a sweep trial recorded with it.

Marked `ipex`. Where IPEX is not installed (the main environment) these tests skip; where it is installed
but does not import, or where ORCH_REQUIRE_IPEX=1 says it must be there (CI's IPEX step), they fail.
The fallback note when IPEX is absent is tested in the main environment, in test_retinanet_model.py.
"""

from __future__ import annotations

import importlib.util
import math
import os

import pytest
from conftest import by_key, read_records, write_sweep

from workloads.ipex import IPEX_MODULE, ipex_unavailable_reason

REQUIRED = os.environ.get("ORCH_REQUIRE_IPEX") == "1"
# Decided at collection, so that where IPEX is absent not even the module's Ray instance is started.
pytestmark = [pytest.mark.ipex, pytest.mark.skipif(
    importlib.util.find_spec(IPEX_MODULE) is None and not REQUIRED,
    reason=f"{IPEX_MODULE} is not installed (bash scripts/setup.sh --ipex makes .venv-ipex with it)")]


@pytest.fixture(autouse=True)
def ipex_here():
    """Fail where IPEX should work and does not (installed for another torch, or required and absent)."""
    reason = ipex_unavailable_reason()
    if reason is not None:
        pytest.fail(f"IPEX must work in this environment: {reason}")
    import intel_extension_for_pytorch  # noqa: F401  (an import error fails the test)


def train_steps(trainer, steps: int) -> list[float]:
    """The orchestrator's training step (workloads/base.py), `steps` times on the first batch."""
    batch = next(iter(trainer.batches(0)))
    losses = []
    for _ in range(steps):
        trainer.optimizer.zero_grad(set_to_none=True)
        loss = trainer.module(*batch)
        loss.backward()
        trainer.optimizer.step()
        losses.append(loss.item())
    return losses


def build(name: str, threads: int = 1, **params):
    from orch.workload import RankContext
    from orchestrator.io.workload_finder import find_workload, parse_params

    parsed, problems = parse_params(find_workload(name).workload, params)
    assert problems == []
    return find_workload(name).workload.build(parsed, RankContext(rank=0, world_size=1, local_batch=4, seed=0,
                                                         threads=threads))


RETINANET = {"backbone": "resnet18", "image_size": 64, "classes": 3, "trainable_layers": 5, "train_samples": 8,
             "test_samples": 2, "optimizer": "sgd", "lr": 0.01}


def test_ipex_optimize_rewrites_the_retinanet_and_trains_like_plain_torch():
    import intel_extension_for_pytorch as ipex
    import torch

    on, off = build("retinanet", **RETINANET), build("retinanet", **RETINANET, ipex="off")
    note = on.applied()["ipex"]
    assert note.startswith(f"on: ipex {ipex.__version__} optimize(dtype=float32): "), note
    assert "IPEX fused update step" in note            # SGD has IPEX's fused CPU step
    prepacked = [m for m in on.module.modules() if type(m).__module__.startswith(IPEX_MODULE)]
    assert len(prepacked) >= 30 and f"{len(prepacked)} modules prepacked" in note
    assert off.applied()["ipex"] == "off: ipex=off"
    assert not any(type(m).__module__.startswith(IPEX_MODULE) for m in off.module.modules())

    steps_on, steps_off = train_steps(on, 3), train_steps(off, 3)
    # Same seed, same data: fp32 with blocked weights and a fused step is the same arithmetic up to rounding.
    assert steps_on == pytest.approx(steps_off, rel=2e-3)
    assert steps_on[-1] < steps_on[0]
    assert all(torch.isfinite(p).all() for p in on.module.parameters())


def test_ipex_bf16_holds_bf16_weights_and_keeps_adamws_own_step():
    import torch

    from workloads.ipex import ipex_bf16_unsupported_reason

    trainer = build("retinanet", **{**RETINANET, "image_size": 96, "optimizer": "adamw", "lr": 1e-3},
                    precision="bf16")
    note = trainer.applied()["ipex"]
    if (why := ipex_bf16_unsupported_reason()) is not None:
        # An AVX2-only CPU (or the AVX2 cap): IPEX would assert in its bf16 prepack; auto falls back and says why
        assert note == f"off: {why}"
        assert not any(type(m).__name__ == "_IPEXConv2d" for m in trainer.module.modules())
        assert all(math.isfinite(loss) for loss in train_steps(trainer, 2))
        return
    assert "optimize(dtype=bfloat16)" in note
    assert "bfloat16 weights with an unfused fp32 master-weight update (AdamW)" in note
    convs = [m for m in trainer.module.modules() if type(m).__name__ == "_IPEXConv2d"]
    assert convs and all(m.weight.dtype == torch.bfloat16 for m in convs)
    losses = train_steps(trainer, 3)
    assert all(math.isfinite(loss) and loss < 1e3 for loss in losses), losses
    # The bf16 eval path runs on every test image and gives sane detections. An untrained head scores every
    # anchor near its 0.01 prior, below the default 0.05 threshold, which would leave no detection to check
    # (mAP 0 whatever the path computed; `map >= 0` could not fail, the loader clamps it at 0): keep them all.
    trainer.module.detector.score_thresh = 0.0
    targets, detections = trainer.evaluate_shard(0, 1)
    assert len(targets) == len(detections) == RETINANET["test_samples"]
    size = 96  # the image_size above: boxes are clipped to the image
    for found in detections:
        assert len(found["scores"]) > 0
        assert bool(((found["scores"] >= 0) & (found["scores"] <= 1)).all()), found["scores"]   # probabilities
        assert bool(((found["boxes"] >= 0) & (found["boxes"] <= size)).all()), found["boxes"]   # NaN fails too
    scores = trainer.score_shards([(targets, detections)])
    # AP is an area under a precision-recall curve, in [0, 1]; AP at IoU 0.5 is at least the mean over the
    # stricter IoUs 0.5:0.95 (a match at a strict IoU is a match at 0.5), so the two come in this order.
    assert 0.0 <= scores["map"] <= scores["map50"] <= 1.0, scores


def test_ipex_fused_sgd_on_the_classifier_matches_torchs_sgd():
    on, off = build("classifier", hidden=64), build("classifier", hidden=64, ipex="off")
    assert "IPEX fused update step" in on.applied()["ipex"]
    assert off.applied() == {"optimizer": "sgd foreach", "ipex": "off: ipex=off"}
    assert train_steps(on, 5) == pytest.approx(train_steps(off, 5), rel=1e-4)


def test_without_prepacking_conv_weights_are_left_channels_last_for_torch_compile():
    import torch

    from workloads.ipex import apply_ipex

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 8, 3))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    net, optimizer, note = apply_ipex(net, optimizer, mode="auto", dtype=torch.float32, weights_prepack=False)
    assert "weights_prepack=False): 0 modules prepacked" in note and "2/2 other conv weights channels-last" in note
    assert all(m.weight.is_contiguous(memory_format=torch.channels_last) for m in net)


CLASSIFIER_SWEEP = """
workload:
  name: classifier
  params: {hidden: 64, train_samples: 1024}
grid:
  ranks: [2]
  threads_per_rank: [1]
  local_batch: [32]
measure: {warmup_steps: 2, timed_steps: 10, repeats: 2, peak: false}
# Where oneCCL's bindings are installed too, auto picks ccl: its worker shares the rank's core, so that
# 2 ranks fit 2 CPUs with either backend.
constraints: {ccl_workers: 0}
"""


@pytest.mark.ray
@pytest.mark.needs_cpus(2)
def test_a_sweep_trial_is_recorded_with_ipex_applied(ray_local, tmp_path):
    from orchestrator.cli import main

    sweep = write_sweep(tmp_path, "ipex", CLASSIFIER_SWEEP)
    results = tmp_path / "results"
    assert main(["sweep", str(sweep), "--results", str(results), "--no-report"]) == 0
    trial = by_key(read_records(results))["r2-t1-b32"]
    assert trial["status"] == "ok", trial["reason"]
    assert trial["applied"]["ipex"].startswith("on: ipex 2.8"), trial["applied"]
    assert trial["throughput"]["samples_per_s"] > 0
    # DDP over IPEX's optimized modules still averages the gradients of both ranks.
    checks = [rank["allreduce_check"] for rank in trial["placement"]]
    assert checks[0]["synced_grad_sums"] == pytest.approx(checks[1]["synced_grad_sums"], rel=1e-6, abs=1e-9)
