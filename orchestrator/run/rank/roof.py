"""The compute roof of a rank's cores: the best rate of several primitives a training step is made of, run on
the rank's own threads. One square GEMM is not a roof: on an AMD Zen 4, fp32, oneDNN's convolutions ran ~20%
above torch.mm of 2048² (109.7 against 91.9 GFLOP/s on one core, fastest calls), and the small RetinaNet's step
reached 94.5 GFLOP/s (as torch's FLOP counter counts it) against a 90.3 GFLOP/s GEMM. So the roof
takes, in the run's precision:

- GEMMs of several square sizes (a small one stays in cache and can outrun a large one; the caller adds the
  2048² GEMM of the GEMM peak, run.rank.protocol.gemm_peak);
- forward convolutions of the shapes a ResNet-style trunk runs (3×3 at 64, 128 and 256 channels, a 1×1), in
  both memory formats (channels-last and contiguous pick different oneDNN kernels), and the backward pass of
  the largest one in each format.

Each primitive runs for a short window after two warm-up calls; its rate is from its median call (what `gflops`
of the sweep's peak uses) and its fastest. Convolution FLOPs are benchdnn's (taps in the padding are not work:
core/profile/roofline.conv_flops), the count the profile's roofline uses. The batch of each convolution is
sized from the rate of one small GEMM so a call takes about CONV_CALL_S: a CPU that emulates bf16 stays quick.

With `barrier` (all ranks of a layout at once, as the GEMM peak), every primitive's window starts with one, so
the ranks run the same primitive together and share caches, bandwidth and power as in training.

Cost: 3 GEMM and 10 convolution windows, each WINDOW_S plus two warm-up calls (ROOF_S in core/eta).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from orchestrator.core.json.values import JsonDict
from orchestrator.core.profile.roofline import conv_flops, conv_problem

ROOF_GEMM_SIZES = (256, 512, 1024)
WINDOW_S = 0.2          # timed per primitive (at least MIN_CALLS calls)
MIN_CALLS = 3
CONV_CALL_S = 0.03      # the time one convolution call is sized to
CONV_MAX_BATCH = 8


@dataclass(frozen=True, slots=True)
class ConvShape:
    """A square 2-D convolution, stride 1, 'same' padding: channels in = out."""

    channels: int
    size: int        # input height = width
    kernel: int
    backward: bool = False    # also time its backward (data and weights together)

    def descriptor(self, batch: int) -> str:
        """oneDNN's problem descriptor, as the verbose log writes it."""
        c, s, k, p = self.channels, self.size, self.kernel, self.kernel // 2
        return f"mb{batch}_ic{c}oc{c}_ih{s}oh{s}kh{k}sh1dh0ph{p}_iw{s}ow{s}kw{k}sw1dw0pw{p}"

    def name(self) -> str:
        return f"{self.kernel}x{self.kernel} conv {self.channels}ch {self.size}x{self.size}"


ROOF_CONVS = (ConvShape(64, 32, 3), ConvShape(128, 16, 3), ConvShape(256, 16, 3, backward=True),
              ConvShape(256, 16, 1))
FORMATS = {"channels-last": torch.channels_last, "contiguous": torch.contiguous_format}


def _timed(call: Callable[[], object], flop: float, seconds: float, barrier: Callable[[], None] | None,
           on_call: Callable[[], None] | None) -> tuple[float, float]:
    """(GFLOP/s of the median call, of the fastest) over a window of `seconds` after two warm-up calls."""
    for _ in range(2):
        call()
        if on_call:
            on_call()
    if barrier:
        barrier()
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < MIN_CALLS or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
        if on_call:
            on_call()
    return flop / statistics.median(times) / 1e9, flop / min(times) / 1e9


def _gemm(size: int, dtype: torch.dtype) -> tuple[Callable[[], object], float]:
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    return (lambda: torch.mm(a, b)), 2.0 * size**3


