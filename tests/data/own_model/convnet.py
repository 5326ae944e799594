"""A user's convolutional model brought by file path (`tests/data/own_model/convnet.py:workload`): one 3×3 pad-1
convolution on 4×4 images, whose border taps fall in the padding, then a linear layer. Its FLOPs per image by orch's
count (only the taps inside the image): the convolution's forward and its weights' gradient, 2·3·2·(10·10) = 1,200
each, the linear layer's forward and both gradients, 2·48·5 = 480 each: 3,840 (torch's own formula: 4,896)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from orch.workload import ModelParams, model_workload, param


@dataclass(frozen=True, kw_only=True, slots=True)
class Params(ModelParams):
    samples: int = param(256, "training samples", minimum=1)


def _data(p: Params) -> torch.utils.data.TensorDataset:
    gen = torch.Generator().manual_seed(1)
    return torch.utils.data.TensorDataset(torch.randn(p.samples, 2, 4, 4, generator=gen),
                                          torch.randint(0, 5, (p.samples,), generator=gen))


def build_model(p: Params) -> nn.Module:
    return nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(48, 5))


workload = model_workload(name="convnet", description="a padded 3×3 convolution and a linear layer", params=Params,
                          model=build_model, train_data=_data, loss=nn.functional.cross_entropy)
