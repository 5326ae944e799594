"""A small CNN of my own on synthetic stripes, brought to orch with the function adapter.

Everything orch needs is in `workload` below: the parameters (a dataclass of `param` fields), a model factory,
a dataset per split, the loss and the metric. orch shards the data per rank, builds the optimizer, wraps the
model in DDP and times the steps; it measures memory per rank and FLOPs per sample itself.

Importing this module must not import torch (orch plans without it): torch is imported inside the functions,
which only rank processes call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orch.workload import ModelParams, accuracy, model_workload, param


@dataclass(frozen=True, kw_only=True, slots=True)
class StripesParams(ModelParams):
    channels: int = param(8, "channels of the two convolutions", minimum=1)
    size: int = param(16, "image side, pixels", minimum=8)
    train_samples: int = param(2048, "training images per epoch", minimum=1)
    eval_samples: int = param(512, "held-out images", minimum=1)
    noise: float = param(1.0, "Gaussian noise over the stripes (amplitude 1)", minimum=0)
    lr: float = param(0.05, "learning rate when the sweep gives none", exclusive_minimum=0)


def build_model(p: StripesParams) -> Any:
    """An ordinary nn.Module: two convolutions, global pooling, a linear classifier over 4 stripe
    directions. Nothing in it knows about orch."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, p.channels, 3, padding=1), nn.ReLU(),
        nn.Conv2d(p.channels, p.channels, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(p.channels, 4))


def stripes(p: StripesParams, count: int, seed: int) -> Any:
    """`count` noisy images of stripes in one of 4 directions (the label), each at a random phase."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(4, (count,), generator=gen)
    y, x = torch.meshgrid(torch.arange(p.size), torch.arange(p.size), indexing="ij")
    directions = torch.stack([x, y, x + y, x - y]).float()           # 4 × size × size
    phase = torch.rand(count, 1, 1, generator=gen) * 6.3
    clean = torch.sin(directions[labels] * 1.5 + phase)
    images = clean + p.noise * torch.randn(clean.shape, generator=gen)
    return torch.utils.data.TensorDataset(images.unsqueeze(1), labels)


def cross_entropy(output: Any, target: Any) -> Any:
    import torch

    return torch.nn.functional.cross_entropy(output, target)


workload = model_workload(
    name="stripes", params=StripesParams, model=build_model,
    train_data=lambda p: stripes(p, p.train_samples, seed=1),
    eval_data=lambda p: stripes(p, p.eval_samples, seed=2),
    loss=cross_entropy, metrics={"accuracy": accuracy},
    samples_per_epoch=lambda p: p.train_samples,
    description="a small CNN on synthetic stripes (orch's example package, examples/my-model)")
