"""The one-op frozen batch-norm against torchvision's FrozenBatchNorm2d, and the model-wide switch.

Tolerances: fp32 outputs and input gradients agree to fp32 rounding (rtol 1e-6, atol 1e-6 on values of
order 1-10; both compute x * scale + shift with the same per-channel scale and shift). Under bf16
autocast the fused output is bf16 (the reference's is fp32: its fp32 scale promotes), so it may differ by
one bf16 rounding (rtol 2**-8); the fused module's upstream gradient is then bf16 too, so the two input
gradients may differ by two bf16 roundings (rtol 2**-7).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torchvision
from torchvision.ops.misc import FrozenBatchNorm2d

from workloads.retinanet.frozen_bn import FROZEN_BN_IMPLS, FusedFrozenBatchNorm2d, fuse_frozen_batchnorm

FP32 = dict(rtol=1e-6, atol=1e-6)
LAYOUTS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def randomize_buffers(module: torch.nn.Module, seed: int = 0) -> None:
    """Non-trivial statistics (the defaults make frozen batch-norm the identity, which hides mistakes)."""
    gen = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, FrozenBatchNorm2d):
            c = m.weight.shape[0]
            m.weight.copy_(torch.rand(c, generator=gen) + 0.5)
            m.bias.copy_(torch.randn(c, generator=gen))
            m.running_mean.copy_(torch.randn(c, generator=gen))
            m.running_var.copy_(torch.rand(c, generator=gen) + 0.1)


def pair(channels: int = 8, eps: float = 1e-5) -> tuple[FrozenBatchNorm2d, FusedFrozenBatchNorm2d]:
    ref = FrozenBatchNorm2d(channels, eps=eps)
    randomize_buffers(ref)
    fused = FusedFrozenBatchNorm2d(channels, eps=eps)
    fused.load_state_dict(ref.state_dict())
    return ref, fused


def output_and_grad(module, x, upstream):
    x = x.detach().requires_grad_()
    y = module(x)
    (grad,) = torch.autograd.grad(y, x, upstream.to(y.dtype))
    return y, grad


@pytest.mark.parametrize("layout", LAYOUTS)
def test_matches_reference_in_fp32(layout):
    ref, fused = pair(eps=1e-3)  # a non-default eps, so that dropping it would show
    x = torch.randn(2, 8, 5, 7).to(memory_format=LAYOUTS[layout])
    upstream = torch.randn(2, 8, 5, 7).to(memory_format=LAYOUTS[layout])
    y, grad = output_and_grad(fused, x, upstream)
    ref_y, ref_grad = output_and_grad(ref, x, upstream)
    torch.testing.assert_close(y, ref_y, **FP32)
    torch.testing.assert_close(grad, ref_grad, **FP32)
    assert y.is_contiguous(memory_format=LAYOUTS[layout])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_matches_reference_under_bf16_autocast(layout):
    ref, fused = pair()
    x = torch.randn(2, 8, 5, 7).to(torch.bfloat16, memory_format=LAYOUTS[layout])  # as a conv's bf16 output
    upstream = torch.randn(2, 8, 5, 7).to(memory_format=LAYOUTS[layout])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, grad = output_and_grad(fused, x, upstream)
        ref_y, ref_grad = output_and_grad(ref, x, upstream)
    assert y.dtype == torch.bfloat16 and ref_y.dtype == torch.float32
    assert grad.dtype == ref_grad.dtype == torch.bfloat16
    assert y.is_contiguous(memory_format=LAYOUTS[layout])
    torch.testing.assert_close(y.float(), ref_y, rtol=2**-8, atol=1e-5)
    torch.testing.assert_close(grad, ref_grad, rtol=2**-7, atol=1e-5)


def test_gradient_of_a_sum():
    # y.sum().backward() hands backward an expanded (stride-0) gradient.
    ref, fused = pair()
    x = torch.randn(2, 8, 3, 3, requires_grad=True)
    fused(x).sum().backward()
    expected = (ref.weight * (ref.running_var + ref.eps).rsqrt()).reshape(1, -1, 1, 1).expand_as(x)
    torch.testing.assert_close(x.grad, expected, **FP32)


@pytest.fixture(scope="module")
def resnet18_template() -> torch.nn.Module:
    model = torchvision.models.resnet18(weights=None, num_classes=10, norm_layer=FrozenBatchNorm2d).eval()
    randomize_buffers(model)
    return model


@pytest.fixture
def frozen_resnet18(resnet18_template):
    """A fresh copy each call (building resnet18 costs ~0.3 s, copying it a few ms)."""
    return lambda: copy.deepcopy(resnet18_template)


def test_fuse_replaces_every_frozen_batchnorm_and_keeps_the_output(frozen_resnet18):
    model = frozen_resnet18()
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model(x)
    # resnet18: the stem's bn1, 2 per basic block x 8 blocks, 3 downsample shortcuts.
    assert fuse_frozen_batchnorm(model) == 20
    kinds = [type(m) for m in model.modules() if isinstance(m, FrozenBatchNorm2d)]
    assert kinds == [FusedFrozenBatchNorm2d] * 20
    assert fuse_frozen_batchnorm(model) == 0  # already fused
    with torch.no_grad():
        after = model(x)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)


def test_fuse_copies_buffers_and_eps():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), FrozenBatchNorm2d(4, eps=1e-3))
    randomize_buffers(model)
    old = model[1]
    assert fuse_frozen_batchnorm(model) == 1
    new = model[1]
    assert new.eps == 1e-3
    for name in ("weight", "bias", "running_mean", "running_var"):
        assert torch.equal(getattr(new, name), getattr(old, name))
        assert getattr(new, name).data_ptr() != getattr(old, name).data_ptr()  # copied, not shared


def test_state_dict_round_trips(frozen_resnet18):
    reference = frozen_resnet18()
    fused = frozen_resnet18()
    randomize_buffers(fused, seed=1)  # different values, so that loading must overwrite them
    fuse_frozen_batchnorm(fused)
    fused.load_state_dict(reference.state_dict())  # strict: the same keys
    for (key, value), (fused_key, fused_value) in zip(reference.state_dict().items(), fused.state_dict().items()):
        assert key == fused_key and torch.equal(value, fused_value)
    back = frozen_resnet18()
    randomize_buffers(back, seed=2)
    back.load_state_dict(fused.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(back.state_dict().values(), reference.state_dict().values()))


def test_impl_names():
    assert FROZEN_BN_IMPLS == ("reference", "fused")
