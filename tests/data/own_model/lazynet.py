"""A user's model whose module imports torch only inside its factories (as orch's own workloads do), so that
planning it stays torch-free: no memory formula, no FLOP count and no epoch size, all left to orch's probe."""

from __future__ import annotations

from dataclasses import dataclass

from orch.workload import ModelParams, accuracy, model_workload, param


@dataclass(frozen=True, kw_only=True, slots=True)
class Params(ModelParams):
    width: int = param(64, "hidden width", minimum=1)
    samples: int = param(1024, "training samples", minimum=1)


def _data(p: Params, n: int, seed: int):
    import torch

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=gen)
    return torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())


def build_model(p: Params):
    from torch import nn

    return nn.Sequential(nn.Linear(16, p.width), nn.ReLU(), nn.Linear(p.width, 2))


def _loss(out, target):
    from torch.nn.functional import cross_entropy

    return cross_entropy(out, target)


workload = model_workload(name="lazynet", description="an MLP whose module imports no torch", params=Params,
                          model=build_model, train_data=lambda p: _data(p, p.samples, 1),
                          eval_data=lambda p: _data(p, 256, 2), loss=_loss, metrics={"accuracy": accuracy})
