"""A roof per memory level in `orch profile`: a primitive is held to the bandwidth of the cache level
its working set fits in, the roofline's rows carry the check's own `above_roof`, and the summary at the top of
profile.md agrees with them. The case: the FPN's 3×3 convolution on a 1×1 input (2.4 MB of fp32 weights, 1.2 MB
in bf16) ran at 60 GFLOP/s against a 34.8 GFLOP/s DRAM roof, two rows said above_roof: true, and the summary
said "All passed"."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "report"))

from test_profile_checks import _clean  # noqa: E402
from test_profile_report import HEADER, _ok  # noqa: E402

from orchestrator.core.profile import analysis as pa  # noqa: E402
from orchestrator.core.profile import checks as pc  # noqa: E402
from orchestrator.core.profile import levels as lv  # noqa: E402
from orchestrator.report.profile_report import write_profile_report  # noqa: E402

P7 = "mb8_ic256oc256_ih1oh1kh3sh1dh0ph1_iw1ow1kw3sw1dw0pw1"   # 1.048576 MFLOP (the centre tap), 1.18784 MB in bf16
P7_FLOP = 2 * 8 * 256 * 256
ZEN4_ONE_CORE = [{"level": "L1", "fits_bytes": 32 * 1024, "gbs": None, "triad_bytes": 0},
                 {"level": "L2", "fits_bytes": 1_081_344, "gbs": 110.0, "triad_bytes": 524_288},
                 {"level": "L3", "fits_bytes": 34_635_776, "gbs": 97.0, "triad_bytes": 8_388_608},
                 {"level": "DRAM", "fits_bytes": 0, "gbs": 39.4, "triad_bytes": 138_543_104}]


def _with_p7(t: dict, gflops: float = 60.0, levels: list | None = None) -> dict:
    """`t` with the P7 convolution added to rank 0's log at `gflops`, and its level roofs (None: none)."""
    r = t["results"][0]
    ms = P7_FLOP / (gflops * 1e9) * 1e3
    r["onednn"]["shapes"].append({"kind": "convolution", "direction": "forward", "problem": P7, "dtype": "bf16",
                                  "layout": "acdb", "calls": 4, "time_ms": 4 * ms})
    r["stream_triad_gbs"] = 39.4     # × 0.883 FLOP/byte: a 34.8 GFLOP/s DRAM roof
    if levels is not None:
        r["level_roofs"] = levels
    return t


def _p7(t: dict) -> pa.RooflinePoint:
    return next(p for p in pa.roofline_points(t) if p.problem == P7)


def test_the_rows_and_the_summary_agree_where_no_cache_roofs_were_measured(tmp_path):
    t = _with_p7(_ok("1x1x8"))     # results from before the roofs per level
    write_profile_report([t], tmp_path, HEADER)
    rows = json.loads((tmp_path / "roofline-1x1x8.json").read_text())
    p7 = next(r for r in rows if r["problem"] == P7)
    assert p7["attainable_gflops"] == pytest.approx(34.8, abs=0.1)   # the DRAM line, shown
    assert p7["above_roof"] is False and p7["level"] == ""           # not a bound for data in cache: not flagged
    assert "**All passed.**" in (tmp_path / "profile.md").read_text()


def test_a_working_set_in_l3_is_held_to_the_l3_roof():
    p = _p7(_with_p7(_clean(), levels=ZEN4_ONE_CORE))
    assert (p.level, p.level_gbs) == ("L3", 97.0)                    # 1.19 MB: past one core's L2, inside L3
    assert p.attainable_gflops == pytest.approx(97.0 * P7_FLOP / 1_187_840) and not p.above_roof
    assert pc.check_target(_with_p7(_clean(), levels=ZEN4_ONE_CORE)) == []


def test_above_its_level_roof_is_disturbed_and_the_rows_say_so(tmp_path):
    slow_l3 = [dict(r, gbs=40.0) if r["level"] == "L3" else r for r in ZEN4_ONE_CORE]
    t = _with_p7(_ok("1x1x8"), levels=slow_l3)      # L3 roof 40 GB/s × 0.883 = 35.3 GFLOP/s; it ran at 60
    (f,) = pc.check_target(t)
    assert f.check == "above roof"
    assert f"{P7} at 60.0 GFLOP/s against 35.3 (×1.70): the L3 roof, 40.0 GB/s" in f.detail
    write_profile_report([t], tmp_path, HEADER)
    rows = json.loads((tmp_path / "roofline-1x1x8.json").read_text())
    assert [r["problem"] for r in rows if r["above_roof"]] == [P7]
    assert "**Disturbed: 1x1x8.**" in (tmp_path / "profile.md").read_text()


