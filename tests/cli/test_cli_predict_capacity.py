"""Every field of a capacity plan checked against hand arithmetic.

The fixture is a results folder written by the production writers from round-number truths:
    step:   a = 0.01 s, c = 0.001 s/sample, σ = σ_a = 0.1, κ = 0.01, μ = 0.1, ρ = 2, γ = 2
    comm:   within a socket α = 1e-4 s, β = 1e-9 s/byte; across nodes α = 1e-3 s, β = 1e-8 s/byte;
            one DDP bucket of 1 MiB (1,048,576 bytes)
    epochs: E_min = 2, B_crit = 64; seeds × (1/1.1, 1, 1.1), so the olympic mean is the truth
measured on one 4-core socket: ranks × threads ∈ {1×1, 1×2, 1×4, 2×1, 2×2, 4×1} at local batch 8, 16, 32.
The target is 2 nodes of 1 socket × 4 cores; local batch 32; 3,600,000 samples per epoch, so
hours = epochs × 3.6e6 / samples/s / 3600 = 1000 · epochs / samples/s.
The data are exact, so the fit returns the truths and every held-out error is ~0: the intervals of samples/s
are the cells' own noise floor, CV 1%: ×/÷ e^log(1.01) = ×/÷ 1.01. Across nodes (no multi-node cell: the node
link's own calibration costs it, `predict.network`) a step's all-reduce is the ring across nodes alone plus
(ρ − 1) × the ring at the software's speed: ρ slows the CPU's part of an all-reduce, not the wire's; the step is a
rank's compute plus that all-reduce, of which DDP could hide every bucket but the last behind the backward pass:
with one bucket, nothing (`interval._overlap`); its interval runs from the 1 × 4 cell's compute ÷ its noise plus the
ring alone to its compute × its noise plus the ring and ρ × the software's ring.
"""

from __future__ import annotations

import json
import math

import pytest
from predict_results import write_results

from orchestrator.cli import main

TRUTH = {"a_s": 0.01, "c_s": 0.001, "sigma": 0.1, "sigma_a": 0.1, "kappa": 0.01, "mu": 0.1, "rho": 2.0,
         "gamma": 2.0}
