"""The profile tables from hand-made rank results: overheads, oneDNN breakdown, scaling verdicts,
roofline points and the efficiency ratio."""

import pytest

from orchestrator.core.profile import analysis as pa

CONV = "mb8_ic256oc256_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1"   # 2.218786816 GFLOP per call (46² taps)


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
    assert [r.layer for r in pa.layers(ONE)] == ["head", "focal_loss"]
    assert pa.layer_share(ONE, "focal_loss") == pytest.approx(5 / 100)


def test_roofline_points_against_measured_peak_and_bandwidth():
    # The padded taps are not work (benchdnn's count): 2.218786816 GFLOP, not the 2.415919104 this test
    # asserted when the padded taps were counted.
    (p,) = pa.roofline_points(ONE)
    assert p.gflop_per_call == pytest.approx(2.218786816)
    assert p.ms_per_call == 20.0
    assert p.achieved_gflops == pytest.approx(2.218786816 / 0.020)
    assert p.flop_per_byte == pytest.approx(2_218_786_816 / 3_276_800)
    assert p.attainable_gflops == 400.0                 # far right of the ridge (10 FLOP/byte)
    (k,) = pa.roofline_by_kind([p])
    assert k.fraction_of_attainable == pytest.approx(2.218786816 / 0.020 / 400)


def test_roofline_by_kind_is_per_step():
    # 4 calls over 2 steps of 20 ms: 40 ms and 2 × 2.2188 GFLOP per step, not the 80 ms and 4 calls' worth
    # summed over the steps.
    (k,) = pa.roofline_by_kind(pa.roofline_points(ONE))
    assert k.ms_per_step == pytest.approx(40.0)
    assert k.gflop_per_step == pytest.approx(2 * 2.218786816)


def test_efficiency_ratio():
    e = pa.efficiency(ONE)
    # 4 calls / 2 steps × 25 ms isolated = 50 ms per step, against 40 ms logged in the model. Earlier
    # the ratio divided by the plain step (50 / 101), mixing framework time into a kernel figure; it is now
    # isolated ÷ in-model time of the same primitives, and the step share they cover is apart.
    assert e.isolated_ms_per_step == pytest.approx(50.0)
    assert e.efficiency_ratio == pytest.approx(50 / 40)
    assert e.replayed_share_of_step == pytest.approx(40 / 101)
    assert e.replayed_shapes == 1 and e.not_replayed_shapes == 0


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


def _two_layouts_of_one_reorder() -> dict:
    """One reorder problem into two formats (acdb → AcdB64a2b and → abcd), each replayed once."""
    target = _target("1x1x8", 1, 1, 40.0, 5.0, 100.0)
    r = target["results"][0]
    r["onednn"]["shapes"] = [
        {"kind": "reorder", "direction": "undef", "problem": "64x64x3x3", "dtype": "bf16", "layout": "acdb",
         "dst_dtype": "bf16", "dst_layout": "AcdB64a2b", "calls": 2, "time_ms": 8.0, "implementation": "jit:uni"},
        {"kind": "reorder", "direction": "undef", "problem": "64x64x3x3", "dtype": "bf16", "layout": "acdb",
         "dst_dtype": "bf16", "dst_layout": "abcd", "calls": 2, "time_ms": 2.0, "implementation": "jit:uni"}]
    r["replay"] = [
        {"kind": "reorder", "direction": "undef", "problem": "64x64x3x3", "dtype": "bf16", "layout": "acdb",
         "dst_dtype": "bf16", "dst_layout": "AcdB64a2b", "isolated_ms": 1.0, "implementation": "jit:uni"},
        {"kind": "reorder", "direction": "undef", "problem": "64x64x3x3", "dtype": "bf16", "layout": "acdb",
         "dst_dtype": "bf16", "dst_layout": "abcd", "isolated_ms": 0.5, "implementation": "simple:any"}]
    return target


def test_replays_match_their_problem_with_the_layout_and_lost_time_comes_first():
    rows = pa.replay_rows(_two_layouts_of_one_reorder())
    # In the model 4 ms a call into AcdB64a2b (1 ms alone: efficiency 0.25, lost 0.75 × 4 ms per step = 3 ms),
    # 1 ms into abcd (0.5 alone: 0.5, lost 0.5 × 1 ms = 0.5 ms). Keyed without the layout they collided.
    assert [(r.efficiency, r.lost_ms_per_step) for r in rows] == [(0.25, 3.0), (0.5, 0.5)]
    assert [r.same_implementation for r in rows] == [True, False]
    e = pa.efficiency(_two_layouts_of_one_reorder())
    assert e.efficiency_ratio == pytest.approx((1.0 + 0.5) / (4 + 1))
    assert e.implementation_mismatches == 1


