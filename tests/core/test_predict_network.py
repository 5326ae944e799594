"""The node link in a prediction: stated in the target's topology file, or calibrated across nodes; the bounds it
sets and its own held-out error.

Two kinds of test here. Fit tests generate a one-node sweep from orch's own step model (`one_node_cells`,
`true_across`) and check the fit recovers it and its intervals hold it: they test the machinery, not whether the
model holds (that is the ledger's: docs/validation.md). Arithmetic tests take their truth from the ring all-reduce
worked by hand (2(n−1)·α + 2(n−1)/n·m·β per bucket) and Gloo's measured efficiency, never from the predictor."""

from __future__ import annotations

import math

import pytest

from orchestrator.core.machine.topology import NodeLink, topology_from_data
from orchestrator.core.predict import comm
from orchestrator.core.predict.interval import basis_of, predict_cell
from orchestrator.core.predict.machine import MachineWhatIf
from orchestrator.core.predict.network import held_out_error, node_link_cost, stated_fit
from orchestrator.core.predict.step import Cell, Layout, StepModel, combine

SOCKET_FIT = comm.LinkFit("socket", 100e-6, 1 / 1.5e9, 8, 0.0)      # loopback: 12 Gbit/s, 100 µs per step
BUCKETS = tuple(comm.ddp_buckets(6 * 2**20))
TRUE = {"a_s": 2e-3, "c_s": 1e-4, "sigma": 0.15, "sigma_a": 0.6, "kappa": 0.0, "mu": 0.0, "rho": 1.3, "gamma": 1.0}
BATCHES = (16, 32, 64)
SIZES = tuple(4096 * 4**k for k in range(8))


def one_node_cells() -> list[Cell]:
    """1 and 2 ranks of one thread on one socket of one node, as a 1-node sweep measures them."""
    model = StepModel(TRUE, {"socket": SOCKET_FIT}, BUCKETS)
    lays = [Layout(r, 1, b, 1, r, "socket" if r > 1 else None) for r in (1, 2) for b in BATCHES]
    return [Cell(lay, model.samples_per_s(lay), cv=0.01) for lay in lays]


def true_across(rate_bits_per_s: float, batch: int, efficiency: float = 0.9) -> float:
    """samples/s of 2 ranks on 2 nodes over a link of this rate: compute, then the all-reduce at the wire's speed
    (or the software's where slower) at a Gloo efficiency of 0.9 (inside the measured 0.49-0.98), plus what sharing
    the cores adds to its CPU part, not overlapped (γ = 1)."""
    compute = TRUE["a_s"] + TRUE["c_s"] * batch
    wire = comm.LinkFit("nodes", 100e-6, max(8 / (rate_bits_per_s * efficiency), SOCKET_FIT.beta_s_per_byte), 0, 0.0)
    extra = (TRUE["rho"] - 1) * SOCKET_FIT.step_s(2, BUCKETS)
    return 2 * batch / combine(compute, wire.step_s(2, BUCKETS) + extra, 1.0)


def calibration(rate_bits_per_s: float, efficiency: float = 0.94) -> list[comm.Sample]:
    """A cross-node calibration of 2 ranks over the link, 3% noise either way."""
    return [comm.Sample("nodes", 2, m, (2e-4 + m * 8 / (rate_bits_per_s * efficiency)) * (1.03 if k % 2 else 0.97))
            for k, m in enumerate(SIZES)]


ACROSS = Layout(2, 1, 32, nodes=2, ranks_per_socket=1, link="nodes")


def test_a_topology_file_states_its_network_and_refuses_a_bad_one():
    base = {"nodes": 4, "sockets": 2, "cores_per_socket": 28, "memory_gib": 192}
    topology, problems = topology_from_data({**base, "network": {"bandwidth_gbit_per_s": 25, "latency_us": 2}})
    assert problems == [] and topology.link == NodeLink(25e9, 2e-6)
    assert topology_from_data(topology.to_dict())[0].link == topology.link      # the detailed form keeps it
    _, problems = topology_from_data({**base, "network": {"bandwidth_gbit_per_s": 0, "rate": "fast"}})
    assert {p.path for p in problems} == {"network.bandwidth_gbit_per_s", "network.rate"}