def conv_batch(shape: ConvShape, gflops: float, call_s: float = CONV_CALL_S) -> int:
    """The batch whose forward call takes about `call_s` at `gflops`, between 1 and CONV_MAX_BATCH.

    >>> conv_batch(ConvShape(256, 16, 3), gflops=100.0), conv_batch(ConvShape(256, 16, 3), gflops=3.0)
    (8, 1)
    """
    per_image = conv_flops(conv_problem(shape.descriptor(1)))
    return max(1, min(CONV_MAX_BATCH, int(gflops * 1e9 * call_s / per_image)))


def _convs(shape: ConvShape, fmt: torch.memory_format, dtype: torch.dtype,
           batch: int) -> list[tuple[str, Callable[[], object], float]]:
    """(direction, call, FLOPs) of the shape's forward, and backward where it asks for it."""
    c, s, k, p = shape.channels, shape.size, shape.kernel, shape.kernel // 2
    x = torch.randn(batch, c, s, s, dtype=dtype).to(memory_format=fmt)
    w = torch.randn(c, c, k, k, dtype=dtype).to(memory_format=fmt)
    flop = float(conv_flops(conv_problem(shape.descriptor(batch))))
    out: list[tuple[str, Callable[[], object], float]] = [("forward", lambda: F.conv2d(x, w, padding=p), flop)]
    if shape.backward:
        grad = torch.randn_like(F.conv2d(x, w, padding=p))
        out.append(("backward", lambda: torch.ops.aten.convolution_backward(
            grad, x, w, None, [1, 1], [p, p], [1, 1], False, [0, 0], 1, [True, True, False]), 2 * flop))
    return out


def compute_roof(precision: str, max_gemm: int = ROOF_GEMM_SIZES[-1], seconds: float = WINDOW_S,
                 barrier: Callable[[], None] | None = None,
                 on_call: Callable[[], None] | None = None) -> dict[str, dict[str, float]]:
    """{primitive: {"gflops": median call's rate, "best_gflops": fastest call's}} on this process's threads.
    GEMMs up to `max_gemm` (the peak's calibrated size: a CPU that emulates bf16 keeps its matmuls short). Every
    rank passes the same barriers whatever it runs: its sizes are its own, its barrier count is not."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    rates: dict[str, dict[str, float]] = {}

    def run(name: str, call: Callable[[], object], flop: float) -> None:
        median, best = _timed(call, flop, seconds, barrier, on_call)
        rates[name] = {"gflops": median, "best_gflops": best}

    for size in ROOF_GEMM_SIZES:
        if size <= max_gemm:
            run(f"gemm {size}", *_gemm(size, dtype))
        elif barrier:
            barrier()
    small = rates.get(f"gemm {ROOF_GEMM_SIZES[0]}", {}).get("best_gflops") or 1.0
    for shape in ROOF_CONVS:
        batch = conv_batch(shape, small)
        for fmt_name, fmt in FORMATS.items():
            for direction, call, flop in _convs(shape, fmt, dtype, batch):
                run(f"{shape.name()} {fmt_name} {direction}", call, flop)
    return rates


def compute_peak(threads: int, precision: str, seconds: float = 1.5,
                 barrier: Callable[[], None] | None = None) -> JsonDict:
    """The compute roof as `orch profile` (and roof_probe) holds a primitive against it: the GEMM peak's median
    2048² matmul and every primitive of `compute_roof` by its fastest call (a roof must not be beaten by any
    call's mean), the best of them; the GEMM's own spread (best ÷ median) is the roof's noise
    (profile.checks)."""
    from orchestrator.run.rank.protocol import gemm_peak

    peak = gemm_peak(threads, precision, seconds=seconds, barrier=barrier)
    rates = compute_roof(precision, peak["gemm_size"], barrier=barrier)
    by_primitive = {name: r["best_gflops"] for name, r in rates.items()}
    convs = [g for name, g in by_primitive.items() if "conv" in name]
    peak["gemm_gflops"] = peak["gflops"]
    peak["conv_gflops"] = max(convs) if convs else None
    peak["gflops"] = max([peak["gemm_gflops"], *by_primitive.values()])   # the roof: the best any reached
    peak["roof_by_primitive"] = by_primitive
    return peak
