"""Throughput arithmetic over what the ranks report (pure)."""

from __future__ import annotations

import statistics


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


def summarize(global_batch: int, timed_steps: int, repeat_s_per_rank: list[list[float]]) -> dict[str, object]:
    per_repeat = repeat_throughputs(global_batch, timed_steps, repeat_s_per_rank)
    return {
        "samples_per_s": statistics.median(per_repeat),
        "samples_per_s_repeats": per_repeat,
        "cv": coefficient_of_variation(per_repeat),
        "timed_s_repeats": [max(r[k] for r in repeat_s_per_rank) for k in range(len(per_repeat))],
    }
