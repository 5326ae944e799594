"""Every rejection reason, with its numbers in the message; several reasons at once; agreement with placement."""

from __future__ import annotations

import pytest

from orchestrator.core.machine.placement import place
from orchestrator.core.planning.constraints import BACKEND, CORES, MEMORY, PACKING, SPANS_SOCKETS, Rules, check
from orchestrator.core.planning.grid import powers_of_two_up_to
from orchestrator.core.planning.trial import Trial

from hand_topologies import ALL, GIB, cluster_4x2s28c, compact, detailed, emulated_2s1c, xeon_2s28c, xeon_2s28c_smt


def codes(reasons) -> list[str]:
    return [r.code for r in reasons]


def only(reasons, code: str) -> str:
    assert codes(reasons) == [code], reasons
    return reasons[0].message


# --- spans_sockets -----------------------------------------------------------------------------------------

def test_rank_spanning_sockets():
    message = only(check(Trial(1, 56, 1), xeon_2s28c(), Rules()), SPANS_SOCKETS)
    assert message == ("a rank would span sockets: 56 threads > 28 physical cores (hyperthreads not counted) "
                       "per socket")


def test_rank_spanning_sockets_counts_ccl_worker_cores():
    message = only(check(Trial(1, 28, 1), xeon_2s28c(), Rules(ccl_workers=1)), SPANS_SOCKETS)
    assert message == ("a rank would span sockets: 28 threads + 1 oneCCL worker core(s) = 29 cores > 28 "
                       "physical cores (hyperthreads not counted) per socket")


def test_hyperthreads_double_the_socket():
    assert check(Trial(1, 56, 1), xeon_2s28c_smt(), Rules(hyperthreads=True)) == ()
    message = only(check(Trial(1, 57, 1), xeon_2s28c_smt(), Rules(hyperthreads=True)), SPANS_SOCKETS)
    assert message == "a rank would span sockets: 57 threads > 56 hardware threads per socket"


def test_emulated_two_sockets_of_one_core():
    topology = emulated_2s1c()
    assert check(Trial(2, 1, 1), topology, Rules()) == ()
    assert "2 threads > 1 physical cores" in only(check(Trial(1, 2, 1), topology, Rules()), SPANS_SOCKETS)


# --- cores -------------------------------------------------------------------------------------------------

def test_ranks_times_threads_over_the_cores_of_one_node():
    message = only(check(Trial(4, 28, 1), xeon_2s28c(), Rules()), CORES)
    assert message == "4 ranks × 28 cores = 112 > 56 physical cores (hyperthreads not counted) on 1 node(s)"


def test_ranks_times_threads_over_one_node_fits_a_cluster_but_not_over_all_nodes():
    cluster = cluster_4x2s28c()
    assert check(Trial(4, 28, 1), cluster, Rules()) == ()      # 112 cores: two nodes
    message = only(check(Trial(9, 28, 1), cluster, Rules()), CORES)
    assert message == "9 ranks × 28 cores = 252 > 224 physical cores (hyperthreads not counted) on 4 node(s)"


def test_cores_counted_with_ccl_workers_and_hyperthreads():
    message = only(check(Trial(8, 13, 1), xeon_2s28c_smt(), Rules(hyperthreads=True, ccl_workers=2)), CORES)
    assert message == "8 ranks × 15 cores = 120 > 112 hardware threads on 1 node(s)"


# --- packing -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cores_per_socket, ranks, threads, holds", [
    (14, 3, 8, 1),    # 24 <= 28 cores, but a 14-core socket holds one 8-core rank
    (16, 3, 10, 1),   # 30 <= 32 cores
    (28, 5, 11, 2),   # 55 <= 56 cores, 2 + 2 slots
])
def test_packing_failure_when_cores_suffice_but_sockets_fragment(cores_per_socket, ranks, threads, holds):
    topology = compact(sockets=2, cores_per_socket=cores_per_socket, memory_gib=64)
    assert ranks * threads <= topology.usable_cores(False)
    message = only(check(Trial(ranks, threads, 1), topology, Rules()), PACKING)
    assert message == (f"ranks cannot be packed inside sockets: a socket of {cores_per_socket} cores holds "
                       f"{holds} rank(s) of {threads} cores, {2 * holds} in all, fewer than {ranks} ranks")
    assert place(topology, ranks, threads) is None


def test_packing_names_every_socket_size_of_a_heterogeneous_cluster():
    topology = detailed([{"memory_mib": 4096, "sockets": [[0, 1, 2]]},
                         {"memory_mib": 4096, "sockets": [[0, 1, 2, 3, 4]]}])
    assert check(Trial(3, 2, 1), topology, Rules()) == ()
    message = only(check(Trial(4, 2, 1), topology, Rules()), PACKING)
    assert message == ("ranks cannot be packed inside sockets: a socket of 3/5 cores holds 1/2 rank(s) of 2 "
                       "cores, 3 in all, fewer than 4 ranks")


# --- memory ------------------------------------------------------------------------------------------------

def test_one_rank_bigger_than_a_node():
    # 192 GiB = 196,608 MiB; × 0.9 = 176,947 MiB
    message = only(check(Trial(1, 7, 1), xeon_2s28c(), Rules(rank_memory_mib=200_000)), MEMORY)
    assert message == ("one rank needs 200,000 MiB > 196,608 MiB node memory × headroom 0.9 = 176,947 MiB")


def test_one_rank_over_headroom_but_under_the_node():
    message = only(check(Trial(1, 7, 1), xeon_2s28c(), Rules(rank_memory_mib=180_000)), MEMORY)
    assert "one rank needs 180,000 MiB > 196,608 MiB" in message


