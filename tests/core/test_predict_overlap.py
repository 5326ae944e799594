"""The all-reduce hidden behind the backward pass across hosts, from when DDP's buckets became ready on one node.
Truths are timelines and rings worked by hand (2(n−1)·α + 2(n−1)/n·m·β per bucket), not the predictor's code."""

from __future__ import annotations

import math

import pytest

from orchestrator.core.machine.topology import NodeLink
from orchestrator.core.predict import comm
from orchestrator.core.predict.interval import basis_of, predict_cell
from orchestrator.core.predict.machine import MachineWhatIf
from orchestrator.core.predict.overlap import bucket_ready_s, exposed_s, ready_shares
from orchestrator.core.predict.step import Cell, Layout, StepModel

SOCKET_FIT = comm.LinkFit("socket", 100e-6, 1 / 1.5e9, 8, 0.0)
BUCKETS = tuple(comm.ddp_buckets(6 * 2**20))            # 1 MiB, then 5 MiB
TRUE = {"a_s": 2e-3, "c_s": 1e-4, "sigma": 0.15, "sigma_a": 0.6, "kappa": 0.0, "mu": 0.0, "rho": 1.3, "gamma": 1.0}
ACROSS = Layout(2, 1, 32, nodes=2, ranks_per_socket=1, link="nodes")
RATE, LATENCY_S = 1e10, 1e-4


def test_the_timeline_by_hand():
    # buckets ready at 2, 5 and 10 ms of a 10 ms compute, all-reducing for 4, 1 and 3 ms: 2-6, 6-7, 10-13
    assert exposed_s(0.010, (0.2, 0.5, 1.0), (0.004, 0.001, 0.003)) == pytest.approx(0.003)
    # the first runs 2-9 ms, so the second waits for it (9-10) and the third starts at 10: 3 ms exposed still
    assert exposed_s(0.010, (0.2, 0.5, 1.0), (0.007, 0.001, 0.003)) == pytest.approx(0.003)
    # ... and one that overruns the compute pushes the last out: 2-11, 11-12, 12-15: 5 ms
    assert exposed_s(0.010, (0.2, 0.5, 1.0), (0.009, 0.001, 0.003)) == pytest.approx(0.005)
    assert exposed_s(0.010, (1.0, 1.0), (0.002, 0.003)) == pytest.approx(0.005)       # nothing hides


def test_the_timeline_by_hand_where_gloo_has_no_core_of_its_own():
    # a 10 ms compute; bucket 0 ready at 20% for 4 ms, 2 of them CPU work, runs wholly inside the compute and
    # stretches it to 12 ms; bucket 1, ready at the end, runs 12-15 ms: 5 ms beyond the 10 (3 ms with a core of its own)
    assert exposed_s(0.010, (0.2, 1.0), (0.004, 0.003), (0.002, 0.001)) == pytest.approx(0.005)
    assert exposed_s(0.010, (0.2, 1.0), (0.004, 0.003)) == pytest.approx(0.003)
    # one bucket ready at 80% of the compute's end E for 4 ms, 2 of them CPU, spread evenly over the bucket: the
    # part before E is E − 0.8·E, so the compute steals 2·0.2·E/4 = 0.1·E and E = 10 ms + 0.1·E = 11.11 ms; the
    # bucket ends at 0.8·E + 4 ms = 12.89 ms
    end = 0.010 / 0.9
    assert exposed_s(0.010, (0.8,), (0.004,), (0.002,)) == pytest.approx(0.8 * end + 0.004 - 0.010, rel=1e-9)
    assert exposed_s(0.010, (1.0,), (0.004,), (0.004,)) == pytest.approx(0.004)   # after the compute: all of it


def test_buckets_are_ready_when_their_last_gradient_is():
    # gradients (seconds, bytes) as the hooks saw them, out of order; buckets of 300 and 500 bytes
    grads = [(0.9, 100), (0.1, 200), (0.4, 100), (0.7, 300), (0.8, 100)]
    assert bucket_ready_s(grads, [300, 500]) == [0.4, 0.9]
    assert ready_shares([0.4, 0.9]) == pytest.approx([0.4 / 0.9, 1.0])
    assert bucket_ready_s(grads, [300, 5000]) == [0.4, 0.9]      # bytes that never add up: the last gradient's


