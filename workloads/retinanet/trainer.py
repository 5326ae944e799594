"""The retinanet trainer: one rank's detector, optimizer, data shard and mAP, with the CPU switches applied
in the order they compose (frozen-BN fusion and memory format on the bare model, then the optimizer, then
IPEX, which rewrites both, then torch.compile on the result). `applied()` says what took effect."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import torch

from orch.precision import decide_precision
from orch.workload import RankContext, Trainer, batches_per_epoch, shard_indices
from workloads.ipex import apply_ipex
from workloads.optim import OPTIMIZER_IMPL_KWARGS
from workloads.retinanet.data import collate, make_dataset
from workloads.retinanet.evaluate import detect, mean_average_precision
from workloads.retinanet.model import RetinaNetTrainingLoss, build_detector
from workloads.retinanet.workload import RetinaNetParams


def make_optimizer(parameters: list[torch.nn.Parameter], p: RetinaNetParams,
                   lr: float) -> tuple[torch.optim.Optimizer, str]:
    """The optimizer and a note of the implementation used; `fused` falls back to `foreach` where this
    PyTorch has no fused CPU kernel (the constructor raises RuntimeError then)."""
    def make(**impl: Any) -> torch.optim.Optimizer:
        if p.optimizer == "sgd":
            return torch.optim.SGD(parameters, lr=lr, momentum=p.momentum, weight_decay=p.weight_decay, **impl)
        return torch.optim.AdamW(parameters, lr=lr, weight_decay=p.weight_decay, **impl)

    impl = OPTIMIZER_IMPL_KWARGS[p.optimizer_impl]
    try:
        return make(**impl), f"{p.optimizer} {p.optimizer_impl}"
    except RuntimeError as err:
        if p.optimizer_impl != "fused":
            raise
        return make(foreach=True), f"{p.optimizer} foreach: fused unavailable on CPU ({err})"


class RetinaNetTrainer(Trainer):
    def __init__(self, p: RetinaNetParams, ctx: RankContext):
        p = decide_precision(p)   # a sweep decides `auto` for all its ranks; a trainer built without one, here
        self.p, self.ctx = p, ctx
        self._applied: dict[str, str] = {"focal_loss": p.focal_loss, "precision": p.precision}
        torch.manual_seed(ctx.seed)
        self.train_data = make_dataset(p, "train")
        self.test_data = make_dataset(p, "test")

        detector = build_detector(p)
        if p.frozen_bn == "fused":
            from workloads.retinanet.frozen_bn import fuse_frozen_batchnorm

            self._applied["frozen_bn"] = f"fused ({fuse_frozen_batchnorm(detector.backbone)} modules)"
        else:
            self._applied["frozen_bn"] = "reference"
        channels_last = p.memory_format == "channels_last"
        if channels_last:
            detector = detector.to(memory_format=torch.channels_last)
        self._applied["memory_format"] = p.memory_format

        module = RetinaNetTrainingLoss(detector, bf16=p.precision == "bf16", channels_last=channels_last)
        trained = [param for param in module.parameters() if param.requires_grad]
        optimizer, self._applied["optimizer"] = make_optimizer(trained, p, ctx.lr or p.lr)
        # IPEX's prepacked convolutions are opaque custom ops to torch.compile: keep plain ones for it.
        dtype = torch.bfloat16 if p.precision == "bf16" else torch.float32
        optimized, optimizer, self._applied["ipex"] = apply_ipex(module, optimizer, mode=p.ipex, dtype=dtype,
                                                                 weights_prepack=not p.compile)
        module = cast(RetinaNetTrainingLoss, optimized)   # ipex.optimize returns a copy of the same class
        # Evaluation runs as training does: the dense part in bf16 under bf16, the postprocessing in fp32.
        self._eval_bf16 = p.precision == "bf16"
        if p.compile:
            # The dense part only: the loss's boolean indexing would break the graph at every image.
            module.dense = torch.compile(module._dense)
        self._applied["compile"] = "backbone+heads" if p.compile else "off"
        self.module, self.optimizer = module, optimizer

    def batches(self, epoch: int) -> Iterator[tuple[Any, ...]]:
        for indices in shard_indices(len(self.train_data), epoch=epoch, seed=self.ctx.seed, rank=self.ctx.rank,
                                     world_size=self.ctx.world_size, local_batch=self.ctx.local_batch):
            yield collate([self.train_data[i] for i in indices.tolist()])

    def steps_per_epoch(self) -> int:
        # Counted from the sample count: iterating an epoch would render (or decode) every image.
        return batches_per_epoch(len(self.train_data), self.ctx.world_size, self.ctx.local_batch)

    def evaluate(self) -> dict[str, float]:
        return self.score_shards([self.evaluate_shard(0, 1)])

    def evaluate_shard(self, rank: int, world_size: int) -> tuple[list[dict], list[dict]]:
        """(targets, detections) of test images rank, rank + world_size, ...; in batches no larger than a
        training batch, so within the memory estimate."""
        mine = list(range(rank, len(self.test_data), world_size))
        size = self.ctx.local_batch
        chunks = [mine[start:start + size] for start in range(0, len(mine), size)]
        targets: list[dict[str, torch.Tensor]] = []

        def images():
            for chunk in chunks:
                batch_images, batch_targets = collate([self.test_data[i] for i in chunk])
                targets.extend(batch_targets)
                yield batch_images

        detections = detect(cast(torch.nn.Module, self.module.detector), images(), bf16=self._eval_bf16)
        return targets, detections

    def score_shards(self, shards: list[tuple[list[dict], list[dict]]]) -> dict[str, float]:
        targets = [t for shard_targets, _ in shards for t in shard_targets]
        detections = [d for _, shard_detections in shards for d in shard_detections]
        return mean_average_precision(targets, detections, self.p.classes)

    def applied(self) -> dict[str, str]:
        return dict(self._applied)
