"""Is the compute roof a roof? The small RetinaNet's fp32 training step (sweeps/retinanet.yaml's model, local
batch 8) against the compute roof of the same core (orchestrator/run/rank/roof.py: GEMMs and convolutions in both
memory formats) and against the 2048² GEMM alone, natively and under the AVX2 cap (the step once ran
94.5 GFLOP/s against a 90.3 GFLOP/s GEMM "peak" on a Zen 4).

The cap only takes effect when set before a process starts, so each setting is its own process, pinned to one
core with one thread. In a process, rounds alternate: the step's steps, then every roof primitive and the GEMM
peak; each side keeps its fastest (another process's time slice only ever slows a call). The step's GFLOP/s is
orch's FLOP counter's (run.rank.flops: what a trial records and the hardware-efficiency table uses; a convolution's
taps inside the input, as benchdnn and the roof count them), and torch's own count beside it (every tap, those in
the zero padding too: what records older than the valid-tap count hold).

    python benchmarks/bench_step_vs_roof.py                 # 3 rounds per setting
    python benchmarks/bench_step_vs_roof.py --rounds 1      # a smoke run (about 1 min per setting)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAP = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
LOCAL_BATCH = 8


def _trainer():  # noqa: ANN202  (torch types: imported in the child only)
    import yaml

    from orch.workload import RankContext
    from orchestrator.io.workload_finder import find_workload, parse_params

    params = yaml.safe_load((REPO / "sweeps" / "retinanet.yaml").read_text())["workload"]["params"]
    workload = find_workload("retinanet").workload
    p, problems = parse_params(workload, {**params, "precision": "fp32"})
    if problems:
        raise SystemExit("\n".join(map(str, problems)))
    return workload.build(p, RankContext(rank=0, world_size=1, local_batch=LOCAL_BATCH, seed=0, threads=1))


def child(rounds: int) -> None:
    """One setting, in a fresh process pinned to one core: the step and the roof, alternating."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from orchestrator.run.rank.flops import flop_counter
    from orchestrator.run.rank.protocol import gemm_peak, make_step
    from orchestrator.run.rank.roof import compute_roof

    torch.set_num_threads(1)
    trainer = _trainer()
    step = make_step(trainer.module, trainer.optimizer)
    batches = [b for _, b in zip(range(4), trainer.batches(0))]
    for b in batches[:3]:
        step(b)
    counter, every_tap = flop_counter(), FlopCounterMode(display=False)
    with counter:
        step(batches[0])
    with every_tap:
        step(batches[0])
    flop, torch_share = counter.get_total_flops(), every_tap.get_total_flops() / counter.get_total_flops()
    best_step_s, roof, gemm = float("inf"), {}, 0.0
    for _ in range(rounds):
        for b in batches:
            start = time.perf_counter()
            step(b)
            best_step_s = min(best_step_s, time.perf_counter() - start)
        for name, rate in compute_roof("fp32").items():
            roof[name] = max(roof.get(name, 0.0), rate["best_gflops"])
        gemm = max(gemm, gemm_peak(1, "fp32", seconds=1.0)["best_gflops"])
    top = max(roof, key=lambda n: roof[n])
    print(json.dumps({"step_gflops": flop / best_step_s / 1e9, "torch_share": torch_share, "roof_gflops": roof[top],
                      "roof_primitive": top, "gemm_2048_gflops": gemm, "samples_per_s": LOCAL_BATCH / best_step_s,
                      "aten_capability": torch.backends.cpu.get_cpu_capability()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.rounds)
        return
    base = {k: v for k, v in os.environ.items() if k not in CAP}
    print("| setting | samples/s | step GFLOP/s (orch / torch's count) | roof GFLOP/s (primitive) | 2048² GEMM "
          "| step ÷ roof | step ÷ GEMM |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, env in (("native", base), ("AVX2 cap", {**base, **CAP})):
        done = subprocess.run([sys.executable, __file__, "--child", "--rounds", str(args.rounds)], env=env,
                              capture_output=True, text=True, check=True, cwd=REPO)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        step, every_tap = r["step_gflops"], r["step_gflops"] * r["torch_share"]
        print(f"| {name} ({r['aten_capability']}) | {r['samples_per_s']:.2f} | {step:.1f} / {every_tap:.1f} | "
              f"{r['roof_gflops']:.1f} ({r['roof_primitive']}) | {r['gemm_2048_gflops']:.1f} | "
              f"{step / r['roof_gflops']:.1%} | {step / r['gemm_2048_gflops']:.1%} |")


if __name__ == "__main__":
    main()
