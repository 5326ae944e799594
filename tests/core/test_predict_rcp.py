"""MLPerf RCP files read as the checker reads them: units, olympic mean, pruning, duplicates. Values by hand."""

from __future__ import annotations

import pytest

from orchestrator.core.predict import rcp
from orchestrator.core.predict.epochs import BatchPoint


def entry(bs: int, runs: list[float], benchmark: str = "x", key: str = rcp.EPOCHS_KEY) -> dict:
    return {"Benchmark": benchmark, "BS": bs, key: runs}


# A BERT-like file: MLPerf's rcps_bert.json gives samples under "Epochs to converge" (about 2.5 million at
# batch 256). Runs chosen so the olympic means are round: 2.4M, 2.6M, 3.2M samples.
BERT = {"bert_ref_256": entry(256, [2_000_000, 2_400_000, 2_400_000, 2_400_000, 9_000_000], "bert"),
        "bert_ref_448": entry(448, [2_500_000, 2_600_000, 2_600_000, 2_600_000, 2_700_000], "bert"),
        "bert_ref_1024": entry(1024, [3_000_000, 3_200_000, 3_200_000, 3_200_000, 3_400_000], "bert")}


def test_bert_like_samples_are_detected_and_converted_with_the_dataset_size():
    read, errors = rcp.read_rcp(BERT, "rcps_bert.json")
    assert errors == [] and read is not None
    assert read.unit == rcp.SAMPLES and "bert" in read.unit_why
    assert [p.mean for p in read.points] == [2_400_000, 2_600_000, 3_200_000]   # olympic: 9M and 2M dropped
    points = rcp.to_epochs(read, 400_000, "rcps_bert.json")
    assert [p.mean for p in points] == pytest.approx([6.0, 6.5, 8.0])             # 2.4M / 400k = 6 epochs
    note = rcp.conversion_note(read, 400_000, "--samples-per-epoch", "rcps_bert.json")
    assert "samples to converge" in note and "epochs of 400,000 samples (--samples-per-epoch)" in note


def test_samples_without_a_dataset_size_are_refused_with_the_reason():
    read, _ = rcp.read_rcp(BERT, "rcps_bert.json")
    with pytest.raises(rcp.RcpUnitError, match=r"counts samples to converge, not epochs \(benchmark bert.*"
                                               r"give --samples-per-epoch N"):
        rcp.to_epochs(read, None, "rcps_bert.json")


def test_samples_key_and_steps_benchmark_are_converted():
    read, _ = rcp.read_rcp({"f_ref_64": entry(64, [640.0], "flux1", rcp.SAMPLES_KEY)})
    assert read.unit == rcp.SAMPLES and rcp.to_epochs(read, 64, "f")[0].epochs == (10.0,)
    read, _ = rcp.read_rcp({"sd_ref_512": entry(512, [1000.0], "sd")})
    assert read.unit == rcp.STEPS                                # 1000 steps × 512 = 512,000 samples
    assert rcp.to_epochs(read, 51_200, "f")[0].epochs == (10.0,)


def test_unknown_benchmark_with_numbers_no_epoch_count_reaches_is_refused():
    read, errors = rcp.read_rcp({"g_ref_1536": entry(1536, [1.66e9, 1.5e9], "gpt3")}, "rcps_gpt3.json")
    assert read is None
    assert "reaches 1.66e+09, more than any epoch count (10,000)" in errors[0]
    assert "benchmark gpt3" in errors[0] and "'samples to converge'" in errors[0]


def test_epochs_file_stays_in_epochs():
    read, errors = rcp.read_rcp({"r_ref_256": entry(256, [4, 4, 5], "retinanet")})
    assert errors == [] and read.unit == rcp.EPOCHS
    assert rcp.to_epochs(read, None, "f") == read.points                 # no dataset size needed
    assert rcp.conversion_note(read, 1000, "x", "f") == ""


def test_unet3d_olympic_mean_drops_four_runs_at_each_end():
    runs = [1.0, 1.0, 1.0, 1.0, 10.0, 20.0, 90.0, 90.0, 90.0, 90.0]     # 10 runs: 10 and 20 are left
    read, _ = rcp.read_rcp({"u_ref_32": entry(32, runs, "unet3d")})
    assert read.points[0].mean == 15.0
    read, _ = rcp.read_rcp({"o_ref_32": entry(32, runs, "other")})
    assert read.points[0].mean == pytest.approx((3 * 1.0 + 10.0 + 20.0 + 3 * 90.0) / 8)   # one at each end


def test_duplicate_batches_are_pooled_and_reported_not_rejected():
    read, errors = rcp.read_rcp({"a": entry(64, [3.0, 4.0, 5.0]), "b": entry(64, [7.0]), "c": entry(128, [6.0])},
                                "dup.json")
    assert errors == []
    assert [p.global_batch for p in read.points] == [64, 128]
    assert read.points[0].epochs == (3.0, 4.0, 5.0, 7.0)
    assert read.points[0].mean == 4.5                                    # olympic: drop 3 and 7
    assert read.notes == ("dup.json: global batch 64 appears in entries 'a', 'b': their 3 + 1 runs are pooled",)


