"""Grid expansion, including `auto` axes resolved against the topology."""

from __future__ import annotations

import pytest

from orchestrator.core.planning.grid import expand, powers_of_two_up_to
from orchestrator.core.planning.spec import GridSpec
from orchestrator.core.planning.trial import Trial

from hand_topologies import (
    cluster_4x2s28c,
    emulated_2s1c,
    heterogeneous,
    one_socket_2c,
    xeon_2s28c,
    xeon_2s28c_smt,
    xeon_8s28c,
)


@pytest.mark.parametrize("limit, expected", [
    (0, ()), (1, (1,)), (2, (1, 2)), (7, (1, 2, 4, 7)), (28, (1, 2, 4, 8, 16, 28)),
    (56, (1, 2, 4, 8, 16, 32, 56)), (64, (1, 2, 4, 8, 16, 32, 64)),
])
def test_powers_of_two_up_to(limit, expected):
    assert powers_of_two_up_to(limit) == expected


@pytest.mark.parametrize("build, hyperthreads, ranks, threads", [
    (one_socket_2c, False, (1, 2), (1, 2)),
    (emulated_2s1c, False, (1, 2), (1,)),
    (xeon_2s28c, False, (1, 2, 4, 8, 16, 32, 56), (1, 2, 4, 8, 16, 28)),
    (xeon_2s28c_smt, False, (1, 2, 4, 8, 16, 32, 56), (1, 2, 4, 8, 16, 28)),
    (xeon_2s28c_smt, True, (1, 2, 4, 8, 16, 32, 64, 112), (1, 2, 4, 8, 16, 32, 56)),
    (xeon_8s28c, False, (1, 2, 4, 8, 16, 32, 64, 128, 224), (1, 2, 4, 8, 16, 28)),
    (cluster_4x2s28c, True, (1, 2, 4, 8, 16, 32, 64, 128, 256, 448), (1, 2, 4, 8, 16, 32, 56)),
    # 2 + 8 + 6 physical cores; the biggest socket has 6
    (heterogeneous, False, (1, 2, 4, 8, 16), (1, 2, 4, 6)),
], ids=["1s2c", "emulated", "2s28c", "smt-off", "smt-on", "8s", "cluster-smt", "heterogeneous"])
def test_auto_axes(build, hyperthreads, ranks, threads):
    got_ranks, got_threads, trials = expand(GridSpec(local_batch=(4,)), build(), hyperthreads)
    assert (got_ranks, got_threads) == (ranks, threads)
    assert len(trials) == len(ranks) * len(threads)


def test_explicit_axes_are_sorted_and_trials_in_table_order():
    grid = GridSpec(ranks=(4, 1, 2), threads_per_rank=(14, 7), local_batch=(2, 1))
    ranks, threads, trials = expand(grid, xeon_2s28c(), False)
    assert ranks == (1, 2, 4) and threads == (7, 14)
    # local batch, then threads (rows), then ranks (columns)
    assert trials[:4] == (Trial(1, 7, 1), Trial(2, 7, 1), Trial(4, 7, 1), Trial(1, 14, 1))
    assert trials[-1] == Trial(4, 14, 2)
    assert len(trials) == 12


def test_mixed_auto_and_explicit():
    ranks, threads, _ = expand(GridSpec(ranks=(3,), local_batch=(1,)), xeon_2s28c(), False)
    assert ranks == (3,) and threads == (1, 2, 4, 8, 16, 28)


def test_trial_derived_values():
    trial = Trial(ranks=4, threads_per_rank=14, local_batch=2)
    assert (trial.global_batch, trial.cores, trial.key) == (8, 56, "r4-t14-b2")
