"""What does measuring the gradient noise scale cost a training step (the goal: at most 2%)?

Side by side in one run: each rank builds the workload twice from the same seed, one copy wrapped as a
throughput trial wraps it (`orchestrator.run.rank.ddp.wrap`, the workload's DDP switches) and stepped by
`protocol.make_step`, the other wrapped with the noise hook and stepped by `run.rank.noise_scale.NoiseScale` as a
convergence run steps it. Blocks of steps alternate between the two (ABBA order, so neither always goes
first), each block timed between barriers by the slowest rank; the overhead is the ratio of the two copies'
median block times, and its spread the range of the per-pair ratios. With 2 ranks that is the per-bucket
hook on every step and, on every K-th step, the norms and one small all-reduce (K as a convergence run at that
layout takes it: `core.measured.noise_scale.every_steps` of the workload's steps per epoch; `--every 1` measures every
step, the cost of one measured step); with 1 rank, the step split into two micro-batches every
`ONE_RANK_EVERY_STEPS`-th step.

Workloads: the classifier of sweeps/classifier.yaml (local batches 32 and 128) and the small RetinaNet of
sweeps/retinanet.yaml (local batch 8), their parameters as the files give them; each rank pinned to one core.

    python benchmarks/bench_noise_scale.py                 # both models, 1 and 2 ranks (about 10 minutes on 2 cores)
    python benchmarks/bench_noise_scale.py --quick         # short blocks, a check that it runs (about 2 minutes)
    python benchmarks/bench_noise_scale.py --every 1       # every step measured: the cost of one measured step
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.run.driver.launcher import free_port, rank_environment  # noqa: E402

# (label, sweep file, local batch)
CASES = (("classifier", "classifier.yaml", 32), ("classifier", "classifier.yaml", 128),
         ("retinanet", "retinanet.yaml", 8))


def sweep_params(sweep: str) -> tuple[str, dict]:
    import yaml

    doc = yaml.safe_load((REPO / "sweeps" / sweep).read_text())
    return doc["workload"]["name"], doc["workload"]["params"]


def _build(name: str, params_json: str, rank: int, world: int, local_batch: int):
    import torch

    from orch import decide_precision
    from orch.workload import RankContext, ddp_options_of
    from orchestrator.io.workload_finder import find_workload, parse_params

    workload = find_workload(name).workload
    params, problems = parse_params(workload, json.loads(params_json))
    if problems:
        raise ValueError("; ".join(map(str, problems)))
    params = decide_precision(params)   # a sweep's plan decides `auto`; without one, this CPU does
    ctx = RankContext(rank=rank, world_size=world, local_batch=local_batch, seed=0, threads=torch.get_num_threads())
    return workload.build(params, ctx), ddp_options_of(params)


def worker(name: str, params_json: str, local_batch: int, warmup: int, steps: int, blocks: int, every: int) -> None:
    """One rank: both copies built and wrapped, warmed up, then `blocks` ABBA pairs of `steps` steps each."""
    import torch
    import torch.distributed as dist

    from orchestrator.run.rank import ddp
    from orchestrator.run.rank.noise_scale import NoiseScale
    from orchestrator.run.rank.protocol import make_step

    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    plain_trainer, options = _build(name, params_json, rank, world, local_batch)
    noise_trainer, _ = _build(name, params_json, rank, world, local_batch)
    plain = ddp.wrap(plain_trainer.module, options) if world > 1 else plain_trainer.module
    noisy = ddp.wrap(noise_trainer.module, options, noise_scale=True) if world > 1 else noise_trainer.module
    batches = []
    for batch in plain_trainer.batches(0):
        batches.append(batch)
        if len(batches) == 8:
            break
    from orchestrator.core.measured.noise_scale import every_steps

    k = every if every > 0 else every_steps(noise_trainer.steps_per_epoch())
    noise = NoiseScale(noisy, noise_trainer.optimizer, world=world, local_batch=local_batch, every=k)
    steppers = {"plain": make_step(plain, plain_trainer.optimizer), "noise": noise.step}
    for i in range(warmup):
        for step in steppers.values():
            step(batches[i % len(batches)])
    times: dict[str, list[float]] = {"plain": [], "noise": []}
    for pair in range(blocks):
        for which in (("plain", "noise") if pair % 2 == 0 else ("noise", "plain")):
            dist.barrier()
            start = time.perf_counter()
            for i in range(steps):
                steppers[which](batches[i % len(batches)])
            elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)   # the slowest rank's block
            times[which].append(float(elapsed) / steps * 1e3)
    if rank == 0:
        print(json.dumps({"step_ms": times, "b_simple": noise.meter.estimate().b_simple,
                          "every": k if world > 1 else None}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def launch(ranks: int, name: str, params: dict, local_batch: int, warmup: int, steps: int, blocks: int,
           every: int = 0) -> dict:
    """`ranks` pinned processes of one thread each, on this process's first `ranks` CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < ranks:
        raise SystemExit(f"need {ranks} CPUs, this process may use {len(cpus)}")
    port, procs = free_port(), []
    for rank in range(ranks):
        env = rank_environment(dict(os.environ), cpus=[cpus[rank]], ccl_cpus_on_node=[], backend="gloo", rank=rank,
                               local_rank=rank, world_size=ranks, local_world_size=ranks,
                               master_addr="127.0.0.1", master_port=port)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        procs.append(subprocess.Popen(
            ["taskset", "-c", str(cpus[rank]), sys.executable, __file__, "--worker", name, json.dumps(params),
             str(local_batch), str(warmup), str(steps), str(blocks), str(every)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO))
    outs = [p.communicate() for p in procs]
    if any(p.returncode for p in procs):
        tails = "\n".join(err[-1500:] for _, err in outs)
        raise RuntimeError(f"{ranks}-rank run failed ({[p.returncode for p in procs]}):\n{tails}")
    return json.loads(outs[0][0].strip().splitlines()[-1])


def row(label: str, ranks: int, batch: int, result: dict) -> list[str]:
    """The table row: median step with and without, the overhead and the range of the per-pair ratios."""
    plain, noisy = result["step_ms"]["plain"], result["step_ms"]["noise"]
    ratios = [n / p for p, n in zip(plain, noisy)]
    overhead = statistics.median(noisy) / statistics.median(plain) - 1
    b = result.get("b_simple")
    k = result.get("every")
    return [label, f"{ranks}×1×{batch}", "–" if k is None else str(k), f"{statistics.median(plain):.2f}",
            f"{statistics.median(noisy):.2f}",
            f"{100 * overhead:+.1f}%", f"{100 * (min(ratios) - 1):+.1f}% to {100 * (max(ratios) - 1):+.1f}%",
            f"{b:.4g}" if b is not None else "–"]


def per_step(steps: int, decay: float) -> float:
    """The bias-corrected moving average's sum of squared weights over `steps` steps: 1 / its effective count."""
    return (1 - decay) * (1 + decay ** steps) / ((1 + decay) * (1 - decay ** steps))


def project(folders: list[str]) -> None:
    """Each folder's runs, measured on every step, as if every K-th step had been (K = every_steps of the run's
    steps per epoch): the measured steps and the 90% interval's width (high ÷ low), now and projected (the
    half-width in log scales with √(1 / effective steps) of the moving averages), per global batch the median
    over its seeds, and the pooled B_simple the epochs model takes as its prior. Pure arithmetic on the records."""
    from benchmarks.common import format_table
    from orchestrator.core.measured import records as rec
    from orchestrator.core.measured.noise_scale import every_steps
    from orchestrator.core.predict.noise_prior import prior_of
    from orchestrator.io.store import load_results

    for folder in folders:
        by_batch: dict[int, list[tuple[int, int, float, float, tuple, tuple]]] = {}
        for r in rec.Records.of(load_results(folder).records).ok(rec.Kind.CONVERGENCE):
            c = r.convergence
            ns = c.noise_scale if c is not None else None
            if ns is None or ns.b_simple is None or ns.low is None or not ns.steps or not c.steps_per_epoch:
                continue
            k = every_steps(c.steps_per_epoch) if (ns.every_steps or 1) == 1 else ns.every_steps
            after = max(1, ns.steps // k)
            scale = math.sqrt(per_step(after, ns.ema_decay or 0.95) / per_step(ns.steps, ns.ema_decay or 0.95))
            half = math.log((ns.high or ns.b_simple * ns.b_simple / ns.low) / ns.low) / 2
            now = (ns.b_simple, ns.low, ns.high)
            later = (ns.b_simple, ns.b_simple * math.exp(-half * scale),
                     None if ns.high is None else ns.b_simple * math.exp(half * scale))
            by_batch.setdefault(r.global_batch or 0, []).append((k, ns.steps, after, scale, now, later))
        rows = []
        for batch, runs in sorted(by_batch.items()):
            width = lambda x: x[2] / x[1] if x[2] else math.inf   # noqa: E731
            rows.append([str(batch), str(runs[0][0]), f"{statistics.median(r[1] for r in runs):.0f}",
                         f"{statistics.median(r[2] for r in runs):.0f}",
                         f"×{statistics.median(width(r[4]) for r in runs):.2f}",
                         f"×{statistics.median(width(r[5]) for r in runs):.2f}"])
        pooled = [prior_of([r[i] for runs in by_batch.values() for r in runs]) for i in (4, 5)]
        print(f"{folder}: B_simple every K-th step (K = every_steps(steps per epoch)), "
              "from runs measured on every step")
        print(format_table(["global batch", "K", "steps measured", "with K", "interval (high ÷ low)", "with K"], rows))
        for label, p in zip(("every step", "every K-th"), pooled):
            if p is not None:
                print(f"  pooled, {label}: B_simple {p.b_simple:.3g} [{p.measured_low:.3g}–{p.measured_high:.3g}]; "
                      f"the prior's sd in log {p.sd_log:.3f} (of which the measurement {p.measured_sd_log:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short blocks: checks that it runs, measures little")
    parser.add_argument("--ranks", default="1,2", help="rank counts to run (default 1,2)")
    parser.add_argument("--every", type=int, default=0, help="with 2 ranks, measure every N-th step (default: "
                                                             "as a convergence run at that layout would)")
    parser.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    parser.add_argument("--project", nargs="+", metavar="RESULTS_DIR",
                        help="no run: project the recorded B_simple intervals of these folders' convergence runs "
                             "(measured on every step) to every K-th step; pure arithmetic")
    args = parser.parse_args()
    if args.project:
        project(args.project)
        return
    if args.worker:
        name, params, batch, warmup, steps, blocks, every = args.worker
        worker(name, params, int(batch), int(warmup), int(steps), int(blocks), int(every))
        return
    from benchmarks.common import environment_line, format_table

    warmup, blocks = (2, 2) if args.quick else (5, 8)
    print(environment_line())
    rows = []
    for label, sweep, batch in CASES:
        name, params = sweep_params(sweep)
        steps = (2 if args.quick else 10) if name == "retinanet" else (10 if args.quick else 60)
        for ranks in (int(r) for r in args.ranks.split(",")):
            started = time.perf_counter()
            result = launch(ranks, name, params, batch, warmup, steps, blocks, args.every)
            rows.append(row(label, ranks, batch, result))
            print(f"  {label} {ranks}×1×{batch}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(format_table(["model", "layout", "K", "step ms, plain", "step ms, with B_simple", "overhead",
                        "per-pair range", "B_simple"], rows))


if __name__ == "__main__":
    main()
