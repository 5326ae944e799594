"""Is orch's throughput honest? The same layout and model measured two ways, interleaved in one run:

- orch:   `orch sweep` on a one-point sweep (Ray, placement group, launcher actor, watchdog, progress file);
- direct: plain processes pinned the same way (numactl or taskset, same OpenMP environment) running
          benchmarks/direct_train.py, an independent loop with its own timing.

Target: orch's median samples/s within 3% of the direct one. Also reports orch's overhead: sweep wall time
against the sum of the timed regions, and the per-trial start-up time (reservation → every rank built).

    python benchmarks/bench_orch_vs_direct.py            # classifier 2×1 and 1×2, small RetinaNet 1×2
    python benchmarks/bench_orch_vs_direct.py --quick    # one round, classifier only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core.machine.topology import cpu_ranges  # noqa: E402
from orchestrator.io.store import load_results  # noqa: E402
from orchestrator.run.driver.launcher import free_port, rank_environment  # noqa: E402

CASES = {
    # name: (workload, params, ranks, threads, local batch, warm-up, timed steps)
    "classifier 2 ranks × 1 thread": ("classifier", {"hidden": 1024, "train_samples": 16384}, 2, 1, 64, 20, 600),
    "classifier 1 rank × 2 threads": ("classifier", {"hidden": 1024, "train_samples": 16384}, 1, 2, 128, 20, 600),
    "retinanet-small 1 rank × 2 threads": ("retinanet", {"backbone": "resnet18", "image_size": 128,
                                                         "classes": 4, "train_samples": 64, "test_samples": 8},
                                           1, 2, 4, 3, 10),
}
REPEATS = 3


def direct(workload: str, params: dict, ranks: int, threads: int, batch: int, warmup: int, steps: int) -> list[float]:
    """Throughput per repeat from plain pinned processes."""
    port = free_port()
    cpus = sorted(os.sched_getaffinity(0))
    procs = []
    for rank in range(ranks):
        mine = cpus[rank * threads:(rank + 1) * threads]
        env = rank_environment(dict(os.environ), cpus=mine, ccl_cpus_on_node=[], backend="gloo", rank=rank,
                               local_rank=rank, world_size=ranks, local_world_size=ranks, master_addr="127.0.0.1",
                               master_port=port)
        pin = (["numactl", f"--physcpubind={cpu_ranges(mine)}", "--membind=0"] if shutil.which("numactl")
               else ["taskset", "-c", cpu_ranges(mine)])
        procs.append(subprocess.Popen([*pin, sys.executable, str(REPO / "benchmarks" / "direct_train.py"), workload,
                                       json.dumps(params), str(batch), str(warmup), str(steps), str(REPEATS)],
                                      env=env, stdout=subprocess.PIPE, text=True, cwd=REPO))
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"direct run failed: {[p.returncode for p in procs]}")
    report = json.loads(outs[0].strip().splitlines()[-1])
    return [report["global_batch"] * steps / s for s in report["repeat_s"]]


def via_orch(workload: str, params: dict, ranks: int, threads: int, batch: int, warmup: int, steps: int,
             folder: Path) -> tuple[list[float], dict]:
    sweep = folder / "sweep.yaml"
    sweep.write_text(json.dumps({
        "name": "bench", "workload": {"name": workload, "params": params},
        "grid": {"ranks": [ranks], "threads_per_rank": [threads], "local_batch": [batch]},
        "measure": {"warmup_steps": warmup, "timed_steps": steps, "repeats": REPEATS, "peak": False}}))
    results = folder / f"results-{time.monotonic_ns()}"
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "orchestrator.cli", "sweep", str(sweep), "--results", str(results),
                          "--no-report", "--json"], capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - started
    if run.returncode != 0:
        raise RuntimeError(f"orch sweep failed:\n{run.stderr[-2000:]}")
    record = load_results(results).records.items[-1]
    section = record.throughput
    if section is None or section.samples_per_s_repeats is None or section.timed_s_repeats is None:
        raise RuntimeError(f"{record.key}: {record.status}, no throughput ({record.reason})")
    return section.samples_per_s_repeats, {"sweep_wall_s": wall, "trial_wall_s": record.wall_s,
                                           "startup_s": record.startup_s, "timed_s": sum(section.timed_s_repeats)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one round, classifier cases only")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved orch/direct rounds per case")
    parser.add_argument("--case", action="append", choices=list(CASES), help="run only this case (repeatable)")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    cases = {k: v for k, v in CASES.items() if not (args.quick and v[0] != "classifier")}
    if args.case:
        cases = {k: v for k, v in cases.items() if k in args.case}
    print(f"orch vs direct launch, {rounds} interleaved round(s) × {REPEATS} timed repeats each; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':38} {'direct samples/s':>17} {'orch samples/s':>15} {'orch/direct':>12} {'best/best':>10} "
          f"{'start-up s':>11} {'timed/wall':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in cases.items():
            direct_all, orch_all, overheads = [], [], []
            for r in range(rounds):
                # Alternate which side goes first so a slow phase of the machine does not favour one.
                order = ("direct", "orch") if r % 2 == 0 else ("orch", "direct")
                for side in order:
                    if side == "direct":
                        direct_all += direct(*case)
                    else:
                        values, overhead = via_orch(*case, Path(tmp))
                        orch_all += values
                        overheads.append(overhead)
            d, o = statistics.median(direct_all), statistics.median(orch_all)
            startup = statistics.median(x["startup_s"] for x in overheads)
            timed_share = sum(x["timed_s"] for x in overheads) / sum(x["sweep_wall_s"] for x in overheads)
            best = max(orch_all) / max(direct_all)
            print(f"{name:38} {d:17,.1f} {o:15,.1f} {o / d:12.3f} {best:10.3f} {startup:11.2f} {timed_share:11.1%}")
    print("orch/direct: ratio of medians over all repeats (1.000 = identical; target within ±3%).")
    print("best/best: ratio of the fastest repeats (noise only ever slows a repeat down).")
    print("start-up: per trial, from reserving the CPUs until every rank had built its model (median).")
    print("timed/wall: sum of the timed regions ÷ total `orch sweep` wall time, Ray start included.")


if __name__ == "__main__":
    main()
