"""Per-rank, per-epoch batches of sample indices: torch's DistributedSampler semantics, used by every
workload so that shards are disjoint across ranks and reproducible from (seed, epoch)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import BatchSampler, Dataset, DistributedSampler


class _Sized(Dataset[int]):
    """A dataset of `n` samples known only by its size: all DistributedSampler needs to shard indices."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n


def shard_batches(num_samples: int, *, epoch: int, seed: int, rank: int, world_size: int,
                  local_batch: int) -> Iterator[torch.Tensor]:
    """Index tensors of `local_batch` samples for this rank. Every rank gets the same number of
    batches (the tail that would make ranks uneven is dropped), so collectives never wait on a rank
    that has run out of data."""
    sampler: DistributedSampler[int] = DistributedSampler(_Sized(num_samples), num_replicas=world_size, rank=rank,
                                                          shuffle=True, seed=seed, drop_last=True)
    sampler.set_epoch(epoch)
    for indices in BatchSampler(sampler, local_batch, drop_last=True):
        yield torch.tensor(indices, dtype=torch.long)


def batches_per_epoch(num_samples: int, world_size: int, local_batch: int) -> int:
    """How many batches `shard_batches` yields per epoch, without building them."""
    return (num_samples // world_size) // local_batch
