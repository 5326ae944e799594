"""The measurement protocols, run inside a rank process: throughput, train-to-target, GEMM peak.

Throughput protocol (why each piece is there):
- warm-up steps first, excluded: the first steps pay for allocator growth, oneDNN primitive creation and
  DDP bucket setup;
- nothing else runs in the rank before or during the timed region: FLOPs are counted, and the all-reduce
  is checked, after it;
- a barrier before and after each timed repeat, so every rank's clock covers the same steps;
- the timed region holds only training steps (forward, backward with DDP's all-reduce, optimizer step)
  on batches already in memory (or from the workload's loader, whose wait is timed apart);
- each rank reports its own wall time per repeat; the driver divides by the slowest rank's.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from orchestrator.core.planning.probe import held_batches
from orchestrator.core.profile.flop_count import FLOPS_RULE
from orchestrator.run.job import ConvergenceTask, Phase, ProgressWriter, RankJob, ThroughputTask
from orchestrator.run.rank.overlap import bucket_ready_share
from orchestrator.run.reports import ConvergenceReport, ThroughputReport

if TYPE_CHECKING:
    from orch.workload import DdpOptions, Trainer
    from orchestrator.core.measured.records import EdgeSection


def make_step(module: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Callable[[tuple], torch.Tensor]:
    def step(batch: tuple) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = module(*batch)
        loss.backward()
        optimizer.step()
        return loss

    return step


def wrap_ddp(module: torch.nn.Module, options: DdpOptions | None = None, *,
             noise_scale: bool = False) -> torch.nn.Module:
    """`module` in DistributedDataParallel with the workload's switches (`ddp.wrap`), without DDP's start-up
    broadcast of every parameter and buffer from rank 0 when `same_on_every_rank` shows the ranks hold the
    same values already (every workload builds its model from the run's seed). Otherwise DDP checks the
    shapes and broadcasts, as by default. The broadcast is a start-up cost only: what DDP does from the
    first step on is the same either way. `noise_scale`: with the gradient noise scale's hook (`ddp.wrap`)."""
    from orch.workload import DdpOptions  # here: peak and all-reduce ranks import no workload code
    from orchestrator.run.rank import ddp

    return ddp.wrap(module, options or DdpOptions(), init_sync=not same_on_every_rank(module),
                    noise_scale=noise_scale)


def same_on_every_rank(module: torch.nn.Module) -> bool:
    """Whether every rank of the default group holds the same parameters and buffers: the tensor count and
    total size first, then two float64 checksums per tensor (its sum, and its dot product with its element
    positions, which a permutation changes), compared by a MIN and a MAX all-reduce. A NaN anywhere
    counts as a difference."""
    tensors = [t.detach() for t in itertools.chain(module.parameters(), module.buffers())]
    sizes = torch.tensor([len(tensors), sum(t.numel() for t in tensors)], dtype=torch.float64)
    if not _equal_everywhere(sizes):
        return False
    if not tensors:
        return True
    positions = torch.arange(max(t.numel() for t in tensors), dtype=torch.float64)
    sums = []
    for t in tensors:
        flat = t.reshape(-1).double()
        sums += [flat.sum(), flat.dot(positions[:flat.numel()])]
    return _equal_everywhere(torch.stack(sums))


def _equal_everywhere(values: torch.Tensor) -> bool:
    low, high = values.clone(), values.clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    return torch.equal(low, high)


def _cycle_epochs(batches: Callable[[int], Iterator[tuple]]) -> Iterator[tuple]:
    for epoch in itertools.count():
        yield from batches(epoch)


def count_train_flops(step: Callable[[tuple], Any], batch: tuple) -> float | None:
    """FLOPs of one training step by orch's counter (run.rank.flops: torch's FlopCounterMode, convolutions over the
    taps inside the input); None where it cannot follow the step (best effort: that must not fail the trial)."""
    from orchestrator.run.rank.flops import count_flops

    return count_flops(lambda: step(batch))[0]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile, q in [0, 100]."""
    ordered = sorted(values)
    index = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return ordered[index]


def measure_throughput(job: RankJob, trainer: Trainer, module: torch.nn.Module,
                       status: ProgressWriter) -> ThroughputReport:
    step = make_step(module, trainer.optimizer)
    source = _cycle_epochs(trainer.batches)
    steps = job.task_as(ThroughputTask).steps
    if steps.data == "memory":
        # Enough distinct batches that the step does not see the same tensors every time, few enough to
        # keep memory small; prepared before any timing (core.planning.probe.held_batches: the memory probe holds as
        # many, since they are part of the trial's peak).
        distinct = list(itertools.islice(source, held_batches(steps.data, steps.warmup, steps.timed)))
        source = itertools.cycle(distinct)

    status.update(phase=Phase.WARMUP, of=steps.repeats)
    for _ in range(steps.warmup):
        step(next(source))
        status.step()

    repeat_s, step_ms, wait_s = [], [], 0.0
    for repeat in range(1, steps.repeats + 1):
        status.update(phase=Phase.TIMING, repeat=repeat, force=True)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(steps.timed):
            t0 = time.perf_counter()
            batch = next(source)
            t1 = time.perf_counter()
            step(batch)
            t2 = time.perf_counter()
            wait_s += t1 - t0
            step_ms.append((t2 - t0) * 1e3)
            status.step()
        repeat_s.append(time.perf_counter() - start)
        dist.barrier()
    # After timing, never before: a step under FlopCounterMode left later steps ~4% slower
    # (benchmarks/bench_orch_vs_direct.py, 1 rank × 2 threads), so counting must not precede the measurement.
    flops = count_train_flops(step, next(source))
    check = allreduce_check(module, trainer, next(source)) if hasattr(module, "no_sync") else None
    sizes = gradient_sizes(module)
    ready = bucket_ready_share(step, module, source, sizes["ddp_bucket_bytes"]) if check is not None else None
    return ThroughputReport(allreduce_check=check, **sizes, ddp_bucket_ready_share=ready, repeat_s=repeat_s,
                            step_ms_median=statistics.median(step_ms), step_ms_p90=percentile(step_ms, 90),
                            data_wait_s=wait_s, timed_s=sum(repeat_s),
                            train_flops_per_sample=flops / job.local_batch if flops else None,
                            train_flops_rule=FLOPS_RULE if flops else None)


def gradient_sizes(module: Any) -> dict[str, Any]:
    """What the gradient all-reduce moves, for `orch predict`: the trainable parameters' bytes and dtype, and
    DDP's own bucket sizes when it is wrapped in DDP (its logging data, after the first step's bucket rebuild;
    in the gradients' dtype: `orchestrator.run.rank.ddp.wire_sizes` gives what a 16-bit hook puts on the wire)."""
    trained = [p for p in module.parameters() if p.requires_grad]
    grad_bytes = sum(p.numel() * p.element_size() for p in trained)
    gradient_dtype = str(trained[0].dtype).removeprefix("torch.") if trained else None
    buckets: list[int] | None = None
    if hasattr(module, "_get_ddp_logging_data"):
        try:  # a private API: best effort, the gradient bytes alone suffice
            data = module._get_ddp_logging_data()
            text = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
            buckets = [int(x) for x in str(text).replace(" ", "").split(",") if x] or None
        except Exception:
            buckets = None
    return {"gradient_bytes": int(grad_bytes), "gradient_dtype": gradient_dtype, "ddp_bucket_bytes": buckets}


def allreduce_timing(sizes_bytes: list[int], dtype_name: str, min_time_s: float = 0.05, min_reps: int = 5,
                     max_reps: int = 200, blocks: int = 3,
                     on_block: Callable[[], None] | None = None, group: Any = None) -> dict[str, Any]:
    """Time of one `dist.all_reduce` for each message size on this rank: back-to-back calls in a block
    (as DDP issues its buckets, and as OSU and nccl-tests time collectives: a lone call pays thread wake-ups
    that a training step does not), the block's mean per call, the median over `blocks` blocks. Every rank
    must make the same calls, so rank 0 picks each size's calls per block and broadcasts the count.
    `on_block` is called after each block: the rank's heartbeat for the watchdog. `group`: the process
    group to time (default: the default group)."""
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    element = torch.tensor([], dtype=dtype).element_size()
    medians = []
    for size in sizes_bytes:
        tensor = torch.ones(max(1, size // element), dtype=dtype)
        for _ in range(3):      # warm-up: connection set-up and buffer allocation
            dist.all_reduce(tensor, group=group)
        t0 = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        once_s = max(time.perf_counter() - t0, 1e-9)
        reps = torch.tensor([min(max_reps, max(min_reps, math.ceil(min_time_s / once_s)))])
        dist.broadcast(reps, src=0, group=group)
        per_call = []
        for _ in range(blocks):
            dist.barrier(group=group)
            t0 = time.perf_counter()
            for _ in range(int(reps.item())):
                dist.all_reduce(tensor, group=group)
            per_call.append((time.perf_counter() - t0) / int(reps.item()))
            if on_block:
                on_block()
        medians.append(statistics.median(per_call))
    return {"sizes_bytes": list(sizes_bytes), "time_s": medians, "dtype": dtype_name}


def _grad_sums(module: torch.nn.Module) -> list[float]:
    return [float(p.grad.double().sum()) if p.grad is not None else 0.0 for p in module.parameters()]


def allreduce_check(module: Any, trainer: Trainer, batch: tuple) -> dict[str, list[float]]:
    """Evidence that gradients really are all-reduced: one step's gradient sums per parameter, computed
    locally (DDP's `no_sync`) and synchronized. After the all-reduce every rank holds the same gradients,
    equal to the mean of the ranks' local ones. Runs after timing, so it never touches the measurement."""
    optimizer = trainer.optimizer
    optimizer.zero_grad(set_to_none=True)
    with module.no_sync():
        module(*batch).backward()
    local = _grad_sums(module)
    optimizer.zero_grad(set_to_none=True)
    module(*batch).backward()
    synced = _grad_sums(module)
    optimizer.zero_grad(set_to_none=True)
    return {"local_grad_sums": local, "synced_grad_sums": synced}


def _metric(scores: dict[str, float], metric: str) -> float:
    if metric not in scores:
        from orch.workload import WorkloadError

        raise WorkloadError(f"the evaluation returned {sorted(scores) or 'no metric'}, not the convergence target's "
                            f"metric {metric!r}: the workload's `metrics` must name what its evaluate() returns")
    return float(scores[metric])


def _evaluate(trainer: Trainer, metric: str) -> float:
    """The metric, the same on every rank: shared by the ranks where the trainer supports it (each infers its
    share, rank 0 scores them together), else computed by rank 0 alone; rank 0 broadcasts the verdict."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    shard = trainer.evaluate_shard(rank, world_size) if world_size > 1 else None
    if shard is not None:
        shards: list[Any] | None = [None] * world_size if rank == 0 else None
        dist.gather_object(shard, shards, dst=0)
        value = _metric(trainer.score_shards(shards), metric) if shards is not None else 0.0
    else:
        value = _metric(trainer.evaluate(), metric) if rank == 0 else 0.0
    verdict = torch.tensor([value], dtype=torch.float64)
    dist.broadcast(verdict, src=0)
    return float(verdict.item())


def train_to_target(job: RankJob, trainer: Trainer, module: torch.nn.Module,
                    status: ProgressWriter) -> ConvergenceReport:
    """Train from scratch until the metric reaches the target (the verdict is broadcast from rank 0, so
    every rank stops at the same step) or until max_epochs."""
    from orchestrator.core.measured.noise_scale import every_steps
    from orchestrator.run.rank.noise_scale import NoiseScale

    conv = job.task_as(ConvergenceTask).settings
    steps_per_epoch = trainer.steps_per_epoch()
    if steps_per_epoch == 0:
        raise ValueError(f"an epoch has no full batch: global batch {conv.global_batch} exceeds the data")
    noise = NoiseScale(module, trainer.optimizer, world=dist.get_world_size(), local_batch=job.local_batch,
                       every=every_steps(steps_per_epoch))
    step = noise.step
    eval_every_steps = max(1, round(conv.eval_every_epochs * steps_per_epoch))
    max_steps = math.ceil(conv.max_epochs * steps_per_epoch)
    probe_at = edge_step(conv.warmup_epochs, steps_per_epoch) if conv.edge != "none" else None
    edge = None
    curve: list[list[float]] = []
    reached_at, steps_done, lr = None, 0, None
    started = time.perf_counter()
    status.update(phase=Phase.TRAINING, of=math.ceil(conv.max_epochs), force=True)
    for epoch in itertools.count():
        for batch in trainer.batches(epoch):
            lr = conv.schedule.at(steps_done / steps_per_epoch)
            if steps_done == probe_at:
                edge = _probe_edge(job, trainer, conv.edge, conv.schedule.at(conv.max_epochs),
                                   steps_done / steps_per_epoch, status)
                started += edge.probe_s or 0.0        # the probe is not training time
            for group in trainer.optimizer.param_groups:
                group["lr"] = lr
            step(batch)
            steps_done += 1
            status.step(repeat=epoch + 1)
            if steps_done % steps_per_epoch == 0:
                noise.epoch_end(steps_done / steps_per_epoch)
            if steps_done % eval_every_steps == 0 or steps_done == max_steps:
                status.update(phase=Phase.EVALUATING)
                value = _evaluate(trainer, conv.metric)
                epochs = steps_done / steps_per_epoch
                curve.append([round(epochs, 6), value])
                status.update(phase=Phase.TRAINING, metric=value)
                if value >= conv.target:
                    reached_at = epochs
            if reached_at is not None or steps_done >= max_steps:
                break
        if reached_at is not None or steps_done >= max_steps:
            break
    epochs_run = steps_done / steps_per_epoch
    return ConvergenceReport(converged=reached_at is not None, epochs_to_target=reached_at,
                             epochs_run=epochs_run, steps_per_epoch=steps_per_epoch, curve=curve,
                             lr=lr, train_s=time.perf_counter() - started, noise_scale=noise.section(epochs_run),
                             edge=edge)


def edge_step(warmup_epochs: float, steps_per_epoch: int) -> int:
    """The step the edge is probed at: the end of the warm-up (the rate at its peak from there), else a quarter of
    an epoch in (past the first steps' transient), never past half an epoch (small batches converge early)."""
    return max(1, round(min(warmup_epochs or 0.25, 0.5) * steps_per_epoch))


def _probe_edge(job: RankJob, trainer: Trainer, mode: str, rate: float, at_epoch: float,
                status: ProgressWriter) -> EdgeSection:
    """The stability edge at this point of the run (run.rank.edge), every rank at once; the heartbeat keeps the
    watchdog fed through the probe's steps (each counts as a step: progress)."""
    from orchestrator.run.rank import edge

    status.update(phase=Phase.TRAINING, force=True)
    return edge.probe(trainer, mode=mode, rate=rate, at_epoch=at_epoch, local_batch=job.local_batch,
                      world=dist.get_world_size(), heartbeat=lambda: status.step())


# A GEMM peak multiplies square matrices of at most GEMM_MAX_SIZE, and smaller ones where one matmul would take
# longer than GEMM_MATMUL_S: a CPU that emulates bf16 multiplies 30-65× slower (a 2048² bf16 matmul took ~14 s
# on an AVX2-only core), and a peak must not look like a hang. On CPUs with native bf16 or in fp32 the size
# stays 2048 (a 2048² fp32 matmul is ~0.2 s on one core of 100 GFLOP/s).
GEMM_MAX_SIZE, GEMM_MIN_SIZE, GEMM_SIZE_STEP = 2048, 256, 128
GEMM_MATMUL_S = 0.5


def gemm_size(dtype: torch.dtype, matmul_s: float = GEMM_MATMUL_S) -> int:
    """The largest square size (a multiple of GEMM_SIZE_STEP, at most GEMM_MAX_SIZE) whose matmul takes about
    `matmul_s` on this rank's threads, from one timed GEMM_MIN_SIZE matmul."""
    n = GEMM_MIN_SIZE
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    torch.mm(a, b)
    t0 = time.perf_counter()
    torch.mm(a, b)
    rate = 2 * n**3 / max(time.perf_counter() - t0, 1e-9)
    fits = (rate * matmul_s / 2) ** (1 / 3)
    return int(min(GEMM_MAX_SIZE, max(GEMM_MIN_SIZE, fits // GEMM_SIZE_STEP * GEMM_SIZE_STEP)))


def gemm_peak(threads: int, precision: str, size: int | None = None, seconds: float = 2.0,
              barrier: Callable[[], None] | None = None,
              on_matmul: Callable[[], None] | None = None) -> dict[str, Any]:
    """This rank's GEMM rate on its cores: square matmuls (MKL/oneDNN GEMM is as close to peak as PyTorch gets
    on CPU) timed for `seconds`, of `size` (default: `gemm_size`, so that a slow CPU's matmul stays short).
    `on_matmul` is called after each one: the rank's heartbeat, so that the watchdog sees progress.

    With `barrier` (all ranks of a layout at once), the timed window starts and ends with it, so every rank
    multiplies while its neighbours do: memory bandwidth, caches and the power budget are shared as in the
    trial. `gflops` comes from the median matmul time, which a rank's last matmul (run after the others
    stopped) cannot move; `best_gflops` from the fastest one.
    """
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    size = size or gemm_size(dtype)
    a = torch.randn(size, size, dtype=dtype)
    b = torch.randn(size, size, dtype=dtype)
    for _ in range(2):
        torch.mm(a, b)
        if on_matmul:
            on_matmul()
    if barrier:
        barrier()
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < 3 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - t0)
        if on_matmul:
            on_matmul()
    if barrier:
        barrier()
    flop = 2 * size**3
    return {"precision": precision, "gflops": flop / statistics.median(times) / 1e9,
            "best_gflops": flop / min(times) / 1e9, "gemm_size": size, "threads": threads, "matmuls": len(times)}