def _basis(ready):
    model = StepModel(TRUE, {"socket": SOCKET_FIT}, BUCKETS)
    lays = [Layout(r, 1, b, 1, r, "socket" if r > 1 else None) for r in (1, 2) for b in (16, 32, 64)]
    cells = [Cell(lay, model.samples_per_s(lay), cv=0.01) for lay in lays]
    return basis_of(cells, {"socket": SOCKET_FIT}, BUCKETS, None, {}, bucket_ready=ready)


def test_a_bucket_ready_early_hides_its_all_reduce_across_hosts_and_one_ready_last_does_not():
    apart = MachineWhatIf(node_link=NodeLink(RATE, LATENCY_S))
    late = predict_cell(_basis((1.0, 1.0)), ACROSS, apart)
    early = predict_cell(_basis((0.1, 1.0)), ACROSS, apart)
    # the first bucket's ring over the stated link, by hand: α the latency plus the software's 100 µs per step, β the
    # wire at Gloo's central efficiency √(0.49 · 0.98) (slower than the software's 1.5 GB/s at 10 Gbit/s)
    efficiency = math.sqrt(0.49 * 0.98)
    first = 2 * (2 - 1) * (LATENCY_S + 100e-6) + 2 * (2 - 1) / 2 * BUCKETS[0] * 8 / (RATE * efficiency)
    compute = 32 / predict_cell(_basis(()), Layout(1, 1, 32)).value
    assert 0.1 * compute + first < compute            # the first bucket's all-reduce ends inside the compute
    step_late, step_early = ACROSS.global_batch / late.value, ACROSS.global_batch / early.value
    assert step_late - step_early == pytest.approx(first, rel=1e-6)
    assert any("as they became ready on one node, the first at 10% of the last" in w for w in (early.high_why,))
    assert early.low == pytest.approx(late.low)       # the low end hides nothing, measured or not
    assert early.low < early.value < early.high


def test_without_a_measured_cell_the_stated_assumption_remains_and_is_said():
    p = predict_cell(_basis(()), ACROSS, MachineWhatIf(node_link=NodeLink(RATE, LATENCY_S)))
    assert any("no multi-rank cell measured when its buckets became ready" in n for n in p.notes)
    wrong_count = predict_cell(_basis((0.5,)), ACROSS, MachineWhatIf(node_link=NodeLink(RATE, LATENCY_S)))
    assert wrong_count.value == pytest.approx(p.value)   # shares of other buckets than the step's: not used


def test_nodes_emulated_on_one_host_hide_only_the_wait_on_the_wire():
    """A rank waiting on the wire leaves its core to the backward pass on one host too, but a node emulated there
    has no core for Gloo's own work: a bucket ready at 10% of the compute shortens the step by its ring over the
    stated link less its ring at the software's speed (the in-node calibration), both worked by hand as above."""
    shared = MachineWhatIf(node_link=NodeLink(RATE, LATENCY_S, shared_host=True))
    late = predict_cell(_basis((1.0, 1.0)), ACROSS, shared)
    early = predict_cell(_basis((0.1, 1.0)), ACROSS, shared)
    efficiency = math.sqrt(0.49 * 0.98)
    first = 2 * (2 - 1) * (LATENCY_S + 100e-6) + 2 * (2 - 1) / 2 * BUCKETS[0] * 8 / (RATE * efficiency)
    software = 2 * (2 - 1) * 100e-6 + 2 * (2 - 1) / 2 * BUCKETS[0] / 1.5e9
    assert 0 < software < first
    saved = ACROSS.global_batch / late.value - ACROSS.global_batch / early.value
    assert saved == pytest.approx(first - software, rel=1e-6)
    apart = MachineWhatIf(node_link=NodeLink(RATE, LATENCY_S))
    assert ACROSS.global_batch / predict_cell(_basis((0.1, 1.0)), ACROSS, apart).value == pytest.approx(
        ACROSS.global_batch / early.value - software, rel=1e-6)    # separate hosts: Gloo's work hides too
    assert any("from when it became ready" in n and "only the wait on the wire hides" in n for n in early.notes)
    assert not any("only the wait on the wire hides" in n
                   for n in predict_cell(_basis((0.1, 1.0)), ACROSS, apart).notes)
    assert early.low == pytest.approx(late.low)
