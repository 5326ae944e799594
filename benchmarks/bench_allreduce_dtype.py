"""Does gloo's all-reduce cost the same per byte in bf16 as in fp32?

`orch predict` prices a bucket by the bytes it puts on the wire: half of them with a 16-bit `ddp_comm_hook`.
The sweep's all-reduce calibration runs in fp32, so bf16 buckets are priced at fp32's α and β. That is right
only if gloo moves and sums a byte of bf16 as fast as a byte of fp32 (it sums bf16 elementwise on the CPU,
twice the elements per byte). This times both side by side.

Two ranks, each pinned to its own core (cores 0 and 1, or both on core 0 on a 1-core machine), gloo over
loopback, as a sweep's `socket` calibration places them. For each message size, the same number of bytes in
fp32 and in bf16, interleaved: every round times both dtypes (order alternating by round), each time the
median of `--repeats` all-reduces between barriers, and the printed figure is the median over rounds (rank
0's view, which waits for the slower rank).

    python benchmarks/bench_allreduce_dtype.py [--rounds 5] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment_line, format_table  # noqa: E402

SIZES_MIB = (1, 4, 16, 64)


def _median_allreduce_s(tensor, repeats: int) -> float:
    import torch.distributed as dist

    dist.all_reduce(tensor)   # warm: gloo sets up its buffers for this size on first use
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _rank(rank: int, port: int, rounds: int, repeats: int, out) -> None:
    """One rank (torch.multiprocessing.spawn's entry): rank 0 puts its timings into `out`, a shared dict."""
    import torch
    import torch.distributed as dist

    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[rank % len(cores)]})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    for size_mib in SIZES_MIB:
        for round_index in range(rounds):
            order = list(dtypes) if round_index % 2 == 0 else list(reversed(dtypes))
            for name in order:
                dtype = dtypes[name]
                elements = size_mib * 2**20 // torch.tensor([], dtype=dtype).element_size()
                seconds = _median_allreduce_s(torch.ones(elements, dtype=dtype), repeats)
                if rank == 0:
                    out[(size_mib, name)] = [*out.get((size_mib, name), []), seconds]
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per size (default 5)")
    parser.add_argument("--repeats", type=int, default=7, help="all-reduces per timing, median (default 7)")
    args = parser.parse_args()
    import torch.multiprocessing as mp

    from orchestrator.run.driver.launcher import free_port

    with mp.Manager() as manager:
        shared = manager.dict()
        mp.spawn(_rank, args=(free_port(), args.rounds, args.repeats, shared), nprocs=2)
        timings = dict(shared)
    print(environment_line())
    rows = []
    for size_mib in SIZES_MIB:
        fp32, bf16 = statistics.median(timings[(size_mib, "fp32")]), statistics.median(timings[(size_mib, "bf16")])
        rows.append([f"{size_mib} MiB", f"{fp32 * 1e3:.1f}", f"{bf16 * 1e3:.1f}", f"{bf16 / fp32:.2f}"])
    print(format_table(["bytes", "fp32 ms", "bf16 ms (same bytes)", "bf16 ÷ fp32"], rows))


if __name__ == "__main__":
    main()