def test_a_stated_link_is_the_wire_or_the_software_whichever_is_slower():
    # by hand: Gloo's central efficiency √(0.49 · 0.98) = 0.69296; the loopback's software, 1 / 1.5 GB/s
    central = math.sqrt(0.49 * 0.98)
    fast = stated_fit(NodeLink(100e9, 5e-6), {"socket": SOCKET_FIT})
    assert fast.beta_s_per_byte == SOCKET_FIT.beta_s_per_byte                  # 100 Gbit/s: Gloo's copies bound it
    assert fast.alpha_s == pytest.approx(105e-6)                              # latency plus the software's step
    slow = stated_fit(NodeLink(2e8), {})
    assert slow.beta_s_per_byte == pytest.approx(8 / (2e8 * central)) and slow.alpha_s == pytest.approx(1e-9)
    # the interval's ends: the wire alone at 98%; the wire at 49% plus the software, not overlapped
    ends = [stated_fit(NodeLink(1e9, 5e-6), {"socket": SOCKET_FIT}, end) for end in ("fast", "slow")]
    assert ends[0].beta_s_per_byte == pytest.approx(8 / (1e9 * 0.98)) and ends[0].alpha_s == pytest.approx(5e-6)
    assert ends[1].beta_s_per_byte == pytest.approx(8 / (1e9 * 0.49) + 1 / 1.5e9)
    assert ends[1].alpha_s == pytest.approx(105e-6)


def test_a_stated_link_of_another_speed_moves_the_prediction_by_the_ring_worked_by_hand():
    # nodes emulated on one host: a step is the rank's compute plus the all-reduce, nothing hidden, so two stated
    # rates differ by exactly the ring's bandwidth term at each: per bucket of m bytes over n = 2 ranks,
    # 2(n−1)/n · m · 8 / (rate · efficiency), both rates slower than the software (1.5 GB/s = 12 Gbit/s)
    basis = basis_of(one_node_cells(), {"socket": SOCKET_FIT}, BUCKETS, None, {})
    efficiency = math.sqrt(0.49 * 0.98)
    step = {}
    for rate in (1e9, 4e9):
        p = predict_cell(basis, ACROSS, MachineWhatIf(node_link=NodeLink(rate, 1e-4, shared_host=True)))
        step[rate] = ACROSS.global_batch / p.value
    by_hand = sum(2 * (2 - 1) / 2 * m * 8 / efficiency * (1 / 1e9 - 1 / 4e9) for m in BUCKETS)
    assert step[1e9] - step[4e9] == pytest.approx(by_hand, rel=1e-6)
    # on separate hosts the faster link still wins, and the step is at least the compute plus the last bucket's ring
    apart = {rate: predict_cell(basis, ACROSS, MachineWhatIf(node_link=NodeLink(rate, 1e-4))) for rate in (1e9, 4e9)}
    assert apart[4e9].value > apart[1e9].value
    last_bucket = 2 * 1e-4 + BUCKETS[-1] * 8 / (1e9 * 0.98)                   # the fast end's ring, by hand
    assert ACROSS.global_batch / apart[1e9].high >= last_bucket


@pytest.mark.parametrize("rate", [1e10, 1e9, 2e8])
def test_a_stated_link_bounds_a_layout_across_nodes_and_holds_the_truth(rate):
    """A fit test: the truth is orch's own model of the step (compute plus the ring, not overlapped)."""
    basis = basis_of(one_node_cells(), {"socket": SOCKET_FIT}, BUCKETS, None, {})
    p = predict_cell(basis, ACROSS, MachineWhatIf(node_link=NodeLink(rate, 1e-4)))
    truth = true_across(rate, 32)
    assert p.low <= truth <= p.high, (p.low, truth, p.high, p.notes)
    assert any(f"costed from the topology file's statement, {rate / 1e9:g} Gbit/s" in n for n in p.notes)
    assert not any("largest-ranks error stands in" in n for n in p.notes)
    # a step is at least its last bucket's all-reduce at the wire's best (98% of the rate), whatever the overlap
    last = 2 * 1e-4 + BUCKETS[-1] * 8 / (rate * 0.98)
    assert p.high <= 64 / last * (1 + 1e-9)
    assert "plus the all-reduce across nodes" in p.high_why and "plus the all-reduce across nodes" in p.low_why
    if rate == 2e8:                               # communication-bound: the link's own spread sets the width
        assert math.log(p.high / p.low) / 2 < math.log(1.5)


def test_nodes_emulated_on_one_host_compute_as_all_their_ranks_on_one_node():
    """Namespaces of one machine share its caches and memory bandwidth: a rank computes as the 2-rank cell on one
    node does, so the prediction across 2 emulated nodes is slower than from a rank alone, and says so."""
    basis = basis_of(one_node_cells(), {"socket": SOCKET_FIT}, BUCKETS, None, {})
    apart = predict_cell(basis, ACROSS, MachineWhatIf(node_link=NodeLink(1e9, 1e-4)))
    shared = predict_cell(basis, ACROSS, MachineWhatIf(node_link=NodeLink(1e9, 1e-4, shared_host=True)))
    assert any("2×1×32" in n and "one host" in n for n in shared.notes)
    assert any("1×1×32" in n and "its socket" in n for n in apart.notes)
    # the 2-rank cell's compute includes its socket all-reduce (the fit cannot part them): never faster
    assert shared.value <= apart.value * (1 + 1e-9)


