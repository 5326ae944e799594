"""orch's FLOP counter: torch's `FlopCounterMode` with its convolution formulas replaced by orch's
(`orchestrator.core.flop_count`: only the taps inside the input, as benchdnn, `orch profile` and the compute
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

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from orchestrator.core.flop_count import conv_backward_flops, conv_forward_flops

aten = torch.ops.aten

# Each formula gets aten's arguments with tensors replaced by their shapes (torch's shape_wrapper), and the
# output's shape as `out_shape`.


def _convolution(x: Any, w: Any, _bias: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
                 _output_padding: Any, groups: int, *_: Any, out_shape: Any = None, **__: Any) -> int:
    """aten.convolution, aten._convolution, aten.convolution_overrideable."""
    return conv_forward_flops(x, w, out_shape, stride=stride, padding=padding, dilation=dilation, groups=groups,
                              transposed=transposed)


def _mkldnn_or_cudnn(x: Any, w: Any, padding: Any, stride: Any, dilation: Any, groups: int,
                     out_shape: Any) -> int:
    return conv_forward_flops(x, w, out_shape, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _mkldnn_convolution(x: Any, w: Any, _bias: Any, padding: Any, stride: Any, dilation: Any, groups: int,
                        *_: Any, out_shape: Any = None, **__: Any) -> int:
    return _mkldnn_or_cudnn(x, w, padding, stride, dilation, groups, out_shape)


def _cudnn_convolution(x: Any, w: Any, padding: Any, stride: Any, dilation: Any, groups: int, *_: Any,
                       out_shape: Any = None, **__: Any) -> int:
    return _mkldnn_or_cudnn(x, w, padding, stride, dilation, groups, out_shape)


def _slow_conv2d_forward(x: Any, w: Any, _kernel_size: Any, _bias: Any, stride: Any, padding: Any, *_: Any,
                         out_shape: Any = None, **__: Any) -> int:
    return conv_forward_flops(x, w, out_shape, stride=stride, padding=padding, dilation=[1], groups=1)


def _convolution_backward(grad_out: Any, x: Any, w: Any, _bias_sizes: Any, stride: Any, padding: Any,
                          dilation: Any, transposed: bool, _output_padding: Any, groups: int, output_mask: Any,
                          *_: Any, out_shape: Any = None, **__: Any) -> int:
    return conv_backward_flops(grad_out, x, w, stride=stride, padding=padding, dilation=dilation, groups=groups,
                               output_mask=output_mask, transposed=transposed)


CONVOLUTION_FORMULAS: dict[Any, Callable[..., int]] = {
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


def count_flops(run: Callable[[], Any]) -> tuple[float | None, str | None]:
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
