"""Whole training step (forward, backward, optimizer step) of the RetinaNet with each CPU switch on vs off.

Every variant is a trainer built from the same seed and stepped on the same two pre-made batches. The
variants run interleaved (common.time_interleaved: each repeat runs every variant once, in a rotated
order), so that a noisy neighbour on a shared machine slows all of them alike. The baseline has every
switch off; each row turns one switch on; "all on" is the workload's defaults plus bf16 and channels_last,
and the "all on but" rows turn one switch off again (switches interact: under bf16, say).

    python benchmarks/bench_retinanet_step.py --quick            # small config, 2 repeats
    python benchmarks/bench_retinanet_step.py --config medium    # ResNeXt50 at 320 px, 264 classes
    python benchmarks/bench_retinanet_step.py --compile          # adds torch.compile (slow to compile)
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from common import Case, environment_line, format_ms, format_table, set_threads, speedup, time_interleaved

from orch.workload import RankContext
from orchestrator.io.workload_finder import find_workload, parse_params
from workloads.retinanet.workload import SMALL_PARAMS

CONFIGS = {
    "small": {**SMALL_PARAMS, "local_batch": 8},
    # enough classes and pixels that the focal loss and the frozen BNs weigh as in the full model
    "medium": {"backbone": "resnext50_32x4d", "image_size": 320, "classes": 264, "trainable_layers": 3,
               "local_batch": 2},
}
BASELINE = {"focal_loss": "reference", "frozen_bn": "reference", "precision": "fp32",
            "memory_format": "contiguous", "optimizer_impl": "foreach", "compile": False, "ipex": "off"}
SWITCHES = [("focal_loss", "kernel"), ("frozen_bn", "fused"), ("precision", "bf16"),
            ("memory_format", "channels_last"), ("optimizer_impl", "fused"), ("optimizer_impl", "loop")]
ALL_ON = {"focal_loss": "kernel", "frozen_bn": "fused", "precision": "bf16", "memory_format": "channels_last",
          "optimizer_impl": "fused"}


def build(config: dict, overrides: dict):
    params = {k: v for k, v in config.items() if k != "local_batch"}
    workload = find_workload("retinanet").workload
    p, problems = parse_params(workload, {**params, **BASELINE, **overrides})
    if problems:
        raise SystemExit("\n".join(map(str, problems)))
    ctx = RankContext(rank=0, world_size=1, local_batch=config["local_batch"], seed=0,
                      threads=torch.get_num_threads())
    return workload.build(p, ctx)


def step_case(trainer, batches) -> Case:
    turn = [0]

    def run(lap) -> None:
        batch = batches[turn[0] % len(batches)]
        turn[0] += 1
        trainer.optimizer.zero_grad(set_to_none=True)
        loss = trainer.module(*batch)
        lap("forward")
        loss.backward()
        lap("backward")
        trainer.optimizer.step()
        lap("optimizer")

    return Case(run=run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="small")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--warmup", type=int, default=2, help="untimed interleaved steps first")
    parser.add_argument("--repeats", type=int, default=8, help="timed interleaved steps per variant")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile (slow to compile)")
    parser.add_argument("--quick", action="store_true", help="1 warm-up and 3 timed steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.warmup, args.repeats = 1, 3
    set_threads(args.threads)

    config = CONFIGS[args.config]
    variants = {"baseline (all off)": {}}
    variants.update({f"{name}={value}": {name: value} for name, value in SWITCHES})
    all_on = dict(ALL_ON)
    if args.compile:
        variants["compile=true"] = {"compile": True}
        all_on["compile"] = True
    variants["all on"] = all_on
    # and each switch off again from "all on": switches interact (bf16 makes the fused frozen BN pay off)
    variants.update({f"all on but {name}={BASELINE[name]}": {**all_on, name: BASELINE[name]} for name in ALL_ON})

    trainers = {name: build(config, overrides) for name, overrides in variants.items()}
    batches = [batch for _, batch in zip(range(2), next(iter(trainers.values())).batches(0))]
    cases = {name: step_case(trainer, batches) for name, trainer in trainers.items()}
    print(f"config {args.config}: {config}")
    print(environment_line())
    print(f"{args.threads} threads; {args.warmup} warm-up + {args.repeats} timed steps per variant, interleaved")
    started = time.perf_counter()
    timings = time_interleaved(cases, warmup=args.warmup, repeats=args.repeats)
    baseline, all_on_total = timings["baseline (all off)"]["total"], timings["all on"]["total"]
    rows = []
    for name, phases in timings.items():
        total = phases["total"]
        # one-switch rows: faster than the baseline by; "all on but" rows: "all on" is faster than them by
        gain = speedup(total, all_on_total) if name.startswith("all on but") else speedup(baseline, total)
        rows.append([name, format_ms(total), f"{total.min_ms:.1f}", f"{phases['forward'].median_ms:.1f}",
                     f"{phases['backward'].median_ms:.1f}", f"{phases['optimizer'].median_ms:.1f}",
                     f"{gain:.2f}x"])
    print()
    print(format_table(["variant", "step_ms (median ±spread)", "min_ms", "fwd_ms", "bwd_ms", "opt_ms",
                        "switch speedup"], rows))
    print("switch speedup: how much faster the step is with the switch on; one-switch rows against the baseline "
          "(all off), 'all on but' rows against 'all on' (every other switch on)")
    print(f"\nall on applied: {trainers['all on'].applied()}")
    print(f"bench wall time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
