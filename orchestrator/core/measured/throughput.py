"""Throughput arithmetic over what the ranks report (pure)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


def repeat_throughputs(global_batch: int, timed_steps: int, repeat_s_per_rank: list[list[float]]) -> list[float]:
    """Samples per second for each repeat: global batch × timed steps ÷ the slowest rank's wall time.

    >>> repeat_throughputs(8, 10, [[1.0, 2.0], [1.25, 1.6]])
    [64.0, 40.0]
    """
    repeats = len(repeat_s_per_rank[0])
    if any(len(r) != repeats for r in repeat_s_per_rank):
        raise ValueError(f"ranks report different repeat counts: {[len(r) for r in repeat_s_per_rank]}")
    return [global_batch * timed_steps / max(r[k] for r in repeat_s_per_rank) for k in range(repeats)]


def coefficient_of_variation(values: list[float]) -> float:
    """Sample standard deviation over the mean; 0 for fewer than two values.

    >>> round(coefficient_of_variation([9.0, 10.0, 11.0]), 3)
    0.1
    """
    if len(values) < 2:
        return 0.0
    return statistics.stdev(values) / statistics.mean(values)


@dataclass(frozen=True, slots=True)
class RepeatSummary:
    """A trial's throughput over its repeats (the record's throughput section starts with these)."""

    samples_per_s: float               # median over repeats
    samples_per_s_repeats: list[float]
    cv: float
    timed_s_repeats: list[float]       # the slowest rank's time per repeat


def summarize(global_batch: int, timed_steps: int, repeat_s_per_rank: list[list[float]]) -> RepeatSummary:
    per_repeat = repeat_throughputs(global_batch, timed_steps, repeat_s_per_rank)
    return RepeatSummary(statistics.median(per_repeat), per_repeat, coefficient_of_variation(per_repeat),
                         [max(r[k] for r in repeat_s_per_rank) for k in range(len(per_repeat))])
