"""The focal-loss kernel against torchvision.ops.sigmoid_focal_loss: values, gradients, dtypes, errors.

Tolerances: fp32 results must match torchvision's fp32 results to fp32 rounding (rtol 1e-5, atol 1e-6 on
values of order 1-40: the two compute the same quantities in different orders), and float64 results to
1e-12. bf16 inputs are exact in fp32, so the kernel on them must match torchvision in fp32 on the same
values to fp32 rounding; only its bf16 gradient carries bf16 rounding (rtol 2**-8, one rounding).
"""

from __future__ import annotations

import pytest
import torch
import torchvision

from workloads.retinanet.focal_loss import FOCAL_LOSS_IMPLS, SigmoidFocalLoss, get_focal_loss, sigmoid_focal_loss

reference = torchvision.ops.sigmoid_focal_loss
FP32 = dict(rtol=1e-5, atol=1e-6)
FP64 = dict(rtol=1e-12, atol=1e-14)
BF16_GRAD = dict(rtol=2**-8, atol=1e-6)


def make_inputs(rows: int = 64, classes: int = 9, dtype: torch.dtype = torch.float32, seed: int = 0):
    """Logits over a wide range with ±50 extremes for both labels; one-hot targets with all-negative rows."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, classes, generator=gen, dtype=torch.float64) * 4 - 2
    t = torch.zeros(rows, classes, dtype=torch.float64)
    positive = torch.rand(rows, generator=gen) < 0.5  # the other rows are all-negative
    t[positive, torch.randint(0, classes, (rows,), generator=gen)[positive]] = 1.0
    t[:4, 0] = torch.tensor([0.0, 0.0, 1.0, 1.0])
    x[:4, 0] = torch.tensor([50.0, -50.0, 50.0, -50.0])
    assert (t.sum(dim=1) == 0).any() and (t.sum(dim=1) == 1).any()
    return x.to(dtype).requires_grad_(), t.to(dtype)


def loss_and_grad(fn, x, t, alpha, gamma, reduction):
    loss = fn(x, t, alpha=alpha, gamma=gamma, reduction=reduction)
    # A non-uniform upstream gradient, so "none" checks every element's gradient, not just their sum.
    upstream = torch.linspace(0.5, 1.5, loss.numel(), dtype=loss.dtype).reshape(loss.shape)
    (grad,) = torch.autograd.grad(loss, x, upstream)
    return loss, grad


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("gamma", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("alpha", [0.25, -1.0])
def test_matches_torchvision_in_fp32(reduction, gamma, alpha):
    x, t = make_inputs()
    loss, grad = loss_and_grad(sigmoid_focal_loss, x, t, alpha, gamma, reduction)
    ref_loss, ref_grad = loss_and_grad(reference, x, t, alpha, gamma, reduction)
    assert loss.dtype == torch.float32 and loss.shape == ref_loss.shape
    assert torch.isfinite(loss).all() and torch.isfinite(grad).all()
    torch.testing.assert_close(loss, ref_loss, **FP32)
    torch.testing.assert_close(grad, ref_grad, **FP32)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("alpha", [0.0, 0.25, 0.5, 0.9, 1.0, -1.0])
@pytest.mark.parametrize("gamma", [0.0, 1.0, 1.5, 2.0])
def test_matches_torchvision_in_fp64(reduction, alpha, gamma):
    # Every branch of the alpha folding (alpha 0, 1, 1/2, > 1/2, unweighted) against the formula.
    x, t = make_inputs(dtype=torch.float64)
    loss, grad = loss_and_grad(sigmoid_focal_loss, x, t, alpha, gamma, reduction)
    ref_loss, ref_grad = loss_and_grad(reference, x, t, alpha, gamma, reduction)
    torch.testing.assert_close(loss, ref_loss, **FP64)
    torch.testing.assert_close(grad, ref_grad, **FP64)


def test_extreme_logits_have_the_exact_limits():
    x = torch.tensor([50.0, -50.0, 50.0, -50.0], requires_grad=True)
    t = torch.tensor([0.0, 0.0, 1.0, 1.0])
    loss = sigmoid_focal_loss(x, t, alpha=0.25, gamma=2.0)
    loss.sum().backward()
    # Confidently wrong: a_t * |x| and slope ±a_t; confidently right: ~exp(-150), i.e. zero.
    torch.testing.assert_close(loss, torch.tensor([0.75 * 50, 0.0, 0.0, 0.25 * 50]), rtol=1e-6, atol=1e-30)
    torch.testing.assert_close(x.grad, torch.tensor([0.75, 0.0, 0.0, -0.25]), rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("gamma", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("alpha", [0.25, -1.0])
def test_gradcheck_in_double(reduction, gamma, alpha):
    x, t = make_inputs(rows=6, classes=5, dtype=torch.float64)
    with torch.no_grad():
        x[:4, 0] = torch.tensor([3.0, -3.0, 3.0, -3.0])  # finite differences need curvature they can see
    assert torch.autograd.gradcheck(lambda x: sigmoid_focal_loss(x, t, alpha, gamma, reduction), (x,))


def test_backward_twice_gives_the_same_gradient():
    # The saved gradient must not be consumed by the first backward.
    x, t = make_inputs()
    loss = sigmoid_focal_loss(x, t, reduction="sum")
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()
    torch.testing.assert_close(x.grad, 2 * first, rtol=0, atol=0)


def test_no_grad_computes_the_same_loss_without_a_graph():
    x, t = make_inputs()
    with torch.no_grad():
        loss = sigmoid_focal_loss(x, t, reduction="sum")
    assert loss.grad_fn is None
    torch.testing.assert_close(loss, sigmoid_focal_loss(x, t, reduction="sum"), rtol=0, atol=0)


def test_non_contiguous_inputs():
    x, t = make_inputs(rows=9, classes=64)
    xt = x.detach().t().requires_grad_()  # a transposed view: not contiguous
    loss, grad = loss_and_grad(sigmoid_focal_loss, xt, t.t(), 0.25, 2.0, "none")
    ref_loss, ref_grad = loss_and_grad(reference, xt, t.t(), 0.25, 2.0, "none")
    torch.testing.assert_close(loss, ref_loss, **FP32)
    torch.testing.assert_close(grad, ref_grad, **FP32)


def test_large_sum_stays_at_fp32_rounding():
    # A million terms: a naive fp32 accumulation (e.g. MKL's sdot, or torch.linalg.vector_norm(x, 1))
    # drifts far past this tolerance at RetinaNet's 30 M; torch.sum's cascade does not.
    x, t = make_inputs(rows=4096, classes=256)
    loss = sigmoid_focal_loss(x, t, reduction="sum")
    exact = reference(x.detach().double(), t.double(), reduction="sum")
    torch.testing.assert_close(loss.double(), exact, rtol=1e-6, atol=0)


@pytest.mark.parametrize("autocast", [False, True], ids=["bf16-inputs", "bf16-inputs-under-autocast"])
@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_bf16_loss_is_fp32_and_gradient_bf16(autocast, reduction):
    x, t = make_inputs(rows=256, classes=33, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = sigmoid_focal_loss(x, t, reduction=reduction)
    assert loss.dtype == torch.float32
    upstream = torch.linspace(0.5, 1.5, loss.numel()).reshape(loss.shape)
    (grad,) = torch.autograd.grad(loss, x, upstream)
    assert grad.dtype == torch.bfloat16

    x32 = x.detach().float().requires_grad_()  # the same bf16-rounded values, in fp32
    ref_loss = reference(x32, t.float(), reduction=reduction)
    (ref_grad,) = torch.autograd.grad(ref_loss, x32, upstream)
    torch.testing.assert_close(loss, ref_loss, **FP32)
    torch.testing.assert_close(grad.float(), ref_grad, **BF16_GRAD)


def test_fp32_under_autocast_is_unchanged():
    x, t = make_inputs()
    plain = sigmoid_focal_loss(x, t, reduction="sum")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = sigmoid_focal_loss(x, t, reduction="sum")
    assert autocast.dtype == torch.float32
    torch.testing.assert_close(autocast, plain, rtol=0, atol=0)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_empty_input_behaves_like_torchvision(reduction):
    x = torch.zeros(0, 5, requires_grad=True)
    loss, grad = loss_and_grad(sigmoid_focal_loss, x, torch.zeros(0, 5), 0.25, 2.0, reduction)
    ref_loss, ref_grad = loss_and_grad(reference, x, torch.zeros(0, 5), 0.25, 2.0, reduction)
    torch.testing.assert_close(loss, ref_loss, equal_nan=True)  # "mean" of nothing is nan
    assert grad.shape == ref_grad.shape == (0, 5)


def test_invalid_arguments_raise():
    x, t = make_inputs(rows=4, classes=3)
    with pytest.raises(ValueError, match="reduction.*'none', 'mean', 'sum'"):
        sigmoid_focal_loss(x, t, reduction="max")
    with pytest.raises(ValueError, match="alpha"):
        sigmoid_focal_loss(x, t, alpha=1.5)
    with pytest.raises(ValueError, match=r"targets shape \(4, 1\) != inputs shape \(4, 3\)"):
        sigmoid_focal_loss(x, t[:, :1])
    with pytest.raises(RuntimeError, match="needs_grad=False"):
        loss = SigmoidFocalLoss.apply(x, t, 0.25, 2.0, "sum", False)
        loss.backward()


def test_impl_switch():
    assert get_focal_loss("reference") is reference
    assert get_focal_loss("kernel") is sigmoid_focal_loss
    assert set(FOCAL_LOSS_IMPLS) == {"reference", "kernel"}
    with pytest.raises(ValueError, match="unknown focal loss impl 'fast'; valid: reference, kernel"):
        get_focal_loss("fast")
