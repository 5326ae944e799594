"""A user's model brought to orch by file path (`tests/data/own_model/tinynet.py:workload`): an unmodified
nn.Module, a map-style dataset and a loss, nothing of orch's but the public door."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from orch.workload import ModelParams, accuracy, model_workload, param


@dataclass(frozen=True, kw_only=True, slots=True)
class Params(ModelParams):
    width: int = param(32, "hidden width", minimum=1)
    samples: int = param(512, "training samples", minimum=1)
    fail: str = param("", "for the tests: 'factory' raises in the model factory, 'no-scalar' drops the loss")


def _data(p: Params, n: int, seed: int) -> torch.utils.data.TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=gen)
    y = (x[:, 0] + x[:, 1] > 0).long()   # learnable: a linear boundary
    return torch.utils.data.TensorDataset(x, y)


def build_model(p: Params) -> nn.Module:
    if p.fail == "factory":
        raise RuntimeError("the model factory failed on purpose")
    return nn.Sequential(nn.Linear(8, p.width), nn.ReLU(), nn.Linear(p.width, 2))


def _loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(out, target)


workload = model_workload(name="tinynet", description="a two-layer MLP on a linear boundary", params=Params,
                          model=build_model, train_data=lambda p: _data(p, p.samples, 1),
                          eval_data=lambda p: _data(p, 256, 2), loss=_loss, metrics={"accuracy": accuracy})

# The same model with no loss: called with the whole batch (inputs and target), it takes one argument only.
no_loss = model_workload(name="tinynet-noloss", params=Params, model=build_model,
                         train_data=lambda p: _data(p, p.samples, 1))
# Inputs only and no loss: its forward returns logits, which are not a scalar training loss.
inputs_only = model_workload(name="tinynet-inputs", params=Params, model=build_model,
                             train_data=lambda p: torch.utils.data.TensorDataset(_data(p, p.samples, 1).tensors[0]))
