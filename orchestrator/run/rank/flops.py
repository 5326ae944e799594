"""orch's FLOP counter: torch's `FlopCounterMode` with its convolution formulas replaced by orch's
(`orchestrator.core.profile.flop_count`: only the taps inside the input, as benchdnn, `orch profile` and the compute
roof count them). Every FLOP figure orch counts goes through here: a throughput trial's (run.rank.protocol), the
probe's (run.rank.probe), and a workload's own count where it asks for one (the RetinaNet's formula).

The counter sees the ops below autograd: on CPU a convolution reaches it as `aten.convolution` (conv1d/2d/3d,
transposed, under autocast, channels-last alike) and its backward as `aten.convolution_backward`; a direct
`torch.mkldnn_convolution` (an `nn.Module` converted by `torch.utils.mkldnn`) as `aten.mkldnn_convolution`, which
torch's own table leaves out (counted 0). The other entries torch's table has for convolutions (`_convolution`,
`convolution_overrideable`, `cudnn_convolution`, `_slow_conv2d_forward`) are replaced too, each by its own
signature, so that no convolution is counted by two rules in one step. Matmuls and attention keep torch's
formulas. IPEX's own convolution ops (`torch_ipex::*`) are not in either table: a step through them counts 0
for its convolutions. `padding="same"` with an even kernel pads the input with zeros itself before the
convolution (aten does, one side only): those zeros are input to the convolution, and count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode

from orchestrator.core.profile.flop_count import conv_backward_flops, conv_forward_flops

aten = torch.ops.aten

# Each formula gets aten's arguments with tensors replaced by their shapes (torch's shape_wrapper), and the
# output's shape as `out_shape` (torch always passes it). The arguments a formula does not read (a bias, an
# output padding, aten's trailing ones) are `object`: whatever aten gives, passed over.
Shape = Sequence[int]   # a tensor's shape (a torch.Size), or a stride/padding/dilation list


def _convolution(x: Shape, w: Shape, _bias: object, stride: Shape, padding: Shape, dilation: Shape,
                 transposed: bool, _output_padding: object, groups: int, *_: object, out_shape: Shape,
                 **__: object) -> int:
    """aten.convolution, aten._convolution, aten.convolution_overrideable."""
    return conv_forward_flops(x, w, out_shape, stride=stride, padding=padding, dilation=dilation, groups=groups,
                              transposed=transposed)


def _mkldnn_or_cudnn(x: Shape, w: Shape, padding: Shape, stride: Shape, dilation: Shape, groups: int,
                     out_shape: Shape) -> int:
    return conv_forward_flops(x, w, out_shape, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _mkldnn_convolution(x: Shape, w: Shape, _bias: object, padding: Shape, stride: Shape, dilation: Shape,
                        groups: int, *_: object, out_shape: Shape, **__: object) -> int:
    return _mkldnn_or_cudnn(x, w, padding, stride, dilation, groups, out_shape)


def _cudnn_convolution(x: Shape, w: Shape, padding: Shape, stride: Shape, dilation: Shape, groups: int,
                       *_: object, out_shape: Shape, **__: object) -> int:
    return _mkldnn_or_cudnn(x, w, padding, stride, dilation, groups, out_shape)


def _slow_conv2d_forward(x: Shape, w: Shape, _kernel_size: object, _bias: object, stride: Shape, padding: Shape,
                         *_: object, out_shape: Shape, **__: object) -> int:
    return conv_forward_flops(x, w, out_shape, stride=stride, padding=padding, dilation=[1], groups=1)


def _convolution_backward(grad_out: Shape, x: Shape, w: Shape, _bias_sizes: object, stride: Shape,
                          padding: Shape, dilation: Shape, transposed: bool, _output_padding: object, groups: int,
                          output_mask: Sequence[bool], *_: object, out_shape: object = None,
                          **__: object) -> int:
    return conv_backward_flops(grad_out, x, w, stride=stride, padding=padding, dilation=dilation, groups=groups,
                               output_mask=output_mask, transposed=transposed)


CONVOLUTION_FORMULAS: dict[torch._ops.OpOverloadPacket, Callable[..., int]] = {
    aten.convolution: _convolution,
    aten._convolution: _convolution,
    aten.convolution_overrideable: _convolution,
    aten.mkldnn_convolution: _mkldnn_convolution,
    aten.cudnn_convolution: _cudnn_convolution,
    aten._slow_conv2d_forward: _slow_conv2d_forward,
    aten.convolution_backward: _convolution_backward,
}


def flop_counter() -> FlopCounterMode:
    """A FlopCounterMode that counts as orch counts (`with counter: ...`, then `counter.get_total_flops()`)."""
    return FlopCounterMode(display=False, custom_mapping=CONVOLUTION_FORMULAS)


def count_flops(run: Callable[[], object]) -> tuple[float | None, str | None]:
    """The FLOPs of `run()` by orch's counter, or (None, why) when the counter cannot follow it (an op the meta
    device cannot shape, a custom op that fails under a dispatch mode): counting is best effort, and a trial
    whose step cannot be counted is still measured."""
    try:
        counter = flop_counter()
        with counter:
            run()
        return float(counter.get_total_flops()), None
    except Exception as err:
        return None, f"{type(err).__name__}: {err}"