def test_pruning_follows_the_checker_rule():
    # means 5, 4, 6, 6, 9 at 64 … 1024: 64 is below the fastest (128: 4 epochs) and goes; 256 lies above the
    # 128–512 line (4 + 128/384·2 = 4.67); 512 then lies below the 128–1024 line (4 + 384/896·5 = 6.14): kept
    pts = [BatchPoint(b, (e,)) for b, e in ((64, 5.0), (128, 4.0), (256, 6.0), (512, 6.0), (1024, 9.0))]
    kept, dropped = rcp.prune(pts)
    assert [p.global_batch for p in kept] == [128, 512, 1024]
    assert [p.global_batch for p in dropped] == [64, 256]
    note = rcp.pruning_note(dropped, "f")
    assert "64 (5 epochs), 256 (6 epochs) dropped by the RCP checker's pruning" in note


def test_pruning_steps_back_after_a_drop_but_not_further():
    # 200 above the 100–300 line (2 + 0.5·2 = 3 < 3.5) goes; 300 is then checked against 100–400:
    # 2 + 2/3·3 = 4 ≥ 4, kept (on the line). Points on a straight line are all kept.
    pts = [BatchPoint(b, (e,)) for b, e in ((100, 2.0), (200, 3.5), (300, 4.0), (400, 5.0))]
    assert [p.global_batch for p in rcp.prune(pts)[0]] == [100, 300, 400]
    line = [BatchPoint(b, (1.5 * (1 + b / 64),)) for b in (8, 16, 32, 64)]
    assert rcp.prune(line) == (tuple(line), ())


def test_malformed_entries_are_all_reported():
    read, errors = rcp.read_rcp({
        "a_ref_8": entry(8, [3, 4], "a"),
        "a_ref_x": {"Benchmark": "a", "BS": "16", "Epochs to converge": [3]},
        "a_ref_32": entry(32, [], "a"),
        "b_ref_64": entry(64, [9], "b"),
        "junk": 5}, "rcps.json")
    assert read is None
    assert "rcps.json: entry 'a_ref_x': BS must be a positive integer, got '16'" in errors
    assert any("'a_ref_32'" in e and "non-empty list" in e for e in errors)
    assert "rcps.json: entry 'junk': expected an object, got int" in errors
    assert any("several benchmarks ['a', 'b']" in e for e in errors)
    assert rcp.read_rcp([], "x")[1] == ["x: expected a JSON object of reference entries (name → {BS, Epochs to converge})"]


def test_every_key_of_mlcommons_files_is_read_and_any_other_is_refused_with_the_list():
    # the keys of every entry in mlcommons/logging's rcp_checker files (training 1.0.0 to 6.1.0, hpc)
    full = {"Benchmark": "resnet", "Creator": "NVIDIA", "When": "Prior to 2.0 submission", "Platform": "DGX-A100",
            "Precision": "fp16", "BS": 3264, "Hyperparams": {"opt_base_learning_rate": 10.5, "lars_epsilon": 0},
            "Epochs to converge": [35, 35, 36]}
    read, errors = rcp.read_rcp({"resnet_ref_3264": full})
    assert errors == [] and read.points[0].epochs == (35.0, 35.0, 36.0) and read.creators == ("NVIDIA",)
    read, errors = rcp.read_rcp({"resnet_ref_3264": {**full, "Seeds": 20}}, "rcps.json")
    assert read is None
    assert errors == ["rcps.json: entry 'resnet_ref_3264': Seeds: unknown key; valid keys are: BS, Benchmark, Creator, "
                      "Epochs to converge, Hyperparams, Platform, Precision, When, orch, samples to converge"]


def test_the_orch_section_of_an_exported_file_is_read_typed():
    exported = {**entry(8, [5.0, 5.5, 6.0], "retinanet"), "orch": {
        "metric": "map50", "target": 0.25, "seeds": [0, 1, 2], "converged_seeds": [0, 1, 2], "not_converged": [],
        "olympic_mean_epochs": 5.5, "stdev_epochs": 0.4, "method": "olympic mean", "layouts": ["1×1×8"],
        "workload": "retinanet", "params": {"image_size": 128}}}
    read, errors = rcp.read_rcp({"retinanet_ref_8": exported})
    assert errors == [] and read.orch.workload == "retinanet" and read.orch.params == {"image_size": 128}
    _, errors = rcp.read_rcp({"retinanet_ref_8": {**exported, "orch": {"workload": 3}}}, "f")
    assert errors == ["f: entry 'retinanet_ref_8': orch.workload: must be str or null, got 3"]