def test_without_a_link_the_node_axis_borrows_as_before_and_is_wider():
    basis = basis_of(one_node_cells(), {"socket": SOCKET_FIT}, BUCKETS, None, {})
    before = predict_cell(basis, ACROSS)
    stated = predict_cell(basis, ACROSS, MachineWhatIf(node_link=NodeLink(2e8)))
    assert any("links across nodes were not calibrated" in n for n in before.notes)
    assert stated.high < before.high / 5          # the 200 Mbit/s all-reduce makes linear scaling impossible


def test_a_cross_node_calibration_wins_over_the_statement_which_is_said_beside_it():
    samples = [comm.Sample("socket", 2, m, SOCKET_FIT.allreduce_s(2, m)) for m in SIZES] + calibration(2e8)
    links = comm.fit_links(samples)
    basis = basis_of(one_node_cells(), links, BUCKETS, None, {}, samples=samples)
    assert basis.link_held_out == pytest.approx(held_out_error(samples)) and 0 < basis.link_held_out < 0.15
    p = predict_cell(basis, ACROSS, MachineWhatIf(node_link=NodeLink(2e8)))
    (note,) = [n for n in p.notes if n.startswith("links across nodes")]
    assert "the cross-node calibration, 0.18" in note and "its held-out error" in note
    assert note.endswith("the topology file states 0.2 Gbit/s")
    assert p.low <= true_across(2e8, 32, efficiency=0.94) <= p.high
    cost = node_link_cost(links, basis.link_held_out, None)
    assert cost.fast_fit.beta_s_per_byte == pytest.approx(links["nodes"].beta_s_per_byte * math.exp(-basis.link_held_out))
    assert cost.source == "calibrated"


def test_a_one_rank_or_one_node_layout_is_untouched_by_the_link():
    basis = basis_of(one_node_cells(), {"socket": SOCKET_FIT}, BUCKETS, None, {})
    one = Layout(2, 1, 32, 1, 2, "socket")
    assert predict_cell(basis, one, MachineWhatIf(node_link=NodeLink(2e8))) == predict_cell(basis, one)


def test_nodes_emulated_on_one_host_combine_as_the_one_node_cells_did():
    """A one-node world whose ranks hide part of their all-reduce (γ = 1.5): across emulated nodes the step is
    compute ⊕ all-reduce under the same norm, worked by hand from the world's own figures (its compute, the ring
    over the stated link at Gloo's central efficiency, ρ's extra on the software's part), not the plain sum."""
    world = {**TRUE, "gamma": 1.5}
    model = StepModel(world, {"socket": SOCKET_FIT}, BUCKETS)
    lays = [Layout(r, 1, b, 1, r, "socket" if r > 1 else None) for r in (1, 2) for b in BATCHES]
    basis = basis_of([Cell(lay, model.samples_per_s(lay), cv=0.01) for lay in lays], {"socket": SOCKET_FIT},
                     BUCKETS, None, {})
    rate = 1e9
    p = predict_cell(basis, ACROSS, MachineWhatIf(node_link=NodeLink(rate, 1e-4, shared_host=True)))
    efficiency = math.sqrt(0.49 * 0.98)
    wire = sum(2 * 1e-4 + m * 8 / (rate * efficiency) for m in BUCKETS)          # 2(n−1) α + 2(n−1)/n m β, n = 2
    extra = (world["rho"] - 1) * sum(2 * SOCKET_FIT.alpha_s + m * SOCKET_FIT.beta_s_per_byte for m in BUCKETS)
    compute = world["a_s"] + world["c_s"] * 32
    by_hand = 64 / (compute ** 1.5 + (wire + extra) ** 1.5) ** (1 / 1.5)
    assert p.value == pytest.approx(by_hand, rel=0.02)
    assert p.value > 64 / (compute + wire + extra) * 1.05          # the plain sum would be slower
    assert p.low <= p.value <= p.high
    assert any("γ = 1.5" in n for n in p.notes)


def test_a_fit_that_did_not_place_gamma_adds_up_across_emulated_nodes():
    from orchestrator.core.predict.interval import _shared_gamma

    fitted = StepModel({**TRUE, "gamma": 1.5}, {"socket": SOCKET_FIT}, BUCKETS)
    assert _shared_gamma(fitted) == 1.5
    assert _shared_gamma(StepModel({**TRUE, "gamma": 8.0}, {"socket": SOCKET_FIT}, BUCKETS)) == 1.0   # at its bound
    assert _shared_gamma(StepModel({**TRUE, "gamma": 1.5, "rho": 0.5}, {"socket": SOCKET_FIT}, BUCKETS)) == 1.0
    frozen = StepModel({**TRUE, "gamma": 1.5}, {"socket": SOCKET_FIT}, BUCKETS, frozen={"gamma": "no comm"})
    assert _shared_gamma(frozen) == 1.0