def test_within_the_bandwidth_roofs_noise_is_not_above_it():
    levels = [dict(r, gbs=60.0 / (P7_FLOP / 1_187_840) / 1.08) if r["level"] == "L3" else r for r in ZEN4_ONE_CORE]
    p = _p7(_with_p7(_clean(), levels=levels))      # 8% above its L3 roof: within the 10% floor
    assert p.achieved_gflops > p.attainable_gflops and not p.above_roof


def test_a_working_set_past_every_cache_is_held_to_dram():
    small_caches = [dict(r, fits_bytes=min(r["fits_bytes"], 600_000)) if r["level"] != "DRAM" else r
                    for r in ZEN4_ONE_CORE]
    p = _p7(_with_p7(_clean(), levels=small_caches))
    assert p.level == "DRAM" and p.above_roof                        # 60 against 34.8


def test_a_working_set_in_l1_is_bounded_by_compute_alone():
    tiny = [dict(r, fits_bytes=2_000_000) if r["level"] == "L1" else r for r in ZEN4_ONE_CORE]
    p = _p7(_with_p7(_clean(), levels=tiny))
    assert p.level == "L1" and p.level_gbs is None and p.attainable_gflops == 400.0 and not p.above_roof


def test_cache_capacities_count_the_rank_s_instances_in_full_and_share_them_for_the_triad():
    caches = (lv.CacheInstance(1, 48 * 1024, (0,)), lv.CacheInstance(1, 48 * 1024, (1,)),
              lv.CacheInstance(2, 2 * lv.MIB, (0,)), lv.CacheInstance(2, 2 * lv.MIB, (1,)),
              lv.CacheInstance(3, 32 * lv.MIB, (0, 1, 2, 3)))
    one, two = lv.capacities(caches, [0]), lv.capacities(caches, [0, 1])
    assert [(c.level, c.instances) for c in two] == [("L1", 2), ("L2", 2), ("L3", 1)]
    assert two[1].fits_bytes == 2 * (48 * 1024 + 2 * lv.MIB)          # L1 and L2 of both cores
    assert one[2].fits_bytes == 48 * 1024 + 2 * lv.MIB + 32 * lv.MIB   # the whole shared L3 may hold its data
    assert (one[2].share_bytes, two[2].share_bytes) == (8 * lv.MIB, 16 * lv.MIB)   # its triad: its quarter, half
    assert lv.dram_triad_bytes(one) == 4 * one[2].fits_bytes
    assert lv.level_of(1e12, []) is None


def test_a_ratio_above_one_within_the_noise_is_said_to_be_noise_in_every_table(tmp_path):
    t = _with_p7(_ok("1x1x8"), gflops=36.0, levels=[dict(r, gbs=39.4) if r["level"] == "L3" else r
                                                   for r in ZEN4_ONE_CORE])   # 36.0 of 34.8 attainable: 3.5% above
    r = t["results"][0]
    r["replay"][0]["isolated_ms"] = 21.0     # alone 21 ms, 20 in the model: efficiency 1.05, within the noise
    assert pc.check_target(t) == []
    write_profile_report([t], tmp_path, HEADER)
    p7 = next(x for x in json.loads((tmp_path / "roofline-1x1x8.json").read_text()) if x["problem"] == P7)
    assert p7["fraction_of_attainable"] == "1.04 (above 1 within the noise: not a finding)"
    (replayed,) = json.loads((tmp_path / "replay-1x1x8.json").read_text())
    assert replayed["efficiency"] == "1.05 (above 1 within the noise: not a finding)"
    (summary,) = json.loads((tmp_path / "summary.json").read_text())
    assert summary["efficiency_ratio"] == "1.05 (above 1 within the noise: not a finding)"
    md = (tmp_path / "profile.md").read_text()
    assert "**All passed.**" in md and "| 1.05 |" not in md
