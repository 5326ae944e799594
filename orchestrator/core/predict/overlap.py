"""How much of a step's all-reduce DDP hides behind the backward pass, from when its buckets became ready. Pure.

DDP's reducer launches a bucket's all-reduce as soon as the bucket fills, while the backward pass goes on
computing the gradients of earlier layers; Gloo runs the buckets' all-reduces one after another, in that order.
A rank measured on one node records when each bucket became ready in its step (`run.rank.overlap`), as a share
of the time the last one did (the end of the backward pass). Across hosts the same shares of the rank's compute
place each bucket's all-reduce in time (the optimizer's step, after the backward, is counted as compute before
the last bucket: buckets placed that much later, so less hidden), and the timeline says how much of the
all-reduce is left after the compute ends:

>>> round(exposed_s(1.0, (0.5, 1.0), (0.2, 0.3)), 6)   # bucket 0 runs 0.5-0.7 s, bucket 1 from 1.0 s: 0.3 s exposed
0.3
>>> round(exposed_s(1.0, (0.5, 1.0), (0.6, 0.3)), 6)   # bucket 0 ends at 1.1 s, bucket 1 waits for it
0.4
>>> bucket_ready_s([(0.30, 400), (0.20, 600), (0.45, 1000)], [1000, 1000])   # by cumulative bytes, in time order
[0.3, 0.45]
"""

from __future__ import annotations

from collections.abc import Sequence

# Steps a multi-rank throughput rank runs after timing to note when its buckets become ready (run.rank.overlap);
# the ETA counts them (core.execution.eta).
READY_STEPS = 3


def exposed_s(compute_s: float, ready_shares: Sequence[float], bucket_s: Sequence[float],
              cpu_s: Sequence[float] = ()) -> float:
    """The seconds a step takes beyond `compute_s`: bucket i ready at ready_shares[i] × the compute's end,
    all-reduced for bucket_s[i] once it is ready and the bucket before it is done. `cpu_s[i]` (at most bucket_s[i])
    is the CPU work within bucket i where Gloo has no core of its own: the part of it that runs before the compute
    ends takes that time from the compute, which ends later (found by fixed-point iteration: the stolen time is
    bounded by the CPU work, and grows with the compute's end more slowly than the end itself).

    >>> round(exposed_s(1.0, (0.5, 1.0), (0.2, 0.3), (0.1, 0.1)), 6)   # bucket 0's 0.1 s of CPU delays the compute
    0.4
    """
    cpu = list(cpu_s) or [0.0] * len(bucket_s)
    end, finish = compute_s, 0.0
    for _ in range(100):
        finish, stolen = 0.0, 0.0
        for share, cost, work in zip(ready_shares, bucket_s, cpu, strict=True):
            start = max(finish, share * end)
            finish = start + cost
            if cost > 0:
                stolen += work * max(0.0, min(finish, end) - start) / cost
        if abs(compute_s + stolen - end) < 1e-12:
            break
        end = compute_s + stolen
    return max(0.0, max(end, finish) - compute_s)


def bucket_ready_s(gradients: Sequence[tuple[float, int]], bucket_bytes: Sequence[int]) -> list[float]:
    """When each DDP bucket became ready, from (seconds, bytes) of each gradient: DDP fills its buckets in the
    order the gradients become ready, so bucket i is ready when the gradient that completes the bytes of buckets
    0..i is. A bucket the gradients do not complete (bytes that do not add up) is ready with the last gradient."""
    ordered = sorted(gradients)
    out, filled, index = [], 0, 0
    need = 0
    for size in bucket_bytes:
        need += size
        while index < len(ordered) and filled < need:
            filled += ordered[index][1]
            index += 1
        out.append(ordered[index - 1][0] if index else 0.0)
    return out


def ready_shares(ready_s: Sequence[float]) -> list[float]:
    """Each bucket's ready time over the last bucket's (the end of the backward pass); [] without a positive one.

    >>> ready_shares([0.3, 0.45, 0.6])
    [0.5, 0.75, 1.0]
    """
    last = max(ready_s, default=0.0)
    return [t / last for t in ready_s] if last > 0 else []
