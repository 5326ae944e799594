"""How orch counts the FLOPs of a training step, and how a record says which count it holds.

orch counts a step with torch's FLOP counter (`FlopCounterMode`, `orchestrator.run.rank.flops`), its convolution
formulas replaced by the one `orch profile` and the compute roof use (`core.profile.roofline`, benchdnn's
`count_ops`): only the kernel taps that land inside the input are work. torch's own formula counts every tap,
2 · N · OC · OH · OW · (IC / G) · KH · KW, the ones in the zero padding too, which overstates a network with
small feature maps (a 3×3 kernel on a 1×1 map does 1 tap of 9). Its backward counts the input gradient with the
same every-tap rule and the weight gradient with every input channel, not those of one group (G× too many for a
grouped convolution). Here each of the two gradients costs what its forward costs, as benchdnn counts
backward-data and backward-weights: a backward that computes both is twice its forward, one that computes only
the weight gradient (the first layer: its input needs none) once. Matmuls and attention stay as torch counts
them (2 · M · N · K; a linear layer's backward two more matmuls).

    >>> conv_forward_flops([1, 1, 1, 1], [1, 1, 3, 3], [1, 1, 1, 1], stride=[1], padding=[1], dilation=[1],
    ...                    groups=1)     # a 3×3 pad-1 kernel on a 1×1 map: 1 tap of 9 inside the input
    2
    >>> conv_backward_flops([1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 3, 3], stride=[1], padding=[1], dilation=[1],
    ...                     groups=1, output_mask=[False, True, True])   # the weight gradient only (bias: free)
    2

What a record's throughput section holds in `train_flops_rule` (and a probe in `flops_rule`): `VALID_TAPS`
when orch's counter counted it, `STATED` when the figure is the script's or the sweep file's (orch counted
nothing); absent in records older than the field, which torch's own formula counted (`rule_of`).

Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.core.profile.roofline import Conv, conv_flops

VALID_TAPS = "valid-taps"   # orch's counter: torch's, convolutions counted over the taps inside the input
STATED = "stated"           # a figure given to orch (the script's orch.script.flops, the sweep file's)
TORCH_DEFAULT = "torch"     # a record older than the field: torch's formula, every convolution tap counted
FLOPS_RULE = VALID_TAPS     # what this orch's counter does

def rule_of(recorded: str | None, stated: bool = False) -> str:
    """The rule a record's FLOPs were counted by: its `train_flops_rule`, else (an older record) `STATED` when
    the figure came from a script or the sweep file, else torch's own formula.

    >>> rule_of("valid-taps"), rule_of(None), rule_of(None, stated=True)
    ('valid-taps', 'torch', 'stated')
    """
    if recorded:
        return recorded
    return STATED if stated else TORCH_DEFAULT


def _per_dim(values: Sequence[int], dims: int, name: str) -> tuple[int, ...]:
    """`values` for each of `dims` spatial dimensions: one value stands for all (aten expands it so)."""
    if len(values) == 1:
        return tuple(values) * dims
    if len(values) != dims:
        raise ValueError(f"{name} {list(values)} has {len(values)} values for {dims} spatial dimension(s)")
    return tuple(values)


def _three(values: tuple[int, ...], fill: int) -> tuple[int, int, int]:
    """(depth, height, width) from 1 to 3 spatial values, the missing leading ones `fill`."""
    d, h, w = (fill,) * (3 - len(values)) + values
    return d, h, w


def torch_conv(input_shape: Sequence[int], weight_shape: Sequence[int], output_shape: Sequence[int], *,
               stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], groups: int,
               transposed: bool = False) -> Conv:
    """The benchdnn problem of a convolution as aten states it: NC[D]HW shapes, the weight OC × IC/G × kernel
    (a transposed convolution's IC × OC/G × kernel), torch's dilation (1 = dense; oneDNN's 0). For a transposed
    one the problem is oneDNN's deconvolution of the same input and output (`conv_flops(..., deconvolution=True)`).
    Raises ValueError for shapes that are not those of a 1-, 2- or 3-d convolution."""
    dims = len(input_shape) - 2
    if not 1 <= dims <= 3 or len(weight_shape) != dims + 2 or len(output_shape) != dims + 2 or groups < 1:
        raise ValueError(f"not a convolution: input {list(input_shape)}, weight {list(weight_shape)}, output "
                         f"{list(output_shape)}, groups {groups}")
    out_channels = weight_shape[1] * groups if transposed else weight_shape[0]
    return Conv(mb=int(input_shape[0]), groups=int(groups), ic=int(input_shape[1]), oc=int(out_channels),
                in_spatial=_three(tuple(int(v) for v in input_shape[2:]), 1),
                out_spatial=_three(tuple(int(v) for v in output_shape[2:]), 1),
                kernel=_three(tuple(int(v) for v in weight_shape[2:]), 1),
                stride=_three(_per_dim(stride, dims, "stride"), 1),
                padding=_three(_per_dim(padding, dims, "padding"), 0),
                dilation=_three(tuple(d - 1 for d in _per_dim(dilation, dims, "dilation")), 0))


def conv_forward_flops(input_shape: Sequence[int], weight_shape: Sequence[int], output_shape: Sequence[int], *,
                       stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], groups: int,
                       transposed: bool = False) -> int:
    """A convolution's forward FLOPs over the taps inside the input (`torch_conv`'s arguments)."""
    problem = torch_conv(input_shape, weight_shape, output_shape, stride=stride, padding=padding,
                         dilation=dilation, groups=groups, transposed=transposed)
    return conv_flops(problem, deconvolution=transposed)


def conv_backward_flops(grad_output_shape: Sequence[int], input_shape: Sequence[int], weight_shape: Sequence[int],
                        *, stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], groups: int,
                        output_mask: Sequence[bool], transposed: bool = False) -> int:
    """aten.convolution_backward's FLOPs: the forward's for each of the input and weight gradients it computes
    (`output_mask`: input, weight, bias; the bias gradient is a sum, no multiply-add, counted 0 as torch does)."""
    gradients = int(bool(output_mask[0])) + int(bool(output_mask[1]))
    if not gradients:
        return 0
    return gradients * conv_forward_flops(input_shape, weight_shape, grad_output_shape, stride=stride,
                                          padding=padding, dilation=dilation, groups=groups, transposed=transposed)
