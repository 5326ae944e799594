"""The profile tables from hand-made rank results: overheads, oneDNN breakdown, scaling verdicts,
roofline points and the efficiency ratio."""

import pytest

from orchestrator.core import profile_analysis as pa

CONV = "mb8_ic256oc256_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1"   # 2.415919104 GFLOP per call


def _rank(conv_ms: float, allreduce_ms: float, step_ms: float) -> dict:
    return {
        "steps": 2, "plain_step_ms": [step_ms, step_ms + 2], "verbose_step_ms": [step_ms * 1.1] * 2,
        "onednn": {"totals": [{"kind": "convolution", "direction": "forward", "implementation": "brg", "calls": 4,
                               "time_ms": 2 * conv_ms},
                              {"kind": "reorder", "direction": "undef", "implementation": "jit:uni", "calls": 2,
                               "time_ms": 2.0}],
                   "shapes": [{"kind": "convolution", "direction": "forward", "problem": CONV, "dtype": "bf16",
                               "layout": "acdb", "calls": 4, "time_ms": 2 * conv_ms}]},
        "profiler": {"step_ms": [step_ms * 1.2] * 2,
                     "coverage": {"step_ms": step_ms, "named_ms": 0.95 * step_ms, "other_ms": 0.05 * step_ms},
                     "ops": [{"op": "aten::convolution_backward", "self_ms_per_step": conv_ms},
                             {"op": "c10d::allreduce_", "self_ms_per_step": allreduce_ms},
                             {"op": "aten::add_", "self_ms_per_step": 1.0}],
                     "layers": [{"layer": "head", "forward_ms": 10.0, "backward_ms": 20.0},
                                {"layer": "focal_loss", "forward_ms": 1.0, "backward_ms": 4.0}]},
        "peak": {"gflops": 400.0}, "stream_triad_gbs": 40.0,
        "replay": [{"kind": "convolution", "direction": "forward", "problem": CONV, "dtype": "bf16",
                    "isolated_ms": conv_ms / 2 * 1.25}],
    }


def _target(label, ranks, threads, conv_ms, allreduce_ms, step_ms):
    return {"label": label, "ranks": ranks, "threads": threads, "local_batch": 8, "variant": "",
            "results": [_rank(conv_ms, allreduce_ms, step_ms)]}


ONE = _target("1x1x8", 1, 1, 40.0, 5.0, 100.0)
TWO_THREADS = _target("1x2x8", 1, 2, 21.0, 5.0, 60.0)


def test_summary_overheads_and_coverage():
    s = pa.summary(ONE)
    assert s.plain_step_ms == 101.0                    # median of [100, 102]
    assert s.verbose_overhead == pytest.approx(110 / 101 - 1)
    assert s.profiler_overhead == pytest.approx(120 / 101 - 1)
    assert s.named_share == pytest.approx(0.95)
    assert s.onednn_ms == pytest.approx((80 + 2) / 2)


def test_onednn_breakdown_keeps_what_onednn_did_not_see():
    b = pa.onednn_breakdown(ONE)
    assert b == {"convolution forward": 40.0, "reorder": 1.0, pa.OUTSIDE_ONEDNN: pytest.approx(110 - 41)}


def test_categories_and_scaling_verdicts():
    rows = {r["category"]: r for r in pa.scaling([ONE, TWO_THREADS], [pa.categories(ONE), pa.categories(TWO_THREADS)])}
    assert rows["convolution"]["speed-up 1x2x8"] == pytest.approx(40 / 21, abs=0.01)
    assert rows["convolution"]["verdict 1x2x8"] == "scales with threads"
    assert rows["communication"]["verdict 1x2x8"] == "does not scale"
    assert rows[pa.OTHER]["1x1x8"] == 5.0


