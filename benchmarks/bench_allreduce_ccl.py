"""In-node all-reduce, oneCCL against gloo: 2 ranks, 4 KiB to 64 MiB (the calibration's sizes), interleaved.

Why: gloo all-reduces over loopback TCP; oneCCL (with CCL_ATL_SHM=1) through shared memory. Every multi-rank
cell a gloo sweep measures pays gloo's cost, and `orch predict`'s fitted α, β and ρ absorb it.

Two rank processes, each pinned to its own core (taskset, the environment orch's launcher gives a rank with
backend ccl: `rank_environment`), each holding both process groups: ccl as the default group and a gloo
group beside it. For every round and message size both backends are timed back to back, in an order that
alternates, with the calibration's own timing (`protocol.allreduce_timing`: blocks of back-to-back calls,
the median block's mean per call) and the slower rank's time kept. So both backends see the same processes,
the same pinning and the same moment's load. Each backend's sum is checked once. Needs .venv-ipex with
the bindings (`bash scripts/setup.sh --ipex --ccl`).

`--ccl-workers 0` (default): oneCCL's worker thread shares its rank's core, as orch runs ccl_workers 0
(CCL_YIELD=sched_yield); `--ccl-workers 1` gives each rank a worker core of its own (4 CPUs).

    .venv-ipex/bin/python benchmarks/bench_allreduce_ccl.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import format_table  # noqa: E402

from orchestrator.core.execution.calibration import MESSAGE_BYTES  # noqa: E402
from orchestrator.run.driver.launcher import free_port, rank_environment  # noqa: E402

BACKENDS = ("gloo", "ccl")


def worker(rounds: int) -> None:
    """One rank: both groups, every size × round × backend timed; rank 0 prints the slower rank's times."""
    import oneccl_bindings_for_pytorch  # noqa: F401  (registers ccl)
    import torch
    import torch.distributed as dist

    from orchestrator.run.comm import communication_report
    from orchestrator.run.rank.protocol import allreduce_timing

    torch.set_num_threads(1)
    dist.init_process_group("ccl", rank=int(os.environ["RANK"]), world_size=2)
    groups = {"ccl": None, "gloo": dist.new_group(backend="gloo")}
    rank = dist.get_rank()
    for name, group in groups.items():   # the sum is right: 1 + 2 on every element
        t = torch.full((1024,), float(rank + 1))
        dist.all_reduce(t, group=group)
        if not bool((t == 3.0).all()):
            raise SystemExit(f"{name}: all-reduce of 1 and 2 gave {t[:4].tolist()}")
    times: dict[str, dict[int, list[float]]] = {b: {s: [] for s in MESSAGE_BYTES} for b in BACKENDS}
    for round_index in range(rounds):
        for k, size in enumerate(MESSAGE_BYTES):
            order = BACKENDS if (round_index + k) % 2 == 0 else BACKENDS[::-1]
            for name in order:
                mine = allreduce_timing([size], "fp32", group=groups[name])["time_s"][0]
                slowest = torch.tensor([mine], dtype=torch.float64)
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=groups["gloo"])
                times[name][size].append(float(slowest))
    if rank == 0:
        print(json.dumps({"times": times, "ccl": communication_report("ccl"), "torch": torch.__version__}),
              flush=True)
    dist.barrier(group=groups["gloo"])
    dist.destroy_process_group()


def launch(rounds: int, ccl_workers: int) -> dict:
    cpus = sorted(os.sched_getaffinity(0))
    need = 2 * (1 + ccl_workers)
    if len(cpus) < need:
        raise SystemExit(f"2 ranks with {ccl_workers} worker core(s) each need {need} CPUs; this process has "
                         f"{len(cpus)}")
    compute = cpus[:2]
    workers = cpus[2:2 + 2 * ccl_workers] if ccl_workers else compute   # 0: the worker shares its rank's core
    port, procs = free_port(), []
    for rank in range(2):
        env = rank_environment(dict(os.environ), cpus=[compute[rank]], ccl_cpus_on_node=workers, backend="ccl",
                               rank=rank, local_rank=rank, world_size=2, local_world_size=2,
                               master_addr="127.0.0.1", master_port=port)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        mine = [compute[rank], *workers[rank * ccl_workers:(rank + 1) * ccl_workers]]
        procs.append(subprocess.Popen(
            ["taskset", "-c", ",".join(map(str, mine)), sys.executable, __file__, "--worker", str(rounds)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO))
    outs = [p.communicate() for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"the ranks failed ({[p.returncode for p in procs]}):\n"
                         + "\n".join(err[-1500:] for _, err in outs))
    return json.loads(outs[0][0].strip().splitlines()[-1])


def size_text(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def table(times: dict[str, dict[str, list[float]]]) -> str:
    rows = []
    for size in MESSAGE_BYTES:
        gloo, ccl = (times[b][str(size)] for b in BACKENDS)
        g, c = statistics.median(gloo), statistics.median(ccl)
        rows.append([size_text(size), f"{g * 1e3:.3f} [{min(gloo) * 1e3:.3f}–{max(gloo) * 1e3:.3f}]",
                     f"{c * 1e3:.3f} [{min(ccl) * 1e3:.3f}–{max(ccl) * 1e3:.3f}]", f"{g / c:.1f}×",
                     f"{size / g / 1e9:.2f}", f"{size / c / 1e9:.2f}"])
    return format_table(["message", "gloo ms [min–max]", "ccl ms [min–max]", "gloo ÷ ccl", "gloo GB/s",
                         "ccl GB/s"], rows)


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per size (default 5)")
    parser.add_argument("--ccl-workers", type=int, choices=(0, 1), default=0,
                        help="oneCCL worker cores per rank: 0 shares the rank's core (default), 1 its own")
    args = parser.parse_args()
    load_before = os.getloadavg()
    report = launch(args.rounds, args.ccl_workers)
    load_after = os.getloadavg()
    ccl = report["ccl"]
    print(f"torch {report['torch']}, oneccl_bindings_for_pytorch {ccl['version']}, oneCCL {ccl['oneccl']}; "
          f"2 ranks, 1 core each; {' '.join(f'{k}={v}' for k, v in ccl['env'].items() if k != 'CCL_LOCAL_RANK')}")
    print(f"{args.rounds} interleaved rounds; slower rank's time per all-reduce (fp32), median [min–max] over "
          f"rounds; GB/s = message bytes ÷ median time; load average before {load_before[0]:.2f}, "
          f"after {load_after[0]:.2f} (1 min)")
    print(table(report["times"]))


if __name__ == "__main__":
    main()