LINKS = {"socket": (1e-4, 1e-9), "nodes": (1e-3, 1e-8)}
CELLS = [(r, t, b) for r, t in ((1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (4, 1)) for b in (8, 16, 32)]
SPE = 3_600_000
MIB = 1_048_576

# By hand, local batch 32 (U(T) = (1 + σ(T−1) + κT(T−1)) / T: U(1) = 1, U(2) = 1.12/2 = 0.56, U(4) = 1.42/4 = 0.355;
# σ = σ_a so both parts scale alike: compute = (0.01 + 0.032)·U(T)·(1 + 0.1·(k−1)), k ranks on a socket;
# comm = ρ·(2(n−1)·α + 2(n−1)/n·MIB·β); step = √(compute² + comm²); samples/s = ranks·32 / step):
COMPUTE_1x4 = 0.042 * 0.355                                          # 0.01491 s
COMPUTE_2x2 = 0.042 * 0.56 * 1.1                                     # 0.025872 s (2 ranks on the socket)
COMM_SOCKET_2 = 2 * (2 * 1e-4 + 1 * MIB * 1e-9)                      # 0.002497152 s
RING_NODES_2 = 2 * 1e-3 + 1 * MIB * 1e-8                             # 0.01248576 s, alone
RING_SOCKET_2 = COMM_SOCKET_2 / 2                                    # 0.001248576 s, alone (ρ = 2)
HAND = {  # layout: (nodes, samples/s, epochs = 2·(1 + B/64))
    "1×4×32": (1, 32 / COMPUTE_1x4, 3.0),                                               # 2146.2 /s
    "2×2×32": (1, 64 / math.hypot(COMPUTE_2x2, COMM_SOCKET_2), 4.0),                    # 2462.3 /s
    "2×4×32 on 2 nodes": (2, 64 / (COMPUTE_1x4 + RING_NODES_2 + RING_SOCKET_2), 4.0),          # 2234.3 /s
    "1×1×32": (1, 32 / 0.042, 3.0),                                                     # 761.9 /s
}
NOISE = 1.01     # ×/÷ the cells' CV


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    folder = tmp_path_factory.mktemp("capacity")
    results = write_results(folder, layouts=CELLS, params=TRUTH, links=LINKS, gradient_bytes=MIB,
                            epochs_truth=(2.0, 64.0), seed_factors=(1 / 1.1, 1.0, 1.1),
                            global_batches=(32, 64, 128, 256), peak_gflops=100.0)
    target = folder / "target.yaml"        # another machine whose cores state the measured one's GEMM peak: ×1
    target.write_text("nodes: 2\nsockets: 1\ncores_per_socket: 4\nmemory_gib: 16\n"
                      "isa: {peak_fp32_gflops_per_core: 100}\n")
    plans = {}
    for name, limit in (("deadline", ["--deadline", "1.5h"]), ("budget", ["--budget", "1.0node-h"]),
                        ("late", ["--deadline", "1h"])):
        out = folder / name
        assert main(["predict", str(results), "--topology", str(target), "--local-batch", "32",
                     "--samples-per-epoch", str(SPE), *limit, "--out", str(out)]) == 0
        plans[name] = json.loads((out / "prediction.json").read_text())
    return plans


def _rows(plan):
    return {(f"{r['ranks']}×{r['threads_per_rank']}×{r['local_batch']}"
             + (f" on {r['nodes']} nodes" if r["nodes"] > 1 else "")): r for r in plan["layouts"]}


def test_samples_epochs_hours_and_their_intervals_by_hand(plan):
    rows = _rows(plan["deadline"])
    for label, (nodes, rate, epochs) in HAND.items():
        r = rows[label]
        assert r["nodes"] == nodes
        assert r["samples_per_s"] == pytest.approx(rate, rel=1e-3), label
        low, high = (64 / (COMPUTE_1x4 * NOISE + RING_NODES_2 + COMM_SOCKET_2), 64 / (COMPUTE_1x4 / NOISE + RING_NODES_2)) \
            if nodes == 2 else (rate / NOISE, rate * NOISE)
        assert r["samples_per_s_low"] == pytest.approx(low, rel=1e-3), label
        assert r["samples_per_s_high"] == pytest.approx(high, rel=1e-3), label
        assert r["epochs"] == pytest.approx(epochs, rel=1e-9) and r["epochs_status"] == "measured"
        assert r["epochs_low"] < epochs < r["epochs_high"]
        hours = 1000 * epochs / rate                                  # epochs × 3.6e6 / rate / 3600
        assert r["hours"] == pytest.approx(hours, rel=1e-3), label
        # the few-epochs end over the fast end, the many-epochs end over the slow end
        assert r["hours_low"] == pytest.approx(1000 * r["epochs_low"] / high, rel=1e-3), label
        assert r["hours_high"] == pytest.approx(1000 * r["epochs_high"] / low, rel=1e-3), label
        assert r["node_hours"] == pytest.approx(hours * nodes, rel=1e-3), label
        assert r["runs_per_day"] == pytest.approx((2 // nodes) * 24 / hours, rel=1e-3), label
        assert r["predictor"] == "orch model" and r["no_interval"] is None
        assert any("100.0 ÷ 100.0 GFLOP/s = ×1.00" in n for n in r["notes"])        # another machine, said
    assert rows["2×4×32 on 2 nodes"]["link"] == "nodes"


def test_pareto_fastest_and_choices_by_hand(plan):
    rows = _rows(plan["deadline"])
    # 1×4×32 takes 1000·3/2146.2 = 1.398 h = 1.398 node-hours; 2×4×32 on 2 nodes 1000·4/2234.3 = 1.790 h, 3.58
    # node-hours; 2×2×32 1.62 h: every other layout takes longer on at least as many node-hours, so 1×4×32 alone
    # is the Pareto set (the all-reduce across nodes, not overlapped, costs more than a node gains); each node count
    # still has its fastest
    assert {k for k, r in rows.items() if "pareto" in r["marks"]} == {"1×4×32"}
    assert {k for k, r in rows.items() if "fastest" in r["marks"]} == {"1×4×32", "2×4×32 on 2 nodes"}
    hours_1x4 = 1000 * 3.0 / HAND["1×4×32"][1]
    deadline = plan["deadline"]["recommendation"]
    assert deadline["layout"] == "1×4×32"        # the only layout within 1.5 h
    assert deadline["answer"].startswith(f"1×4×32: {hours_1x4:.3g} h, {hours_1x4:.3g} node-hours")
    # its pessimistic end: epochs' high end (3 × e^sd, the seeds' spread about ±8% in log) over samples/s ÷ 1.01
    # is about 1000 · 3.25 / 2125 ≈ 1.53 h, past the 1.5 h deadline: the answer must say so
    high = rows["1×4×32"]["hours_high"]
    assert 1.5 < high < 1.6
    assert f"it needs {high:.3g} h, past the deadline" in deadline["answer"]
    budget = plan["budget"]["recommendation"]
    assert budget["layout"] is None and f"the cheapest, 1×4×32, needs {hours_1x4:.3g} node-hours" in budget["answer"]
    late = plan["late"]["recommendation"]
    assert late["layout"] is None and f"the fastest, 1×4×32, needs {hours_1x4:.3g} h" in late["answer"]
