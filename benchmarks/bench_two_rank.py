"""How well do 2 ranks × 1 thread scale over 1 rank × 1 thread, for each DDP switch?

The small RetinaNet of sweeps/retinanet.yaml (its workload parameters as the file gives them, bf16 and every
CPU optimization on) at the sweep's local batch, trained by plain processes launched here: each rank pinned to
one core with taskset (the environment orch's launcher gives a rank), gloo, the workload built through the
registry and wrapped by `orchestrator.run.rank.ddp.wrap` with the workload's own DDP switches (`ddp_comm_hook`,
`ddp_bucket_mb`, `ddp_grad_as_bucket_view`), the step of `orchestrator.run.rank.protocol.make_step`. So a setting
here trains exactly what a sweep with the same parameters trains.

Interleaved: each round runs, for every setting (in an order rotated by the round), 1×1 and 2×1 back to back
(which goes first alternating by round), so each 2×1 run has a 1×1 run beside it in time; the ratio of such a
pair is one sample. 1×1 never wraps DDP (one rank), so its runs all measure the same thing, and they also show
how much the machine's load moved during the benchmark.

On a shared machine other processes take cores away from the ranks, so each timed repeat also records every
rank's CPU time (all its threads, gloo's included) over its wall time: repeats where a rank got less than 90% of
its core are not "quiet" and are left out of the quiet columns. The CPU time per step (the busiest rank's),
which load moves far less than wall time (it still pays for caches and memory bandwidth shared with whatever
else runs), gives the scaling a machine with nothing else running would reach if no rank ever waited for the
other; each 2×1 run also prints rank 0's CPU time per step by thread (the main thread, gloo's threads).

    python benchmarks/bench_two_rank.py            # 2 rounds, every setting (10 to 40 minutes on 2 cores)
    python benchmarks/bench_two_rank.py --quick    # 1 round, 3 settings, shorter runs (about 3 minutes)
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
sys.path.insert(0, str(REPO))

from orchestrator.run.driver.launcher import free_port, rank_environment  # noqa: E402

SWEEP = REPO / "sweeps" / "retinanet.yaml"
# name: workload-parameter overrides on top of the sweep file's (the DDP defaults: no hook, 25 MiB, copies)
SETTINGS: dict[str, dict[str, object]] = {
    "default": {"ddp_comm_hook": "none", "ddp_bucket_mb": 25.0, "ddp_grad_as_bucket_view": False},
    "bf16 hook": {"ddp_comm_hook": "bf16", "ddp_bucket_mb": 25.0, "ddp_grad_as_bucket_view": False},
    "fp16 hook": {"ddp_comm_hook": "fp16", "ddp_bucket_mb": 25.0, "ddp_grad_as_bucket_view": False},
    "bucket 100 MiB": {"ddp_comm_hook": "none", "ddp_bucket_mb": 100.0, "ddp_grad_as_bucket_view": False},
    "bucket view": {"ddp_comm_hook": "none", "ddp_bucket_mb": 25.0, "ddp_grad_as_bucket_view": True},
    "bf16 + view": {"ddp_comm_hook": "bf16", "ddp_bucket_mb": 25.0, "ddp_grad_as_bucket_view": True},
}
QUICK_SETTINGS = ("default", "bf16 hook", "bf16 + view")


def sweep_workload() -> tuple[dict, int, dict]:
    """The sweep file's workload parameters, its (first) local batch and its measure section (warm-up steps)."""
    import yaml

    doc = yaml.safe_load(SWEEP.read_text())
    return doc["workload"]["params"], int(doc["grid"]["local_batch"][0]), doc.get("measure", {})


