"""benchmarks/validate_probe.py on a hand-made results folder: the probe a sweep kept against the peak private
memory its throughput records measured, each error computed by hand, within ±10% or marked."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from orchestrator.core.measured import records as rec
from orchestrator.core.measured.environment import Environment
from orchestrator.core.planning.probe import ProbePoint, probe_result
from orchestrator.core.planning.trial import Trial
from orchestrator.io.store import append_record, prepare_folder

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("validate_probe", REPO / "benchmarks" / "validate_probe.py")
validate_probe = importlib.util.module_from_spec(spec)
sys.modules["validate_probe"] = validate_probe   # its dataclasses look their module up by name
spec.loader.exec_module(validate_probe)

KEY = {"format": 2, "workload": "w:workload", "code": "c", "params": {}, "precision": "fp32", "torch": "2.14.1",
       "backend": "gloo", "held_batches": 13, "batches": [2, 8], "steps": 3}

# A small machine, in the compact form a topology file takes (a folder's topology.json is always a topology).
MACHINE = {"sockets": 1, "cores_per_socket": 2, "memory_gib": 4}


def point(batch: int, peak: float) -> ProbePoint:
    return ProbePoint(local_batch=batch, peak_private_mib=peak, rank_peak_private_mib=peak, library_mib=300.0,
                      watched_peak_private_mib=peak, flops_per_step=100.0 * batch, samples_per_epoch=1000,
                      gradient_bytes=10 * 2**20)


def record(ranks: int, batch: int, peaks: list[float | None], shared: list[float] | None = None) -> rec.Record:
    return rec.Record(kind=rec.Kind.THROUGHPUT, key=Trial(ranks, 1, batch).key, status=rec.Status.OK, ranks=ranks,
                      threads_per_rank=1, local_batch=batch, global_batch=ranks * batch,
                      throughput=rec.ThroughputSection(samples_per_s=100.0),
                      memory=rec.MemorySection(peak_private_mib=peaks, shared_mib=shared, budget_mib=[9000.0] * ranks,
                                               estimate_mib=1.0))


@pytest.fixture()
def folder(tmp_path):
    results = tmp_path / "results"
    prepare_folder(results, {"name": "v", "workload": {"name": "classifier"}, "grid": {"local_batch": [64, 128, 256]}},
                   {}, MACHINE, Environment())
    # 600 + 5·b MiB private, + 10 MiB of DDP's buckets (one copy of 10 MiB of gradients), + 15%; 300 MiB of libraries
    probe = probe_result(KEY, [point(2, 610.0), point(8, 640.0)], threads=2, measured_at="t", ddp_copies=1.0)
    (results / "probe.json").write_text(json.dumps(probe.to_json()))
    for r in (record(1, 64, [900.0], [310.0]), record(2, 64, [880.0, 910.0], [305.0, 320.0]),
              record(1, 256, [2000.0])):
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
    # 2 ranks: the larger rank's 910 against the same 930 (private memory: the libraries are not in it), +2.2%;
    # its libraries' pages beside the probe's 300 MiB once per node
    assert rows["2×1×64"]["measured_mib"] == 910.0 and rows["2×1×64"]["error"] == pytest.approx(20 / 910)
    assert rows["2×1×64"]["shared_mib"] == 320.0 and rows["2×1×64"]["private"]
    # at 256: 600 + 1,280 + 10 = 1,890, × 1.15 = 2,173.5: the 2,000 measured used 5.8% of the margin, −5.5%
    assert rows["1×1×256"]["margin_used"] == pytest.approx(2000 / 1890 - 1)
    assert rows["1×1×256"]["extrapolation"] == 32.0 and rows["1×1×256"]["shared_mib"] is None
    assert data["summary"]["all_within"] and data["summary"]["records"] == 3
    assert data["summary"]["all_within_tolerance"] and data["summary"]["tolerance"] == 0.10
    text = capsys.readouterr().out
    assert "every record within the prediction with its margin; every record within ±10% of the prediction." in text
    assert "the probe's libraries once per node: 300 MiB" in text


def test_a_record_above_the_prediction_with_its_margin_or_off_by_more_than_the_tolerance_is_marked(folder, tmp_path):
    append_record(folder, record(1, 64, [1100.0]))   # a rerun of 1×1×64 replaces the first: 1,100 > 930 × 1.15
    assert validate_probe.main([str(folder), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "validation.md").read_text()
    assert ("| 1×1×64 (1 rank: DDP's buckets counted, none held) | 1,100 | 930 | -15.5% | 1,070 | +18.3% | **no** | – | 8× |"
            in text)
    assert "**some record exceeded the prediction with its margin**" in text
    assert "**some record off the prediction by more than ±10%**" in text
    assert validate_probe.main([str(folder), "--out", str(tmp_path / "wide"), "--tolerance", "0.2"]) == 0
    assert "every record within ±20% of the prediction" in (tmp_path / "wide" / "validation.md").read_text()


def test_older_records_and_an_older_probe_still_read_and_are_marked(folder, tmp_path):
    older = rec.MemorySection.from_json({"peak_uss_mib": [500.0], "budget_mib": [9000.0], "estimate_mib": 1.0})
    append_record(folder, dataclasses.replace(record(1, 64, [None]), memory=older))
    assert validate_probe.main([str(folder), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "validation.md").read_text()
    assert "| 500 (unique) | 930 |" in text and "Rows marked (unique) are older records" in text
    format_1 = json.loads((folder / "probe.json").read_text())
    format_1["format"] = 1
    format_1["memory"].pop("node_library_mib")
    format_1["memory"]["library_mib"] = 300.0
    (folder / "probe.json").write_text(json.dumps(format_1))
    assert validate_probe.main([str(folder), "--out", str(tmp_path / "old")]) == 0
    assert "The probe is of format 1: the libraries (300 MiB) are counted in every rank's figure" in (
        tmp_path / "old" / "validation.md").read_text()


def test_a_folder_without_a_probe_says_how_to_get_one(folder, tmp_path, capsys):
    (folder / "probe.json").unlink()
    assert validate_probe.main([str(folder), "--out", str(tmp_path / "out")]) == 1
    assert "the sweep planned without a probe; give --probe to run one" in capsys.readouterr().err
    assert validate_probe.main([str(tmp_path / "nowhere")]) == 2
