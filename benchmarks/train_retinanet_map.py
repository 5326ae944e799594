"""Train the small RetinaNet on synthetic shapes through the workload interface, printing mAP per epoch.

Single process, the orchestrator's step (zero_grad, loss = module(*batch), backward, optimizer.step):

    python benchmarks/train_retinanet_map.py                 # SMALL_PARAMS, 8 epochs
    python benchmarks/train_retinanet_map.py --quick         # 2 epochs of 128 images, a smoke test
    python benchmarks/train_retinanet_map.py --set lr=3e-4 --set precision=bf16 --local-batch 16
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from orch.workload import RankContext
from orchestrator.io.workload_finder import find_workload, parse_params
from workloads.retinanet.workload import SMALL_PARAMS


def parse_overrides(items: list[str]) -> dict:
    """["lr=3e-4", "backbone=resnet50"] -> {"lr": 0.0003, "backbone": "resnet50"} (values read as JSON
    where they parse, else kept as strings)."""
    out = {}
    for item in items:
        key, _, text = item.partition("=")
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--local-batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a parameter")
    parser.add_argument("--quick", action="store_true", help="2 epochs of 128 training images")
    args = parser.parse_args(argv)

    import torch

    overrides = {**SMALL_PARAMS, **parse_overrides(args.set)}
    if args.quick:
        overrides.update(train_samples=128, test_samples=32)
        args.epochs = min(args.epochs, 2)
    workload = find_workload("retinanet").workload
    params, problems = parse_params(workload, overrides)
    if problems:
        print("\n".join(str(p) for p in problems), file=sys.stderr)
        return 2
    ctx = RankContext(rank=0, world_size=1, local_batch=args.local_batch, seed=args.seed,
                      threads=torch.get_num_threads())
    trainer = workload.build(params, ctx)
    print(f"params: {json.dumps(overrides, sort_keys=True)}")
    print(f"local_batch {args.local_batch}, seed {args.seed}, threads {ctx.threads}, torch {torch.__version__}")
    print(f"applied: {trainer.applied()}")
    print(f"{'epoch':>5} {'steps':>5} {'loss':>7} {'train_s':>8} {'eval_s':>7} {'map':>6} {'map50':>6}")
    started = time.perf_counter()
    for epoch in range(args.epochs):
        t0, losses = time.perf_counter(), []
        for batch in trainer.batches(epoch):
            trainer.optimizer.zero_grad(set_to_none=True)
            loss = trainer.module(*batch)
            loss.backward()
            trainer.optimizer.step()
            losses.append(loss.item())
        t1 = time.perf_counter()
        metrics = trainer.evaluate()
        t2 = time.perf_counter()
        print(f"{epoch:>5} {len(losses):>5} {sum(losses) / len(losses):>7.3f} {t1 - t0:>8.1f} {t2 - t1:>7.1f} "
              f"{metrics['map']:>6.3f} {metrics['map50']:>6.3f}", flush=True)
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
