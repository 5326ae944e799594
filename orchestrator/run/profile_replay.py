"""Run one primitive alone, through torch, on the rank's pinned cores (oneDNN's benchdnn ships in no
package, so torch is the way to reach the same kernels), and measure the cores' memory bandwidth with a
STREAM-style triad. Runs inside the rank process after its profiled steps."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from orchestrator.core import onednn_verbose as ov
from orchestrator.core.roofline import conv_problem, matmul_problem

_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
REPLAY_RUNS = 5
TRIAD_ELEMENTS = 1 << 23       # 32 MiB per float32 array, 96 MiB in all: well past any L3 of one socket


def _median_ms(fn: Callable[[], Any], runs: int = REPLAY_RUNS) -> float:
    for _ in range(2):    # primitive creation and first-touch are not part of a warm step either
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _conv_call(shape: ov.ShapeTotal) -> Callable[[], Any] | None:
    c = conv_problem(shape.problem)
    if c.in_spatial[0] != 1 or c.kernel[0] != 1:
        return None   # 3-D convolutions: not replayed here
    dtype = _DTYPES.get(shape.dtype)
    if dtype is None:
        return None
    fmt = torch.channels_last if shape.layout == "acdb" else torch.contiguous_format
    x = torch.randn(c.mb, c.ic, c.in_spatial[1], c.in_spatial[2], dtype=dtype).to(memory_format=fmt)
    w = torch.randn(c.oc, c.ic // c.groups, c.kernel[1], c.kernel[2], dtype=dtype).to(memory_format=fmt)
    stride, padding = list(c.stride[1:]), list(c.padding[1:])
    dilation = [d + 1 for d in c.dilation[1:]]
    if shape.direction == "forward":
        return lambda: F.conv2d(x, w, None, stride, padding, dilation, c.groups)
    y = F.conv2d(x, w, None, stride, padding, dilation, c.groups)
    if (y.shape[2], y.shape[3]) != (c.out_spatial[1], c.out_spatial[2]):
        return None   # the descriptor's padding convention differs (asymmetric padding): skip, not guess
    grad = torch.randn_like(y)
    mask = [True, False, False] if shape.direction == "backward_data" else [False, True, False]
    if shape.direction not in ("backward_data", "backward_weights"):
        return None
    return lambda: torch.ops.aten.convolution_backward(grad, x, w, None, stride, padding, dilation, False, [0, 0],
                                                       c.groups, mask)


def _matmul_call(shape: ov.ShapeTotal) -> Callable[[], Any] | None:
    mm = matmul_problem(shape.problem)
    dtype = _DTYPES.get(shape.dtype)
    if dtype is None:
        return None
    a = torch.randn(mm.batch, mm.m, mm.k, dtype=dtype).squeeze(0)
    b = torch.randn(mm.batch, mm.k, mm.n, dtype=dtype).squeeze(0)
    return lambda: torch.matmul(a, b)


def replay_shapes(shapes: list[ov.ShapeTotal], budget_s: float = 60.0) -> list[dict[str, Any]]:
    """Isolated time of each distinct convolution and matmul problem (largest logged time first) until
    the budget is spent; the others are listed with `isolated_ms: None` and why."""
    out = []
    deadline = time.monotonic() + budget_s
    for shape in shapes:
        row: dict[str, Any] = {"kind": shape.kind, "direction": shape.direction, "problem": shape.problem,
                               "dtype": shape.dtype, "isolated_ms": None, "note": None}
        if shape.kind not in ("convolution", "matmul"):
            continue
        if time.monotonic() > deadline:
            row["note"] = f"replay budget ({budget_s:g} s) spent"
            out.append(row)
            continue
        try:
            call = _conv_call(shape) if shape.kind == "convolution" else _matmul_call(shape)
        except (ValueError, RuntimeError) as err:
            call, row["note"] = None, f"cannot rebuild: {err}"
        if call is None:
            row["note"] = row["note"] or "not replayed (3-D, unknown data type or padding convention)"
        else:
            row["isolated_ms"] = _median_ms(call)
        out.append(row)
    return out


def stream_triad_gbs(elements: int = TRIAD_ELEMENTS, runs: int = 10) -> float:
    """a = b + s·c over arrays far larger than the caches, on this process's threads; the best run's
    bytes (3 arrays × 4 bytes × elements, STREAM's convention: write-allocate traffic not counted) per
    second, in GB/s."""
    a = torch.empty(elements)
    b = torch.rand(elements)
    c = torch.rand(elements)
    best = float("inf")
    for _ in range(runs + 2):
        t0 = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best = min(best, time.perf_counter() - t0)
    return 3 * 4 * elements / best / 1e9


def conv_peak_gflops(precision: str, seconds: float = 1.0) -> float:
    """Best rate of a large 3×3 convolution (8 × 256 channels, 16×16, channels-last) on these cores. On
    CPUs with bf16 dot-product instructions oneDNN's convolutions can outrun torch.mm, so a GEMM alone
    would understate what the cores can do."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    x = torch.randn(8, 256, 16, 16, dtype=dtype).to(memory_format=torch.channels_last)
    w = torch.randn(256, 256, 3, 3, dtype=dtype).to(memory_format=torch.channels_last)
    flops = 2 * 8 * 256 * 256 * 16 * 16 * 9
    best, runs = float("inf"), 0
    deadline = time.perf_counter() + seconds
    F.conv2d(x, w, padding=1)
    while runs < 3 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        F.conv2d(x, w, padding=1)
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return flops / best / 1e9