def test_ranks_times_memory_over_node_memory_times_headroom():
    rules = Rules(rank_memory_mib=50_000, memory_headroom=0.9)
    assert check(Trial(3, 14, 1), xeon_2s28c(), rules) == ()    # 150,000 <= 176,947
    message = only(check(Trial(4, 14, 1), xeon_2s28c(), rules), MEMORY)
    assert message == "4 ranks × 50,000 MiB exceed memory: the node(s) hold 3 rank(s) within 0.9 × their memory"


def test_memory_over_several_nodes():
    rules = Rules(rank_memory_mib=50_000)
    assert check(Trial(12, 1, 1), cluster_4x2s28c(), rules) == ()
    message = only(check(Trial(13, 1, 1), cluster_4x2s28c(), rules), MEMORY)
    assert "13 ranks × 50,000 MiB exceed memory: the node(s) hold 12 rank(s)" in message


def test_headroom_is_applied():
    assert check(Trial(4, 1, 1), xeon_2s28c(), Rules(rank_memory_mib=49_152, memory_headroom=1.0)) == ()
    assert codes(check(Trial(4, 1, 1), xeon_2s28c(), Rules(rank_memory_mib=49_152, memory_headroom=0.99))) == [
        MEMORY]


def test_explicit_budget_smaller_than_the_estimate():
    rules = Rules(rank_memory_mib=2_000, memory_budget_mib=1_000)
    message = only(check(Trial(1, 1, 4), xeon_2s28c(), rules), MEMORY)
    assert message == "a rank needs ~2,000 MiB at local batch 4, more than memory_budget_mib 1,000"


def test_explicit_budget_larger_than_the_estimate_is_what_must_fit():
    rules = Rules(rank_memory_mib=1_000, memory_budget_mib=60_000)
    assert check(Trial(2, 1, 1), xeon_2s28c(), rules) == ()
    message = only(check(Trial(3, 1, 1), xeon_2s28c(), rules), MEMORY)
    assert message.startswith("3 ranks × 60,000 MiB exceed memory: the node(s) hold 2 rank(s)")


def test_cores_and_memory_fit_separately_but_not_on_the_same_nodes():
    # node a: plenty of memory, 2 two-core slots; node b: 8 slots but memory for one rank
    topology = detailed([{"name": "a", "memory_mib": 64 * GIB, "sockets": [[0, 1, 2, 3]]},
                         {"name": "b", "memory_mib": 4 * GIB, "sockets": [list(range(8)), list(range(8, 16))]}])
    rules = Rules(rank_memory_mib=3_000)
    message = only(check(Trial(6, 2, 1), topology, rules), MEMORY)
    assert message == "cores and memory together hold only 3 rank(s) of 2 cores and 3,000 MiB, fewer than 6"
    assert check(Trial(3, 2, 1), topology, rules) == ()
    assert place(topology, 6, 2, rank_memory_mib=3_000, memory_headroom=0.9) is None


# --- backend and several reasons ---------------------------------------------------------------------------

def test_backend_error_is_a_reason_for_every_point():
    rules = Rules(backend_error="backend ccl requested but oneccl_bindings_for_pytorch is not installed")
    message = only(check(Trial(1, 1, 1), xeon_2s28c(), rules), BACKEND)
    assert "oneccl_bindings_for_pytorch is not installed" in message


def test_several_reasons_at_once():
    rules = Rules(rank_memory_mib=50_000, backend_error="no ccl")
    reasons = check(Trial(16, 56, 1), xeon_2s28c(), rules)
    assert codes(reasons) == [SPANS_SOCKETS, CORES, MEMORY, BACKEND]
    assert reasons[0].message.endswith("56 threads > 28 physical cores (hyperthreads not counted) per socket")
    assert reasons[1].message.startswith("16 ranks × 56 cores = 896 > 56")
    assert reasons[2].message.startswith("16 ranks × 50,000 MiB exceed memory: the node(s) hold 3 rank(s)")
    assert reasons[3].message == "no ccl"


def test_packing_is_not_reported_on_top_of_a_core_shortage():
    topology = compact(sockets=2, cores_per_socket=28, memory_gib=8)
    assert codes(check(Trial(3, 18, 1), topology, Rules())) == [PACKING]          # 54 <= 56 cores
    assert codes(check(Trial(3, 20, 1), topology, Rules())) == [CORES]            # 60 > 56, 2 slots too
    assert codes(check(Trial(3, 30, 1), topology, Rules())) == [SPANS_SOCKETS, CORES]


# --- check and place agree over every grid -----------------------------------------------------------------

@pytest.mark.parametrize("name, build, ht", ALL, ids=[a[0] for a in ALL])
def test_check_passes_exactly_when_place_succeeds(name, build, ht):
    topology = build()
    cores = topology.usable_cores(ht)
    threads = sorted(set(powers_of_two_up_to(cores // len(topology.nodes))) | {3, 7, 14})
    for mem in (0.0, 30_000.0):
        for workers in (0, 1):
            rules = Rules(hyperthreads=ht, ccl_workers=workers, rank_memory_mib=mem, memory_headroom=0.9)
            for ranks in sorted(set(powers_of_two_up_to(cores)) | {3, 5, 6, 7}):
                for t in threads:
                    feasible = check(Trial(ranks, t, 1), topology, rules) == ()
                    placed = place(topology, ranks, t, hyperthreads=ht, ccl_workers=workers, rank_memory_mib=mem,
                                   memory_headroom=0.9)
                    assert feasible == (placed is not None), (ranks, t, mem, workers)
