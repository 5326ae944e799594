"""benchmarks/recount_flops.py on a hand-made results folder recorded before the valid-tap count: a padded
convolution's step counted both ways (tests/data/own_model/convnet.py: 4,896 FLOPs per image by torch's own
formula, 3,840 by orch's), and the hardware-efficiency table as it reads with each."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from orchestrator.core.measured import records as rec
from orchestrator.core.measured.environment import Environment
from orchestrator.core.planning.trial import Trial
from orchestrator.io.store import append_record, prepare_folder

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("recount_flops", REPO / "benchmarks" / "recount_flops.py")
recount_flops = importlib.util.module_from_spec(spec)
sys.modules["recount_flops"] = recount_flops
spec.loader.exec_module(recount_flops)

CONVNET = REPO / "tests" / "data" / "own_model" / "convnet.py"

# A small machine, in the compact form a topology file takes (a folder's topology.json is always a topology).
MACHINE = {"sockets": 1, "cores_per_socket": 2, "memory_gib": 4}


def throughput(samples_per_s: float, flops: float | None, **fields) -> rec.Record:
    return rec.Record(kind=rec.Kind.THROUGHPUT, key=Trial(1, 1, 4).key, status=rec.Status.OK, ranks=1, threads_per_rank=1,
                      local_batch=4, global_batch=4,
                      throughput=rec.ThroughputSection(samples_per_s=samples_per_s, train_flops_per_sample=flops,
                                                       **fields))


def folder_with(tmp_path: Path, record: rec.Record) -> Path:
    results = tmp_path / "results"
    prepare_folder(results, {"name": "c", "workload": {"name": f"{CONVNET}:workload", "params": {}},
                             "grid": {"local_batch": [8]}}, {}, MACHINE, Environment())
    append_record(results, record)
    append_record(results, rec.Record(kind=rec.Kind.PEAK, key=rec.peak_key(1, 1, "fp32"), status=rec.Status.OK, ranks=1,
                                      threads_per_rank=1, peak=rec.PeakSection(precision="fp32", gflops=10.0,
                                                                               concurrent=True)))
    return results


def test_an_older_folder_is_recounted_and_its_table_shown_both_ways(tmp_path, capsys):
    # 1e6 samples/s × 4,896 FLOPs = 4.90 GFLOP/s, 49.0% of a 10 GFLOP/s peak; × 3,840 = 3.84, 38.4%
    folder = folder_with(tmp_path, throughput(1e6, 4896.0))
    assert recount_flops.main([str(folder)]) == 0
    out = capsys.readouterr().out
    assert ("convnet.py:workload: recorded 4.9 kFLOP per sample; recounted now at local batch 4: torch's own "
            "4.9 kFLOP, orch's 3.84 kFLOP (torch's is +27.5%)") in out
    assert "| 1×1×4 | 4.90 a | 3.84 | 49.0% | 38.4% |" in out


def test_a_folder_counted_by_the_valid_tap_rule_or_stated_is_left_alone(tmp_path, capsys):
    record = throughput(1e6, 3840.0, train_flops_rule="valid-taps")
    assert recount_flops.main([str(folder_with(tmp_path, record))]) == 0
    assert "nothing to recount: its FLOPs are stated or counted by the valid-tap rule already" in capsys.readouterr().out
    other = tmp_path / "other"
    other.mkdir()
    assert recount_flops.main([str(folder_with(other, dataclasses.replace(record, throughput=None)))]) == 0
    assert "nothing to recount: no trial counted its FLOPs" in capsys.readouterr().out
