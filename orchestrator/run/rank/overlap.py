"""When DDP's buckets become ready within a training step, for `orch predict`'s overlap of the all-reduce with the
backward pass across hosts (`core.predict.overlap`). Runs after timing, so its hooks never touch the measurement.
Imported inside rank processes only (it imports torch).

Each trainable parameter gets a post-accumulate-grad hook that notes when its gradient is ready; DDP's buckets
(`protocol.gradient_sizes`) then say when each bucket was (`core.predict.overlap.bucket_ready_s`). Per step, each
bucket's ready time over the last one's; the median over a few steps.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence

import torch

from orchestrator.core.predict.overlap import READY_STEPS, bucket_ready_s, ready_shares


def bucket_ready_share(step: Callable[[tuple], object], module: torch.nn.Module, batches: Iterator[tuple],
                       bucket_bytes: Sequence[int] | None, steps: int = READY_STEPS) -> list[float] | None:
    """Each DDP bucket's ready time over the last bucket's, the median over `steps` steps; None without DDP's
    buckets, or where no step had every gradient ready (a parameter the step does not use)."""
    params = [p for p in module.parameters() if p.requires_grad]
    if not bucket_bytes or not params:
        return None
    sizes = [p.numel() * p.element_size() for p in params]
    stamps: dict[int, float] = {}

    def noter(index: int) -> Callable[[torch.Tensor], None]:
        def note(_: torch.Tensor) -> None:
            stamps[index] = time.perf_counter()
        return note

    handles = [p.register_post_accumulate_grad_hook(noter(i)) for i, p in enumerate(params)]
    per_step = []
    try:
        for _ in range(steps):
            stamps.clear()
            start = time.perf_counter()
            step(next(batches))
            if len(stamps) == len(params):
                ready = bucket_ready_s([(stamps[i] - start, sizes[i]) for i in range(len(params))], bucket_bytes)
                if shares := ready_shares(ready):
                    per_step.append(shares)
    finally:
        for handle in handles:
            handle.remove()
    if not per_step:
        return None
    return [round(statistics.median(s[i] for s in per_step), 4) for i in range(len(bucket_bytes))]
