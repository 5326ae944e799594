"""The sigmoid focal loss as one explicit-autograd kernel, and the switch between it and torchvision's.

At RetinaNet's shapes (about 120,000 anchors x 264 classes per image) the loss works on tensors of ~32 M
elements, so its cost is memory traffic: how many full passes it makes and how many full-size tensors it
allocates (each fresh allocation of that size is mmap'ed and page-faulted anew). torchvision's
`sigmoid_focal_loss` composes about 15 elementwise ops forward and lets autograd differentiate each of
them; this kernel uses that the targets are binary.

With t in {0, 1}, s = 1 - 2t (+1 for negatives, -1 for positives), z = s*x and q = sigmoid(z) = 1 - p_t:

    ce = softplus(z)                                  (binary cross-entropy with logits)
    loss = a_t * q**gamma * softplus(z)               a_t = alpha if t else 1 - alpha (1 for alpha < 0)
    d loss / d x = s * a_t * q**gamma * (gamma * (1 - q) * softplus(z) + q)

(dq/dz = q(1 - q), d softplus(z)/dz = q, dz/dx = s.) Both a_t and s*a_t are affine in t, so one in-place
`addcmul_` folds either into a tensor; and as a_t * q**gamma * softplus(z) >= 0, the loss is the absolute
value of the gradient's s*a_t-weighted product, so one fold serves both. Training calls backward exactly
once, so the forward computes the gradient right away (while q and softplus(z) are at hand) and saves
only it; backward scales it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torchvision
from torch.autograd.function import once_differentiable

REDUCTIONS = ("none", "mean", "sum")


def _mul_affine_(y: torch.Tensor, t: torch.Tensor, p: float, r: float) -> float:
    """y *= (p + r*t) in one pass, up to the scalar factor it returns (the caller applies that one later,
    where it costs nothing: in a reduction or in backward's scaling).

    Example: a_t = (1 - alpha) + (2*alpha - 1)*t, so `f = _mul_affine_(y, t, 1 - alpha, 2*alpha - 1)`
    leaves y * a_t / f in y.
    """
    if r == 0:
        return p
    if p == 0:
        y.mul_(t)
        return r
    y.addcmul_(y, t, value=r / p)
    return p


def _alpha_terms(alpha: float) -> tuple[float, float, float, float]:
    """(p, r) of a_t = p + r*t and of s*a_t = p + r*t, as (a_p, a_r, sa_p, sa_r)."""
    if alpha < 0:  # no weighting, as torchvision does for alpha = -1
        return 1.0, 0.0, 1.0, -2.0
    return 1.0 - alpha, 2.0 * alpha - 1.0, 1.0 - alpha, -1.0


class SigmoidFocalLoss(torch.autograd.Function):
    """apply(inputs, targets, alpha, gamma, reduction, needs_grad) -> loss in float32 (float64 for float64).

    `needs_grad` is decided by the caller: inside forward, grad mode is always off and
    `ctx.needs_input_grad` is true even under `torch.no_grad()`, so neither says whether backward will run.
    Targets must be binary; bf16/fp16 inputs are computed in float32 (their values are exact there).
    """

    @staticmethod
    def forward(ctx, inputs: torch.Tensor, targets: torch.Tensor, alpha: float, gamma: float, reduction: str,
                needs_grad: bool) -> torch.Tensor:
        with torch.autocast("cpu", enabled=False):
            loss, grad, grad_factor = _forward(inputs, targets, alpha, gamma, reduction, needs_grad)
        ctx.input_dtype, ctx.grad_factor = inputs.dtype, grad_factor
        ctx.save_for_backward(grad)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: torch.Tensor):
        (grad,) = ctx.saved_tensors
        if grad is None:
            raise RuntimeError("SigmoidFocalLoss.backward: the forward ran with needs_grad=False")
        with torch.autocast("cpu", enabled=False):
            # One pass in the saved gradient's precision, written straight in the input's dtype (bf16 stays
            # bf16). The saved gradient is only read: retain_graph and gradcheck call backward again.
            grad_input = torch.empty_like(grad, dtype=ctx.input_dtype)
            grad_loss = grad_loss.to(grad.dtype)
            if grad_loss.dim() == 0:  # "sum" / "mean"
                torch.mul(grad, grad_loss * ctx.grad_factor, out=grad_input)
            else:  # "none": the zero is broadcast, so this is grad * grad_loss * factor in one pass
                torch.addcmul(grad.new_zeros(()), grad, grad_loss, value=ctx.grad_factor, out=grad_input)
        return grad_input, None, None, None, None, None


def _forward(x: torch.Tensor, t: torch.Tensor, alpha: float, gamma: float, reduction: str,
             needs_grad: bool) -> tuple[torch.Tensor, torch.Tensor | None, float]:
    """(loss, gradient / factor or None, factor): the gradient of the loss w.r.t. x is the returned tensor
    times the scalar factor, which backward applies in the pass it makes anyway.

    For "sum" with a gradient (fp32): ten full-size ops (addcmul, sigmoid, softplus, pow, lerp, addcmul_,
    mul_, abs_, sum, mul_) and three allocations, of which only the gradient lives on. Few ops matters
    beyond the passes they make: each op is a fork/join of the thread pool, which can cost milliseconds
    when another process holds a core (an earlier version's chunked dot product, ~500 small ops, took 3 s
    at 2 threads on a busy machine: 4x this whole kernel).
    """
    dtype = torch.promote_types(x.dtype, torch.float32)
    a_p, a_r, sa_p, sa_r = _alpha_terms(alpha)

    # z = x - 2*x*t = s*x (exact: it is +-x) in a contiguous float32 buffer. bf16 inputs are converted
    # first: ops that mix dtypes convert inside through a hidden full-size temporary (t is used twice).
    t = t.to(dtype)
    if x.dtype == dtype:
        sp = torch.empty(x.shape, dtype=dtype, device=x.device)
        torch.addcmul(x, x, t, value=-2.0, out=sp)
    else:
        sp = x.to(dtype, memory_format=torch.contiguous_format)
        sp.addcmul_(sp, t, value=-2.0)
    q = torch.sigmoid(sp)
    torch.ops.aten.softplus.out(sp, 1.0, 20.0, out=sp)  # in place: softplus(z); exact to fp32 past z > 20
    w = torch.pow(q, gamma)  # the modulating factor q**gamma (gamma == 2 is one multiply)

    grad_factor = 1.0
    if needs_grad and gamma != 0:
        # gamma*(1-q)*softplus(z) + q = gamma * lerp(softplus(z), 1/gamma, q), written over q (last use).
        torch.lerp(sp, torch.tensor(1.0 / gamma, dtype=dtype), q, out=q)
        grad_factor = gamma
    # Fold the weight into w: s*a_t for the gradient (the loss then takes |.|, as a_t * l >= 0 and s = +-1),
    # a_t alone without one. `fold` is the scalar left out.
    fold = _mul_affine_(w, t, sa_p, sa_r) if needs_grad else _mul_affine_(w, t, a_p, a_r)
    loss = sp.mul_(w)  # (s *) a_t * q**gamma * softplus(z) / fold
    if needs_grad:
        loss.abs_()
    if reduction == "none":
        if abs(fold) != 1.0:
            loss.mul_(abs(fold))
    else:
        loss = loss.sum() * abs(fold)
        if reduction == "mean":
            loss = loss / x.numel()
    if not needs_grad:
        return loss, None, 1.0
    grad = w.mul_(q)  # s * a_t * q**gamma * (gamma*(1-q)*softplus(z) + q) / (fold * grad_factor)
    grad_factor *= fold
    if reduction == "mean":
        grad_factor /= max(x.numel(), 1)  # empty input: the mean is nan (as torch's), the gradient empty
    return loss, grad, grad_factor


def sigmoid_focal_loss(inputs: torch.Tensor, targets: torch.Tensor, alpha: float = 0.25, gamma: float = 2.0,
                       reduction: str = "none") -> torch.Tensor:
    """Drop-in for `torchvision.ops.sigmoid_focal_loss` with binary targets (one-hot, as RetinaNet's).
    Targets must be exactly 0 or 1: that is not checked (a check would cost another pass), and soft
    targets give wrong results.

    Same arguments and results (reductions "none", "mean", "sum"; alpha in [0, 1] or -1 for no weighting),
    but the loss comes back in float32 for bf16/fp16 inputs (computed and reduced in float32, also under
    autocast) while the gradient reaches the inputs in their own dtype.

    >>> x = torch.tensor([[-2.0, 3.0]], requires_grad=True)
    >>> loss = sigmoid_focal_loss(x, torch.tensor([[0.0, 1.0]]), reduction="sum")
    >>> loss.backward()  # x.grad matches torchvision's to fp32 rounding
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"Invalid Value for arg 'reduction': '{reduction}'; supported reduction modes: "
                         f"{', '.join(repr(r) for r in REDUCTIONS)}")
    if not (0 <= alpha <= 1) and alpha != -1:
        raise ValueError(f"Invalid alpha value: {alpha}. alpha must be in the range [0,1] or -1 for ignore.")
    if gamma < 0:
        raise ValueError(f"Invalid gamma value: {gamma}; gamma must be >= 0")
    if inputs.shape != targets.shape:
        raise ValueError(f"targets shape {tuple(targets.shape)} != inputs shape {tuple(inputs.shape)}")
    needs_grad = torch.is_grad_enabled() and inputs.requires_grad
    return SigmoidFocalLoss.apply(inputs, targets, float(alpha), float(gamma), reduction, needs_grad)


FOCAL_LOSS_IMPLS: dict[str, Callable[..., torch.Tensor]] = {
    "reference": torchvision.ops.sigmoid_focal_loss,
    "kernel": sigmoid_focal_loss,
}


def get_focal_loss(impl: str) -> Callable[..., torch.Tensor]:
    """The focal loss called `impl` ("reference": torchvision's, "kernel": this module's)."""
    if impl not in FOCAL_LOSS_IMPLS:
        raise ValueError(f"unknown focal loss impl {impl!r}; valid: {', '.join(FOCAL_LOSS_IMPLS)}")
    return FOCAL_LOSS_IMPLS[impl]
