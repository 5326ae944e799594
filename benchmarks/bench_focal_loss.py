"""The focal-loss kernel against torchvision.ops.sigmoid_focal_loss at RetinaNet shapes.

    python benchmarks/bench_focal_loss.py            # batch 2 x 120,000 anchors x {264, 80} classes
    python benchmarks/bench_focal_loss.py --quick    # 12,000 anchors, 2 repeats
    python benchmarks/bench_focal_loss.py --threads 2 --classes 264 --dtypes fp32

Reduction "sum" (what RetinaNet uses), logits requiring grad, one-hot targets with ~1% positive anchors.
Each repeat is one forward + backward, timed in two laps, so the three columns come from the same runs.
The kernel computes the gradient inside its forward (training always runs backward once), so compare the
forward + backward column; its forward alone is slower than its backward by design.
bf16: bf16 logits and targets, both implementations called under CPU bf16 autocast.
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

from workloads.retinanet.focal_loss import FOCAL_LOSS_IMPLS

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
POSITIVE_ANCHOR_FRACTION = 0.01


def make_inputs(batch: int, anchors: int, classes: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    # The head's initial bias makes logits start near -log((1 - 0.01) / 0.01) = -4.6.
    logits = (torch.randn(batch, anchors, classes, generator=gen) * 2 - 4.6).to(dtype).requires_grad_()
    targets = torch.zeros(batch, anchors, classes, dtype=dtype)
    positive = torch.rand(batch, anchors, generator=gen) < POSITIVE_ANCHOR_FRACTION
    labels = torch.randint(0, classes, (batch, anchors), generator=gen)
    targets[positive, labels[positive]] = 1.0
    return logits, targets


def make_case(impl: str, logits: torch.Tensor, targets: torch.Tensor, bf16: bool) -> Case:
    loss_fn = FOCAL_LOSS_IMPLS[impl]

    def run(lap):
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
            loss = loss_fn(logits, targets, alpha=0.25, gamma=2.0, reduction="sum")
        lap("forward")
        loss.backward()
        lap("backward")

    def setup():
        logits.grad = None

    return Case(run=run, setup=setup)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(parser)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--anchors", type=int, default=None, help="per image (default 120000, 12000 with --quick)")
    parser.add_argument("--classes", type=int, nargs="+", default=[264, 80])
    parser.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=list(DTYPES))
    args = parser.parse_args(argv)
    anchors = args.anchors or (12_000 if args.quick else 120_000)
    repeats = repeats_of(args)

    print(environment_line())
    print(f"sigmoid_focal_loss, reduction='sum', batch {args.batch} x {anchors} anchors, "
          f"{args.warmup} warm-up + {repeats} interleaved repeats; median ms ±(max-min)/median")
    rows = []
    for threads in args.threads:
        set_threads(threads)
        for classes in args.classes:
            for dtype_name in args.dtypes:
                logits, targets = make_inputs(args.batch, anchors, classes, DTYPES[dtype_name])
                bf16 = dtype_name == "bf16"
                timings = time_interleaved({impl: make_case(impl, logits, targets, bf16) for impl in FOCAL_LOSS_IMPLS},
                                           warmup=args.warmup, repeats=repeats)
                ref, ker = timings["reference"], timings["kernel"]
                row = [f"{threads}", f"{classes}", dtype_name]
                for phase in ("forward", "backward", "total"):
                    row += [format_ms(ref[phase]), format_ms(ker[phase]), f"{speedup(ref[phase], ker[phase]):.2f}x"]
                rows.append(row)
                print(f"  threads {threads}, {classes} classes, {dtype_name}: fwd+bwd {row[-3]} -> {row[-2]} "
                      f"({row[-1]})", flush=True)
                del logits, targets, timings
    print()
    print(format_table(HEADERS, rows))
    return 0


HEADERS = ["threads", "classes", "dtype",
           "fwd ref", "fwd kernel", "fwd x",
           "bwd ref", "bwd kernel", "bwd x",
           "fwd+bwd ref", "fwd+bwd kernel", "fwd+bwd x"]

if __name__ == "__main__":
    sys.exit(main())