def test_more_ranks_same_threads_reads_as_contention():
    two_ranks = _target("2x1x8", 2, 1, 50.0, 5.0, 110.0)
    rows = {r["category"]: r for r in pa.scaling([ONE, two_ranks], [pa.categories(ONE), pa.categories(two_ranks)])}
    assert rows["convolution"]["verdict 2x1x8"] == "slower ×1.25 (contention)"
    assert rows["communication"]["verdict 2x1x8"] == "unchanged"


def test_layers_and_focal_loss_share():
    assert [r["layer"] for r in pa.layers(ONE)] == ["head", "focal_loss"]
    assert pa.layer_share(ONE, "focal_loss") == pytest.approx(5 / 100)


def test_roofline_points_against_measured_peak_and_bandwidth():
    (p,) = pa.roofline_points(ONE)
    assert p["gflop_per_call"] == pytest.approx(2.415919104)
    assert p["ms_per_call"] == 20.0
    assert p["achieved_gflops"] == pytest.approx(2.415919104 / 0.020)
    assert p["flop_per_byte"] == pytest.approx(2_415_919_104 / 3_276_800)
    assert p["attainable_gflops"] == 400.0                 # far right of the ridge (10 FLOP/byte)
    (k,) = pa.roofline_by_kind([p])
    assert k["fraction_of_attainable"] == pytest.approx(2.415919104 / 0.020 / 400)


def test_efficiency_ratio():
    e = pa.efficiency(ONE)
    # 4 calls / 2 steps × 25 ms isolated = 50 ms per step, against the 101 ms step and 40 ms logged.
    assert e["isolated_ms_per_step"] == pytest.approx(50.0)
    assert e["efficiency_ratio"] == pytest.approx(50 / 101)
    assert e["isolated_vs_logged"] == pytest.approx(50 / 40)
    assert e["replayed_shapes"] == 1 and e["not_replayed_shapes"] == 0


@pytest.mark.parametrize("op, cat", [("c10d::allreduce_", "communication"), ("aten::mkldnn_convolution", "convolution"),
                                     ("aten::addmm", "matmul"), ("Optimizer.step#Adam.step", "optimizer"),
                                     ("aten::copy_", "memory (copy, fill, reorder)"), ("aten::sigmoid", pa.ELEMENTWISE)])
def test_categories_of_ops(op, cat):
    assert pa.category(op) == cat


def test_a_category_absent_from_one_target_has_no_verdict():
    rows = pa.scaling([ONE, TWO_THREADS], [{"convolution": 0.0}, {"convolution": 3.0, "communication": 1.0}])
    assert {r["category"]: r["verdict 1x2x8"] for r in rows} == {"convolution": "–", "communication": "–"}


def test_no_verdict_when_a_rank_was_starved_of_its_cores():
    starved = _target("1x2x8", 1, 2, 21.0, 5.0, 60.0)
    starved["results"][0]["plain_cpu_share"] = 0.35
    rows = pa.scaling([ONE, starved], [pa.categories(ONE), pa.categories(starved)])
    assert {r["verdict 1x2x8"] for r in rows} == {"not judged: a rank got 35% of its cores"}
    assert pa.cpu_share(starved) == 0.35 and pa.cpu_share(ONE) is None


def test_variants_are_compared_layout_against_layout_not_with_each_other():
    ref1, ker1 = dict(ONE, label="ref-1x1x8", variant="ref"), dict(ONE, label="ker-1x1x8", variant="ker")
    ref2 = dict(TWO_THREADS, label="ref-1x2x8", variant="ref")
    ker2 = dict(TWO_THREADS, label="ker-1x2x8", variant="ker")
    targets = [ref1, ker1, ref2, ker2]
    (row, *_) = pa.scaling(targets, [pa.categories(t) for t in targets])
    assert set(row) == {"category", "ref-1x1x8", "ker-1x1x8", "ref-1x2x8", "ker-1x2x8", "speed-up ref-1x2x8",
                        "verdict ref-1x2x8", "speed-up ker-1x2x8", "verdict ker-1x2x8"}
    assert row["verdict ker-1x2x8"] == "scales with threads"
