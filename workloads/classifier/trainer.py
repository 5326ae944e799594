"""The classifier's torch side: synthetic data, the MLP and its trainer (imported in rank processes only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import torch
from torch import nn

from orch.workload import RankContext, Trainer, batches_per_epoch, shard_indices
from workloads.classifier.workload import ClassifierParams
from workloads.ipex import apply_ipex
from workloads.optim import OPTIMIZER_IMPL_KWARGS


def make_data(p: ClassifierParams, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian clusters around `classes` centres on a sphere of radius `separation` (unit noise)."""
    gen = torch.Generator().manual_seed(p.data_seed)
    centres = torch.randn(p.classes, p.features, generator=gen)
    centres = centres / centres.norm(dim=1, keepdim=True) * p.separation
    n = p.train_samples if split == "train" else p.test_samples
    split_gen = torch.Generator().manual_seed(p.data_seed + (1 if split == "train" else 2))
    labels = torch.randint(0, p.classes, (n,), generator=split_gen)
    x = centres[labels] + torch.randn(n, p.features, generator=split_gen)
    return x, labels


class LossModule(nn.Module):
    """forward(x, y) -> mean cross-entropy: the shape the orchestrator's training step expects."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self.net(x), y)


def make_optimizer(params, p: ClassifierParams, lr: float) -> torch.optim.Optimizer:
    impl = OPTIMIZER_IMPL_KWARGS[p.optimizer_impl]
    return torch.optim.SGD(params, lr=lr, momentum=p.momentum, **impl)


class ClassifierTrainer(Trainer):
    def __init__(self, p: ClassifierParams, ctx: RankContext):
        self.p, self.ctx = p, ctx
        torch.manual_seed(ctx.seed)
        self.x, self.y = make_data(p, "train")
        self.x_test, self.y_test = make_data(p, "test")
        net: nn.Module = nn.Sequential(nn.Linear(p.features, p.hidden), nn.ReLU(), nn.Linear(p.hidden, p.hidden),
                                       nn.ReLU(), nn.Linear(p.hidden, p.classes))
        optimizer = make_optimizer(net.parameters(), p, ctx.lr or p.lr)
        net, optimizer, ipex_note = apply_ipex(net, optimizer, mode=p.ipex, dtype=torch.float32)
        self._applied = {"optimizer": f"sgd {p.optimizer_impl}", "ipex": ipex_note}
        self.module, self.optimizer = LossModule(net), optimizer

    def batches(self, epoch: int) -> Iterator[tuple[Any, ...]]:
        for idx in shard_indices(len(self.y), epoch=epoch, seed=self.ctx.seed, rank=self.ctx.rank,
                                 world_size=self.ctx.world_size, local_batch=self.ctx.local_batch):
            yield self.x[idx], self.y[idx]

    def steps_per_epoch(self) -> int:
        return batches_per_epoch(len(self.y), self.ctx.world_size, self.ctx.local_batch)

    def evaluate(self) -> dict[str, float]:
        net = cast(nn.Module, self.module.net)
        net.eval()
        with torch.no_grad():
            accuracy = (net(self.x_test).argmax(dim=1) == self.y_test).float().mean().item()
        net.train()
        return {"accuracy": accuracy}

    def applied(self) -> dict[str, str]:
        return dict(self._applied)