def thread_cpu_s() -> dict[str, float]:
    """CPU seconds (user + system) of each of this process's threads so far, summed by thread name."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # a thread that ended while we looked
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def worker(params_json: str, local_batch: int, warmup: int, steps: int, repeats: int) -> None:
    """One rank: build, wrap as a sweep does, warm up, time `repeats` × `steps` steps; rank 0 prints JSON."""
    import torch
    import torch.distributed as dist

    from orch.workload import RankContext, ddp_options_of
    from orchestrator.io.workload_finder import find_workload, parse_params
    from orchestrator.run.rank import ddp
    from orchestrator.run.rank.protocol import gradient_sizes, make_step

    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    workload = find_workload("retinanet").workload
    params, problems = parse_params(workload, json.loads(params_json))
    if problems:
        raise ValueError("; ".join(map(str, problems)))
    trainer = workload.build(params, RankContext(rank=rank, world_size=world, local_batch=local_batch, seed=0,
                                                 threads=torch.get_num_threads()))
    options = ddp_options_of(params)
    module = ddp.wrap(trainer.module, options) if world > 1 else trainer.module
    batches = []
    for batch in trainer.batches(0):
        batches.append(batch)
        if len(batches) == 8:
            break
    step = make_step(module, trainer.optimizer)
    for i in range(warmup):
        step(batches[i % len(batches)])
    times, shares, cpu_ms, threads_before = [], [], [], thread_cpu_s()
    for _ in range(repeats):
        dist.barrier()
        start, cpu_start = time.perf_counter(), time.process_time()
        for i in range(steps):
            step(batches[i % len(batches)])
        wall = time.perf_counter() - start
        elapsed = torch.tensor([wall], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time
        # CPU time of all the rank's threads over wall time, on its one core: below 1 when another process
        # took the core from it (the machine is shared) or when it waited for its peer; the least of the ranks.
        cpu_s = time.process_time() - cpu_start
        share = torch.tensor([cpu_s / wall], dtype=torch.float64)
        dist.all_reduce(share, op=dist.ReduceOp.MIN)
        # CPU time per step, the busiest rank's: what a step costs its core whatever else the machine runs
        cpu = torch.tensor([cpu_s / steps * 1e3], dtype=torch.float64)
        dist.all_reduce(cpu, op=dist.ReduceOp.MAX)
        times.append(float(elapsed))
        shares.append(float(share))
        cpu_ms.append(float(cpu))
    per_thread = {name: round((t - threads_before.get(name, 0.0)) / (steps * repeats) * 1e3, 1)
                  for name, t in thread_cpu_s().items() if t > threads_before.get(name, 0.0)}
    sizes = gradient_sizes(module)
    if rank == 0:
        print(json.dumps({"samples_per_s": [local_batch * world * steps / t for t in times], "cpu_share": shares,
                          "cpu_ms_per_step": cpu_ms, "thread_cpu_ms_per_step": per_thread,
                          "applied": ddp.applied(options, world_size=world),
                          **sizes, **ddp.wire_sizes(sizes, options if world > 1 else None)}), flush=True)
    dist.barrier()  # leave together: a rank tearing down gloo while its peer still talks to it aborts
    dist.destroy_process_group()


def launch(ranks: int, params: dict, local_batch: int, warmup: int, steps: int, repeats: int) -> dict:
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
            ["taskset", "-c", str(cpus[rank]), sys.executable, __file__, "--worker", json.dumps(params),
             str(local_batch), str(warmup), str(steps), str(repeats)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO))
    outs = [p.communicate() for p in procs]
    if any(p.returncode for p in procs):
        tails = "\n".join(err[-1500:] for _, err in outs)
        raise RuntimeError(f"{ranks}-rank run failed ({[p.returncode for p in procs]}):\n{tails}")
    return json.loads(outs[0][0].strip().splitlines()[-1])


QUIET_SHARE = 0.9   # a repeat counts as quiet when every rank had at least this share of its core


def spread(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):.3f} [{min(values):.3f}–{max(values):.3f}]"


# setting -> [(samples/s, least CPU share of the ranks, busiest rank's CPU ms per step)], one per timed repeat
Samples = dict[str, list[tuple[float, float, float]]]


def run_rounds(settings: list[str], rounds: int, base: dict, batch: int, warmup: int, steps: int,
               repeats: int) -> tuple[Samples, Samples, dict[str, list[float]], dict]:
    """1×1 and 2×1 repeats per setting, the per-pair ratios of medians, and each setting's last 2×1 report."""
    runs: dict[int, Samples] = {1: {s: [] for s in settings}, 2: {s: [] for s in settings}}
    ratios: dict[str, list[float]] = {s: [] for s in settings}
    reports: dict[str, dict] = {}
    for r in range(rounds):
        order = settings[r % len(settings):] + settings[:r % len(settings)]
        for name in order:
            params = {**base, **SETTINGS[name]}
            pair = {}
            for ranks in ((1, 2) if r % 2 == 0 else (2, 1)):
                report = launch(ranks, params, batch, warmup, steps, repeats)
                pair[ranks] = statistics.median(report["samples_per_s"])
                runs[ranks][name] += list(zip(report["samples_per_s"], report["cpu_share"],
                                              report["cpu_ms_per_step"]))
                reports[name] = report if ranks == 2 else reports.get(name, report)
            ratios[name].append(pair[2] / pair[1])
            shares = [f"{min(x[1] for x in runs[n][name][-repeats:]):.2f}" for n in (1, 2)]
            cpu = [f"{statistics.median(x[2] for x in runs[n][name][-repeats:]):.0f}" for n in (1, 2)]
            print(f"  round {r + 1} {name:22} 1×1 {pair[1]:6.2f}  2×1 {pair[2]:6.2f} samples/s  "
                  f"ratio {pair[2] / pair[1]:.3f}  least CPU share {'/'.join(shares)}  CPU ms/step {'/'.join(cpu)}  "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
            threads = reports[name].get("thread_cpu_ms_per_step")
            if threads:
                print(f"      2×1 rank 0 CPU ms per step by thread: {json.dumps(threads)}", flush=True)
    return runs[1], runs[2], ratios, reports


def summarize(settings: list[str], one: Samples, two: Samples, ratios: dict[str, list[float]],
              reports: dict) -> None:
    pooled = [x for name in settings for x in one[name]]   # 1×1 has no DDP: every setting's 1×1 is the same
    quiet_one = [v for v, share, _ in pooled if share >= QUIET_SHARE]
    best_one = max(v for v, _, _ in pooled)
    base_one = statistics.median(quiet_one) if quiet_one else None
    cpu_one = statistics.median(c for _, _, c in pooled)
    print(f"\n1×1 (all settings pooled): {len(quiet_one)}/{len(pooled)} quiet repeats, median "
          f"{spread(quiet_one)} samples/s; best {best_one:.2f}; CPU {cpu_one:.0f} ms per step")
    print(f"{'setting':22} {'2×1 quiet samples/s':>24} {'quiet':>6} {'2×1/1×1 quiet':>14} {'best/best':>10} "
          f"{'pairs (all repeats)':>24} {'CPU ms/step':>12} {'CPU ratio':>10}  wire buckets (MiB)")
    for name in settings:
        quiet = [v for v, share, _ in two[name] if share >= QUIET_SHARE]
        ratio = f"{statistics.median(quiet) / base_one:.3f}" if quiet and base_one else "–"
        cpu_two = statistics.median(c for _, _, c in two[name])
        wire = reports[name].get("ddp_wire_bucket_bytes") or []
        print(f"{name:22} {spread(quiet):>24} {len(quiet):>2}/{len(two[name]):<3} {ratio:>14} "
              f"{max(v for v, _, _ in two[name]) / best_one:10.3f} {spread(ratios[name]):>24} {cpu_two:12.0f} "
              f"{2 * cpu_one / cpu_two:10.3f}  {reports[name].get('ddp_wire_dtype')} "
              f"{[round(b / 2**20, 1) for b in wire]}")
    print(f"quiet: repeats in which every rank had >= {QUIET_SHARE:.0%} of its core (CPU time of all its threads "
          "over wall time; the machine is shared); samples/s median [min–max]. 2×1/1×1 quiet: median of the quiet "
          "2×1 repeats over the median of the quiet 1×1 repeats. best/best: fastest 2×1 repeat over the fastest "
          "1×1 repeat. pairs: each round's 2×1 run over the 1×1 run beside it, all repeats, median [min–max]. "
          "CPU ms/step: CPU time of all the busiest rank's threads (gloo's included) per step, median over repeats; "
          "CPU ratio: 2 × 1×1's over 2×1's, the scaling a machine with nothing else running would give if no rank "
          "ever waited for the other (an upper bound). Target: 2×1 / 1×1 >= 1.85.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 round, 3 settings, 3 repeats of 3 steps")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (each runs every setting)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=4, help="timed repeats per run")
    parser.add_argument("--setting", action="append", choices=list(SETTINGS), help="only this one (repeatable)")
    args = parser.parse_args()
    base, batch, measure = sweep_workload()
    warmup = int(measure.get("warmup_steps", 3))
    steps, repeats = (3, 3) if args.quick else (args.steps, args.repeats)
    rounds = 1 if args.quick else args.rounds
    settings = args.setting or list(QUICK_SETTINGS if args.quick else SETTINGS)
    print(f"small RetinaNet ({SWEEP.relative_to(REPO)}: precision {base.get('precision')}, local batch {batch}), "
          f"2 ranks × 1 thread over 1 × 1; {rounds} round(s), {warmup} warm-up + {repeats} × {steps} timed steps "
          f"per run; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    one, two, ratios, reports = run_rounds(settings, rounds, base, batch, warmup, steps, repeats)
    summarize(settings, one, two, ratios, reports)
    print(f"applied ({settings[-1]}, 2×1): {json.dumps(reports[settings[-1]]['applied'])}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
        sys.stdout.flush()
        os._exit(0)  # as orch's ranks do: gloo's threads can abort during interpreter teardown
    main()