def test_attribution_of_every_rank_against_plain_and_profiled_steps():
    target = _target("2x1x8", 2, 1, 40.0, 5.0, 100.0)
    second = _rank(40.0, 7.0, 120.0)
    second["profiler"]["coverage"]["allreduce_wait_ms"] = 10.0
    target["results"].append(second)
    a0, a1 = pa.attribution(target)
    # rank 1: plain median of [120, 122] = 121; profiled step 120, named 0.95 × 120 = 114.
    assert (a1.rank, a1.plain_step_ms, a1.named_ms) == (1, 121.0, pytest.approx(114.0))
    # the profiled step came out 1 ms shorter than the plain one (noise): no overhead to take away
    assert a1.profiler_overhead_ms == 0.0 and a1.named_of_plain == pytest.approx(114 / 121)
    assert a1.inferred_wait_ms == 10.0 and a1.recorded_allreduce_ms == 7.0
    assert a1.profiler_overhead == pytest.approx(120 / 121 - 1)
    # The summary takes the lowest rank: rank 0's 95 / 101, rank 1's 114 / 121.
    assert pa.summary(target).named_of_plain == pytest.approx(min(95 / 101, 114 / 121))


def test_the_named_share_of_the_plain_step_is_a_share():
    """At 1×1 the named time of the profiled pass (which the profiler slowed 17%) over
    the plain step read 112.5%. Named 1125 ms of a 1170 ms profiled step, plain step 1000 ms: the profiler
    added 170 ms, so at least 1125 − 170 = 955 ms of the plain step was in named ops: 95.5%."""
    t = _target("1x1x8", 1, 1, 40.0, 5.0, 1170.0)
    r = t["results"][0]
    r["plain_step_ms"] = [1000.0, 1000.0]
    r["profiler"]["coverage"].update(named_ms=1125.0, other_ms=45.0)
    (a,) = pa.attribution(t)
    assert a.named_ms / a.plain_step_ms == pytest.approx(1.125)      # the old figure: a ratio of two passes
    assert a.profiler_overhead_ms == pytest.approx(170.0)
    assert a.named_of_plain == pytest.approx(955 / 1000)
    assert a.named_of_plain <= a.named_of_profiled == pytest.approx(1125 / 1170)
    # It cannot pass 1: the named time never exceeds its own step, overhead or not.
    r["profiler"]["coverage"].update(named_ms=1170.0, other_ms=0.0)
    assert pa.attribution(t)[0].named_of_plain == pytest.approx(1.0)


def test_the_efficiency_compares_fastest_call_with_fastest_call():
    """On a 2-CPU machine at 2 threads a neighbour's time slice stalls a primitive's
    barrier, so a few of its calls take several times its own time, in the model or alone. The median of the
    replay's calls against the mean of the model's then measured luck (1.51 at 1×2); the fastest calls do not
    carry the stalls."""
    t = _target("1x2x8", 1, 2, 40.0, 5.0, 100.0)    # in the model: 4 calls, 80 ms, mean 20 ms a call
    r = t["results"][0]
    r["onednn"]["shapes"][0]["min_ms"] = 10.0        # ... its fastest call 10 ms (the others were stalled)
    r["replay"][0].update(isolated_ms=19.0, isolated_min_ms=10.5, runs=30)   # alone: median 19, fastest 10.5
    (row,) = pa.replay_rows(t)
    assert row.efficiency == pytest.approx(10.5 / 10.0)
    assert (row.in_model_fastest_ms, row.isolated_fastest_ms, row.replay_runs) == (10.0, 10.5, 30)
    assert row.lost_ms_per_step == pytest.approx((1 - 1.05) * 40.0)
    assert pa.efficiency(t).efficiency_ratio == pytest.approx(10.5 / 10.0)
    # Results written before fastest calls were kept: the replay's median against the model's mean, as before.
    del r["onednn"]["shapes"][0]["min_ms"], r["replay"][0]["isolated_min_ms"]
    assert pa.replay_rows(t)[0].efficiency == pytest.approx(19.0 / 20.0)
