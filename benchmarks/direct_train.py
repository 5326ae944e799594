"""The reference for bench_orch_vs_direct.py: one rank of a plain data-parallel training loop, launched
directly (no Ray, no orch launcher, no watchdog), as a user would with torchrun-style environment variables
and numactl/taskset pinning. Deliberately independent of orch's measurement code: it builds the model and
data through the workload interface (so both sides train the same thing), then times its own loop.

    RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 OMP_NUM_THREADS=1 \\
        taskset -c 0 python benchmarks/direct_train.py classifier '{"hidden": 1024}' 64 5 50 3
Prints one JSON line (rank 0 only): the per-repeat wall times of the slowest rank.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from orch import decide_precision
from orch.workload import RankContext
from orchestrator.io.workload_finder import find_workload, parse_params


def main(workload_name: str, params_json: str, local_batch: int, warmup: int, steps: int, repeats: int) -> None:
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    workload = find_workload(workload_name).workload
    params, problems = parse_params(workload, json.loads(params_json))
    assert not problems, problems
    params = decide_precision(params)   # `auto` decided on this CPU, as orch's plan decides it for its ranks
    trainer = workload.build(params, RankContext(rank=rank, world_size=world, local_batch=local_batch, seed=0,
                                                 threads=torch.get_num_threads()))
    model = DistributedDataParallel(trainer.module) if world > 1 else trainer.module
    batches = []
    for batch in trainer.batches(0):
        batches.append(batch)
        if len(batches) == 16:
            break
    optimizer = trainer.optimizer

    def step(i: int) -> None:
        optimizer.zero_grad(set_to_none=True)
        model(*batches[i % len(batches)]).backward()
        optimizer.step()

    for i in range(warmup):
        step(i)
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        for i in range(steps):
            step(i)
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time
        times.append(float(elapsed))
    if rank == 0:
        print(json.dumps({"repeat_s": times, "global_batch": local_batch * world, "steps": steps}), flush=True)
    dist.barrier()  # leave together: a rank tearing down gloo while its peer still talks to it aborts
    dist.destroy_process_group()


if __name__ == "__main__":
    name, params, batch, warmup, steps, repeats = sys.argv[1:7]
    main(name, params, int(batch), int(warmup), int(steps), int(repeats))
    sys.stdout.flush()
    os._exit(0)  # as orch's ranks do: gloo's threads can abort during interpreter teardown
