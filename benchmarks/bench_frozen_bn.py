"""The fused frozen batch-norm against torchvision's FrozenBatchNorm2d at ResNeXt50-FPN activation shapes.

    python benchmarks/bench_frozen_bn.py            # batch 2, the stage outputs of an 800x800 image
    python benchmarks/bench_frozen_bn.py --quick    # 200x200 image, 2 repeats
    python benchmarks/bench_frozen_bn.py --threads 2 --dtypes bf16 --layouts channels_last

Each repeat is one forward (input requiring grad) + backward of the input gradient, timed in two laps.
bf16: a bf16 input (as a conv under autocast produces), both modules called under CPU bf16 autocast; the
reference then writes an fp32 output (its fp32 scale promotes), the fused one a bf16 output.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext

import torch
from common import (
    Case,
    add_common_args,
    environment_line,
    format_ms,
    format_table,
    repeats_of,
    set_threads,
    speedup,
    time_interleaved,
)
from torchvision.ops.misc import FrozenBatchNorm2d

from workloads.retinanet.frozen_bn import FusedFrozenBatchNorm2d

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
LAYOUTS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}
# (channels, stride) of the batch-norms at the end of the stem and of ResNeXt50's four stages.
STAGES = [(64, 2), (256, 4), (512, 8), (1024, 16), (2048, 32)]


def make_modules(channels: int) -> dict[str, torch.nn.Module]:
    gen = torch.Generator().manual_seed(channels)
    reference = FrozenBatchNorm2d(channels)
    reference.weight.copy_(torch.rand(channels, generator=gen) + 0.5)
    reference.bias.copy_(torch.randn(channels, generator=gen))
    reference.running_mean.copy_(torch.randn(channels, generator=gen))
    reference.running_var.copy_(torch.rand(channels, generator=gen) + 0.1)
    fused = FusedFrozenBatchNorm2d(channels)
    fused.load_state_dict(reference.state_dict())
    return {"reference": reference, "fused": fused}


def make_case(module: torch.nn.Module, x: torch.Tensor, bf16: bool) -> Case:
    upstream: dict[torch.dtype, torch.Tensor] = {}  # made once, in the output's dtype and layout

    def run(lap):
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
            y = module(x)
        lap("forward")
        if y.dtype not in upstream:
            upstream[y.dtype] = torch.ones_like(y)
        y.backward(upstream[y.dtype])
        lap("backward")

    def setup():
        x.grad = None

    return Case(run=run, setup=setup)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(parser)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=None, help="pixels (default 800, 200 with --quick)")
    parser.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=list(DTYPES))
    parser.add_argument("--layouts", nargs="+", choices=list(LAYOUTS), default=list(LAYOUTS))
    args = parser.parse_args(argv)
    size = args.image_size or (200 if args.quick else 800)
    repeats = repeats_of(args)

    print(environment_line())
    print(f"frozen batch-norm, batch {args.batch}, {size}x{size} image, "
          f"{args.warmup} warm-up + {repeats} interleaved repeats; median ms ±(max-min)/median")
    rows = []
    for threads in args.threads:
        set_threads(threads)
        for dtype_name in args.dtypes:
            for layout in args.layouts:
                for channels, stride in STAGES:
                    shape = (args.batch, channels, size // stride, size // stride)
                    x = torch.randn(shape).to(DTYPES[dtype_name], memory_format=LAYOUTS[layout]).requires_grad_()
                    modules = make_modules(channels)
                    cases = {name: make_case(m, x, dtype_name == "bf16") for name, m in modules.items()}
                    timings = time_interleaved(cases, warmup=args.warmup, repeats=repeats)
                    ref, fused = timings["reference"], timings["fused"]
                    row = [f"{threads}", dtype_name, layout, "x".join(map(str, shape[1:]))]
                    for phase in ("forward", "total"):
                        row += [format_ms(ref[phase]), format_ms(fused[phase]),
                                f"{speedup(ref[phase], fused[phase]):.2f}x"]
                    rows.append(row)
                    print(f"  threads {threads}, {dtype_name}, {layout}, {row[3]}: fwd+bwd {row[-3]} -> "
                          f"{row[-2]} ({row[-1]})", flush=True)
                    del x, cases, timings
    print()
    print(format_table(["threads", "dtype", "layout", "CxHxW",
                        "fwd ref", "fwd fused", "fwd x", "fwd+bwd ref", "fwd+bwd fused", "fwd+bwd x"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
