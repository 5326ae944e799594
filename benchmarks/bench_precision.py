"""fp32 against bf16: the default sweep's training step on one pinned core, natively and under the AVX2 cap
(ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2, what an AVX2-only CPU such as AMD Zen 3 runs), and the
0.1 s GEMM probe that `precision: auto` decides from, in each setting.

The cap only takes effect when set before a process starts, so every measurement is its own process. The four
settings run interleaved: round r runs each of them once, in an order rotated by r, so that a burst of noise
on a shared machine hits all of them alike. Each process builds the small RetinaNet of sweeps/retinanet.yaml
(its parameters, with the precision set), runs `--warmup` steps, then times `--steps` steps of local batch 8
and reports the median; a setting's figure is the median over rounds, its spread the range.

    python benchmarks/bench_precision.py               # 3 rounds
    python benchmarks/bench_precision.py --rounds 1 --steps 3   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAP = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
SETTINGS = [("native", "fp32"), ("native", "bf16"), ("AVX2 cap", "fp32"), ("AVX2 cap", "bf16")]
LOCAL_BATCH = 8


def child(precision: str, warmup: int, steps: int) -> None:
    """One measurement, in a fresh process: pinned to one core, one thread."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import torch

    torch.set_num_threads(1)
    import yaml

    from orch.workload import RankContext
    from orchestrator.io.isa import probe
    from orchestrator.io.workload_finder import find_workload, parse_params

    params = yaml.safe_load((REPO / "sweeps" / "retinanet.yaml").read_text())["workload"]["params"]
    workload = find_workload("retinanet").workload
    p, problems = parse_params(workload, {**params, "precision": precision})
    if problems:
        raise SystemExit("\n".join(map(str, problems)))
    trainer = workload.build(p, RankContext(rank=0, world_size=1, local_batch=LOCAL_BATCH, seed=0, threads=1))
    batch = next(iter(trainer.batches(0)))
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.module(*batch).backward()
        trainer.optimizer.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    isa = probe()
    print(json.dumps({"step_ms": 1e3 * statistics.median(times), "verdict": isa.verdict(),
                      "capability": isa.torch_capability}))


def measure(setting: str, precision: str, warmup: int, steps: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CAP}
    if setting != "native":
        env.update(CAP)
    out = subprocess.run([sys.executable, __file__, "--child", precision, "--warmup", str(warmup),
                          "--steps", str(steps)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--child", metavar="PRECISION", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.warmup, args.steps)
        return
    runs: dict[tuple[str, str], list[dict]] = {s: [] for s in SETTINGS}
    for r in range(args.rounds):
        for setting in SETTINGS[r % len(SETTINGS):] + SETTINGS[:r % len(SETTINGS)]:
            runs[setting].append(measure(*setting, args.warmup, args.steps))
            print(f"round {r + 1}: {setting[0]} {setting[1]}: {runs[setting][-1]['step_ms']:,.0f} ms", file=sys.stderr)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    print(f"small RetinaNet (sweeps/retinanet.yaml), local batch {LOCAL_BATCH}, 1 pinned core, {cpu}; "
          f"median of {args.rounds} interleaved round(s) of {args.steps} steps after {args.warmup} warm-up")
    print("| setting | torch kernels | fp32 step | bf16 step | bf16 ÷ fp32 | probe verdict |")
    print("|---|---|---|---|---|---|")
    for setting in ("native", "AVX2 cap"):
        fp32 = [m["step_ms"] for m in runs[(setting, "fp32")]]
        bf16 = [m["step_ms"] for m in runs[(setting, "bf16")]]
        last = runs[(setting, "bf16")][-1]
        print(f"| {setting} | {last['capability']} | {statistics.median(fp32):,.0f} ms ({min(fp32):,.0f}–"
              f"{max(fp32):,.0f}) | {statistics.median(bf16):,.0f} ms ({min(bf16):,.0f}–{max(bf16):,.0f}) | "
              f"{statistics.median(bf16) / statistics.median(fp32):.2f} | {last['verdict']} |")


if __name__ == "__main__":
    main()
