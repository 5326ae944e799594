"""Measure the peak unique memory (USS) of a training rank and compare it with the workload's estimate.

Each configuration runs as a real 2-rank job of fresh processes shaped like orchestrator ranks: a gloo
group, the trainer's module wrapped in DistributedDataParallel with the workload's DDP switches, as a sweep
wraps it (so DDP's gradient buckets count, or do not where the gradients are views into them), the
orchestrator's step (zero_grad, loss = module(*batch), backward, optimizer.step). In each rank a thread
samples psutil's `memory_full_info().uss` from just before `build` to the end of the steps. Two ranks, not
one, because that is what USS is for: the library pages (~230 MiB of libtorch & co. text) are shared by the
ranks and so drop out of each rank's USS, whereas a lone process owns them, and a lone measurement would
also swing by that much whenever another torch process on the machine maps the same files. `anon` is the
rank's private dirty memory (heap, relocated data) from /proc/self/smaps_rollup, as a cross-check.

    python benchmarks/calibrate_memory.py --quick          # classifier and small RetinaNet (~2 min)
    python benchmarks/calibrate_memory.py                  # + the full MLPerf RetinaNet (many minutes)
    python benchmarks/calibrate_memory.py --only full      # configurations whose name starts with "full"
    .venv-ipex/bin/python benchmarks/calibrate_memory.py --quick --ipex auto   # with ipex.optimize applied
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from orchestrator.io.workload_finder import find_workload, parse_params

SMALL = {"backbone": "resnet18", "trainable_layers": 5, "image_size": 128, "classes": 4, "train_samples": 64,
         "test_samples": 8}
FULL = {"train_samples": 8, "test_samples": 2}   # the workload's defaults are the MLPerf model
# (name, workload, params, local_batch). The ±20% requirement covers small-* and full-*; the rest are checks.
CONFIGS = [
    ("classifier", "classifier", {}, 64),
    ("classifier", "classifier", {}, 1024),
    ("small", "retinanet", SMALL, 2),
    ("small", "retinanet", SMALL, 8),
    ("small-bf16", "retinanet", {**SMALL, "precision": "bf16", "memory_format": "channels_last"}, 8),
    ("small-bf16-hook", "retinanet", {**SMALL, "precision": "bf16", "memory_format": "channels_last",
                                      "ddp_comm_hook": "bf16"}, 8),
    # the default sweep's: gradients are views into DDP's buckets (one copy fewer), all-reduced in bf16
    ("small-bf16-view", "retinanet", {**SMALL, "precision": "bf16", "memory_format": "channels_last",
                                      "ddp_comm_hook": "bf16", "ddp_grad_as_bucket_view": True}, 8),
    ("small-sgd-reference", "retinanet", {**SMALL, "optimizer": "sgd", "focal_loss": "reference",
                                          "frozen_bn": "reference"}, 8),
    # separate what grows with the parameters from what grows with the pixels
    ("mix-r50-256", "retinanet", {**SMALL, "backbone": "resnet50", "image_size": 256, "trainable_layers": 3}, 2),
    ("mix-r18-800", "retinanet", {**SMALL, "image_size": 800, "trainable_layers": 3}, 1),
    ("mix-r18-800", "retinanet", {**SMALL, "image_size": 800, "trainable_layers": 3}, 2),
    ("mix-x50-128", "retinanet", {**SMALL, "backbone": "resnext50_32x4d", "trainable_layers": 3}, 2),
    ("mix-x50-128", "retinanet", {**SMALL, "backbone": "resnext50_32x4d", "trainable_layers": 3}, 8),
    ("full", "retinanet", FULL, 1),
    ("full", "retinanet", FULL, 2),
    ("full-4-classes", "retinanet", {**FULL, "classes": 4}, 1),
    ("full-reference", "retinanet", {**FULL, "focal_loss": "reference"}, 1),
    ("full-reference", "retinanet", {**FULL, "focal_loss": "reference"}, 2),
    ("full-bf16", "retinanet", {**FULL, "precision": "bf16", "memory_format": "channels_last"}, 1),
]
QUICK = ("classifier", "small")


def private_dirty_bytes() -> int:
    """Private_Dirty of this process (anonymous memory and relocated data: never shared between ranks)."""
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) * 1024
    return 0


class UssSampler(threading.Thread):
    """Peak USS (and private dirty memory) of this process, sampled every `interval_s` until `stop()`."""

    def __init__(self, interval_s: float):
        import psutil

        super().__init__(daemon=True)
        self.process, self.interval_s = psutil.Process(), interval_s
        self.peak_uss = self.peak_anon = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.peak_uss = max(self.peak_uss, self.process.memory_full_info().uss)
            self.peak_anon = max(self.peak_anon, private_dirty_bytes())
            self._done.wait(self.interval_s)

    def stop(self) -> tuple[int, int]:
        self._done.set()
        self.join()
        return self.peak_uss, self.peak_anon


def rank_main(spec: dict) -> dict:
    """One rank (in its own process): build, wrap in DDP, train `steps` steps; returns its measurements."""
    import psutil
    import torch
    import torch.distributed as dist

    from orch.workload import RankContext, ddp_options_of
    from orchestrator.run.rank import ddp

    torch.set_num_threads(spec["threads"])
    mib = 2**20
    process = psutil.Process()
    dist.init_process_group("gloo", init_method=f"file://{spec['store']}", rank=spec["rank"],
                            world_size=spec["world_size"])
    workload = find_workload(spec["workload"]).workload
    params, problems = parse_params(workload, spec["params"])
    if problems:
        raise SystemExit("\n".join(map(str, problems)))
    dist.barrier()   # both ranks have torch loaded: the library pages they share are out of USS from here on
    uss_ready = process.memory_full_info().uss
    sampler = UssSampler(spec["interval_s"])
    sampler.start()
    ctx = RankContext(rank=spec["rank"], world_size=spec["world_size"], local_batch=spec["local_batch"], seed=0,
                      threads=spec["threads"])
    trainer = workload.build(params, ctx)
    module = ddp.wrap(trainer.module, ddp_options_of(params))   # as a sweep wraps it: the workload's DDP switches
    uss_built = process.memory_full_info().uss
    step_s = []
    for step, batch in enumerate(trainer.batches(0)):
        if step == spec["steps"]:
            break
        start = time.perf_counter()
        trainer.optimizer.zero_grad(set_to_none=True)
        loss = module(*batch)
        loss.backward()
        trainer.optimizer.step()
        step_s.append(time.perf_counter() - start)
    dist.barrier()   # neither rank's exit may turn the other's shared pages into unique ones mid-measurement
    peak_uss, peak_anon = sampler.stop()
    dist.barrier()
    dist.destroy_process_group()
    return {"uss_ready_mib": uss_ready / mib, "uss_built_mib": uss_built / mib, "uss_peak_mib": peak_uss / mib,
            "anon_peak_mib": peak_anon / mib, "step_s": step_s, "applied": trainer.applied(),
            "estimate_mib": workload.memory_estimate_mib(params, spec["local_batch"])}


def measure(name: str, workload: str, params: dict, local_batch: int, args: argparse.Namespace) -> dict:
    """Run the 2-rank job; the rank with the higher peak USS speaks for it."""
    steps = 3 if name.startswith("full") else args.steps
    world_size = 2
    # enough samples that every rank gets `steps` batches
    params = {**params, "train_samples": max(params.get("train_samples", 0), world_size * local_batch * steps),
              "ipex": args.ipex}
    with tempfile.TemporaryDirectory() as tmp:
        spec = {"workload": workload, "params": params, "local_batch": local_batch, "threads": args.threads,
                "steps": steps, "interval_s": 0.1 if name.startswith("full") else 0.02,
                "store": os.path.join(tmp, "store"), "world_size": world_size}
        ranks = [subprocess.Popen([sys.executable, __file__, "--rank", json.dumps({**spec, "rank": rank})],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank in range(world_size)]
        outputs = [rank.communicate() for rank in ranks]
    for rank, (_stdout, stderr) in zip(ranks, outputs):
        if rank.returncode != 0:
            raise RuntimeError(f"{name} batch {local_batch} failed (exit {rank.returncode}):\n{stderr[-3000:]}")
    results = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]
    return max(results, key=lambda r: r["uss_peak_mib"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="only the classifier and small RetinaNet")
    parser.add_argument("--only", nargs="+", help="configurations whose name starts with one of these")
    parser.add_argument("--threads", type=int, default=1, help="threads per rank (2 ranks)")
    parser.add_argument("--steps", type=int, default=4, help="training steps per configuration (full: 3)")
    parser.add_argument("--ipex", choices=("auto", "off"), default="off",
                        help="the workloads' ipex switch (auto applies ipex.optimize where IPEX is installed)")
    args = parser.parse_args(argv)
    if args.rank:
        print(json.dumps(rank_main(json.loads(args.rank))))
        return 0

    prefixes = args.only or (QUICK if args.quick else None)
    chosen = [c for c in CONFIGS if prefixes is None or c[0].startswith(tuple(prefixes))]
    print(f"2 ranks x {args.threads} thread(s), gloo + DDP; peak USS per rank sampled from build to the last step")
    header = (f"{'config':<20} {'batch':>5} {'ready':>7} {'built':>7} {'peak_uss':>9} {'anon':>7} "
              f"{'estimate':>9} {'error':>7} {'step_s':>7}")
    print(header + "\n" + "-" * len(header))
    for name, workload, params, local_batch in chosen:
        r = measure(name, workload, params, local_batch, args)
        error = (r["estimate_mib"] - r["uss_peak_mib"]) / r["uss_peak_mib"]
        step = sorted(r["step_s"])[len(r["step_s"]) // 2]
        print(f"{name:<20} {local_batch:>5} {r['uss_ready_mib']:>7.0f} {r['uss_built_mib']:>7.0f} "
              f"{r['uss_peak_mib']:>9.0f} {r['anon_peak_mib']:>7.0f} {r['estimate_mib']:>9.0f} "
              f"{error:>+7.1%} {step:>7.2f}  ipex {r['applied'].get('ipex', 'n/a').split(':')[0]}", flush=True)
    print("\nMiB per rank. ready: USS with torch imported and the group up; built: after build + DDP; anon: peak "
          "private dirty memory; error: (estimate - peak_uss) / peak_uss; step_s: median step time.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
