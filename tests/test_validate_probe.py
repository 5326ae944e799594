"""benchmarks/validate_probe.py on a hand-made results folder: the probe a sweep kept against the peak USS its
throughput records measured, each error computed by hand."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from orchestrator.core import records as rec
from orchestrator.core.grid import Trial
from orchestrator.core.probe import ProbePoint, probe_result
from orchestrator.io.store import append_record, prepare_folder

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("validate_probe", REPO / "benchmarks" / "validate_probe.py")
validate_probe = importlib.util.module_from_spec(spec)
sys.modules["validate_probe"] = validate_probe   # its dataclasses look their module up by name
spec.loader.exec_module(validate_probe)

KEY = {"format": 1, "workload": "w:workload", "code": "c", "params": {}, "precision": "fp32", "torch": "2.14.1",
       "backend": "gloo", "held_batches": 13, "batches": [2, 8], "steps": 3}


def point(batch: int, peak: float) -> ProbePoint:
    return ProbePoint(local_batch=batch, peak_uss_mib=peak, rank_peak_uss_mib=peak, library_mib=300.0,
                      watched_peak_uss_mib=peak, flops_per_step=100.0 * batch, samples_per_epoch=1000,
                      gradient_bytes=10 * 2**20)


def record(ranks: int, batch: int, peaks: list[float]) -> rec.Record:
    return rec.Record(kind=rec.THROUGHPUT, key=Trial(ranks, 1, batch).key, status=rec.OK, ranks=ranks,
                      threads_per_rank=1, local_batch=batch, global_batch=ranks * batch,
                      throughput=rec.ThroughputSection(samples_per_s=100.0),
                      memory=rec.MemorySection(peak_uss_mib=peaks, budget_mib=[9000.0] * ranks, estimate_mib=1.0))


@pytest.fixture()
def folder(tmp_path):
    results = tmp_path / "results"
    prepare_folder(results, {"name": "v"}, {}, {}, {})
    # 600 + 5·b MiB, + 10 MiB of DDP's buckets (one copy of 10 MiB of gradients), + 15%
    probe = probe_result(KEY, [point(2, 610.0), point(8, 640.0)], threads=2, measured_at="t", ddp_copies=1.0)
    (results / "probe.json").write_text(json.dumps(probe.to_json()))
    for r in (record(1, 64, [900.0]), record(2, 64, [600.0, 640.0]), record(1, 256, [2000.0])):
        append_record(results, r)
    append_record(results, dataclasses.replace(record(1, 128, [None]), key="r1-t1-b128"))   # no peak: skipped
    return results


def test_each_record_against_the_probes_prediction_with_the_error_by_hand(folder, tmp_path, capsys):
    out = tmp_path / "out"
    assert validate_probe.main([str(folder), "--out", str(out)]) == 0
    data = json.loads((out / "validation.json").read_text())
    rows = {row["layout"]: row for row in data["rows"]}
    assert list(rows) == ["1×1×64", "2×1×64", "1×1×256"]
    # at 64: 600 + 320 + 10 = 930 predicted; 1 rank measured 900: +3.3%, within 930 × 1.15
    assert rows["1×1×64"]["predicted_mib"] == pytest.approx(930.0)
    assert rows["1×1×64"]["error"] == pytest.approx(30 / 900) and rows["1×1×64"]["within"]
    # 2 ranks: the larger rank's 640; sharing the 300 MiB of libraries: 630 predicted, −1.6%
    assert rows["2×1×64"]["measured_mib"] == 640.0 and rows["2×1×64"]["sharing_mib"] == pytest.approx(630.0)
    assert rows["2×1×64"]["error_sharing"] == pytest.approx(-10 / 640)
    # at 256: 600 + 1,280 + 10 = 1,890, × 1.15 = 2,173.5: the 2,000 measured used 5.8% of the margin
    assert rows["1×1×256"]["margin_used"] == pytest.approx(2000 / 1890 - 1)
    assert rows["1×1×256"]["extrapolation"] == 32.0
    assert data["summary"]["all_within"] and data["summary"]["records"] == 3
    assert "every record within the prediction with its margin" in capsys.readouterr().out


def test_a_record_above_the_prediction_with_its_margin_is_marked(folder, tmp_path):
    append_record(folder, record(1, 64, [1100.0]))   # a rerun of 1×1×64 replaces the first: 1,100 > 930 × 1.15
    assert validate_probe.main([str(folder), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "validation.md").read_text()
    assert "| 1×1×64 (1 rank: DDP's buckets counted, none held) | 1,100 | 930 | -15.5% | 1,070 | +18.3% | **no** |" in text
    assert "**some record exceeded the prediction with its margin**" in text


def test_a_folder_without_a_probe_says_how_to_get_one(folder, tmp_path, capsys):
    (folder / "probe.json").unlink()
    assert validate_probe.main([str(folder), "--out", str(tmp_path / "out")]) == 1
    assert "the sweep planned without a probe; give --probe to run one" in capsys.readouterr().err
    assert validate_probe.main([str(tmp_path / "nowhere")]) == 2
