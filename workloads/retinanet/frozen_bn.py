"""Frozen batch-norm as one native op, and the switch that puts it into a torchvision model.

torchvision's `FrozenBatchNorm2d.forward` computes scale = w * rsqrt(rv + eps) and bias = b - rm * scale
per channel, then `x * scale + bias`: two full passes over the activation and one full-size temporary
(and under bf16 autocast the fp32 scale promotes the output to fp32, doubling what it writes).
`torch.nn.functional.batch_norm(..., training=False)` is the same affine map as one native kernel (one
pass, for contiguous and channels_last inputs, bf16 in with fp32 statistics, bf16 out). Its autograd
backward (`native_batch_norm_backward`) is not as lean: it also reads the input and reduces per channel,
as training-mode batch-norm needs (~1.2-1.4x the CPU time of one pass here). The input gradient of the
frozen map is the same map without its shift, so the backward is `batch_norm` again, with mean 0 and no
bias: one pass, computed in fp32 whatever the dtype. (A plain `grad * scale` is as fast in fp32, but with
a bf16 gradient and an fp32 scale it falls off the vectorized path: 4-14x slower.)
"""

from __future__ import annotations

from typing import cast

import torch
from torch.autograd.function import once_differentiable
from torchvision.ops.misc import FrozenBatchNorm2d

FROZEN_BN_IMPLS = ("reference", "fused")


class _FrozenAffine(torch.autograd.Function):
    """y = batch_norm(x) with frozen statistics; dy/dx = weight * rsqrt(running_var + eps) per channel.
    The buffers get no gradient: they are frozen."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps: float):
        ctx.save_for_backward(weight, running_var)
        ctx.eps = eps
        return torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias, training=False,
                                              momentum=0.0, eps=eps)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        weight, running_var = ctx.saved_tensors
        # grad * weight * rsqrt(running_var + eps): batch_norm with mean 0 and no bias (see the module doc).
        grad_input = torch.nn.functional.batch_norm(grad_output, torch.zeros_like(running_var), running_var,
                                                    weight, None, training=False, momentum=0.0, eps=ctx.eps)
        return grad_input, None, None, None, None, None


class FusedFrozenBatchNorm2d(FrozenBatchNorm2d):
    """torchvision's `FrozenBatchNorm2d` (same buffers, same state dict) with a one-op forward.

    Output dtype follows the input (bf16 in, bf16 out), like `nn.BatchNorm2d` under autocast, where the
    reference returns fp32 for a bf16 input.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _FrozenAffine.apply(x, self.weight, self.bias, self.running_mean, self.running_var, self.eps)


def fuse_frozen_batchnorm(module: torch.nn.Module) -> int:
    """Replace, in place, every torchvision `FrozenBatchNorm2d` under `module` by a `FusedFrozenBatchNorm2d`
    with the same buffers (copied) and eps; returns how many were replaced.

    Only modules of exactly that class are replaced (a subclass may have changed forward), and only
    submodules: `module` itself cannot be swapped in place.

    >>> net = torchvision.models.resnet18(norm_layer=FrozenBatchNorm2d)
    >>> fuse_frozen_batchnorm(net)
    20
    """
    replaced = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is not FrozenBatchNorm2d:
                continue
            fused = FusedFrozenBatchNorm2d(cast(torch.Tensor, child.weight).shape[0], eps=child.eps)
            for buffer_name, buffer in child.named_buffers(recurse=False):
                setattr(fused, buffer_name, buffer.detach().clone())  # keeps the buffer's device and dtype
            fused.train(child.training)
            setattr(parent, name, fused)
            replaced += 1
    return replaced
