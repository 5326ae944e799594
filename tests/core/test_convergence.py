"""Convergence aggregation as MLPerf's RCP checker does it (olympic mean, population SD, non-converged runs
as infinitely slow), the convergence table, and the RCP-style export — against hand-computed values."""

import json
import math
from dataclasses import replace

import pytest

from orchestrator.core.measured import convergence as conv
from orchestrator.core.measured.records import Status
from orchestrator.core.tabulate import convergence as conv_table
from orchestrator.core.text.table import FAILED


@pytest.mark.parametrize("epochs, mean", [
    ([3.0, 4.0, 3.5], 3.5),                       # 3 seeds: drop 3.0 and 4.0
    ([5.0, 6.0, 7.0, 8.0, 20.0], 7.0),            # 5 seeds: (6 + 7 + 8) / 3
    ([1.0, 2.0, 3.0, 10.0], 2.5),                 # 4 seeds: (2 + 3) / 2
    ([6.0, 7.0, math.inf], 7.0),                  # the non-converged seed is the slowest: dropped
    ([5.0, 6.0, 7.0, 8.0, math.inf], 7.0),
    ([4.0, 5.0], 4.5),                            # fewer than 3: plain mean, nothing dropped
    ([4.0], 4.0),
])
def test_olympic_mean(epochs, mean):
    assert conv.olympic_mean(epochs) == pytest.approx(mean)


@pytest.mark.parametrize("epochs", [[6.0, math.inf, math.inf], [5.0, 6.0, 7.0, math.inf, math.inf], [4.0, math.inf]])
def test_olympic_mean_stays_infinite_when_a_kept_run_did_not_converge(epochs):
    assert conv.olympic_mean(epochs) == math.inf


def test_olympic_mean_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no runs"):
        conv.olympic_mean([])


def test_three_converged_seeds(make):
    [batch] = conv.convergence_by_batch([make.conv(32, s, e) for s, e in enumerate([3.0, 3.5, 4.0])])
    assert batch.mean_epochs == pytest.approx(3.5)
    # population SD (numpy.std, ddof=0) over all three: sqrt((0.25 + 0 + 0.25) / 3) = 0.4082
    assert batch.sd_epochs == pytest.approx(math.sqrt(1 / 6))
    assert batch.converged == 3 and batch.method == "olympic mean of 3 seeds (fastest and slowest dropped)"


def test_one_non_converged_seed_of_three_is_dropped_as_the_slowest(make):
    [batch] = conv.convergence_by_batch([make.conv(128, 0, 6.0), make.conv(128, 1, None), make.conv(128, 2, 7.0)])
    assert batch.mean_epochs == pytest.approx(7.0)
    assert batch.sd_epochs == pytest.approx(0.5)           # over the converged 6.0 and 7.0
    assert batch.converged == 2 and len(batch.runs) == 2 + 1
    assert batch.runs[1].why_not() == "seed 1 did not converge by 10 epochs"


def test_two_non_converged_seeds_of_three_make_the_batch_not_converge(make):
    [batch] = conv.convergence_by_batch([make.conv(128, 0, 6.0), make.conv(128, 1, None), make.conv(128, 2, None)])
    assert batch.mean_epochs is None
    assert batch.sd_epochs is None                          # one converged seed has no spread


def test_five_seeds_with_one_failure(make):
    epochs = [8.0, 5.0, None, 6.0, 7.0]
    [batch] = conv.convergence_by_batch([make.conv(64, s, e) for s, e in enumerate(epochs)])
    assert batch.mean_epochs == pytest.approx(7.0)          # sorted 5, 6, 7, 8, inf → (6 + 7 + 8) / 3
    assert batch.sd_epochs == pytest.approx(math.sqrt(1.25))  # pstdev(5, 6, 7, 8)


def test_a_seed_that_did_not_finish_counts_as_not_converged(make):
    records = [make.conv(64, 0, 4.0), make.conv(64, 1, 5.0),
               make.conv(64, 2, None, status="timeout", reason="over timeout_s 3600 s\nlast epoch 7")]
    [batch] = conv.convergence_by_batch(records)
    assert batch.mean_epochs == pytest.approx(5.0)          # sorted 4, 5, inf
    assert batch.runs[2].why_not() == ("seed 2 ended timeout: over timeout_s 3600 s; counted as not converged, "
                                       "as MLPerf's checker counts a run that did not finish")


def test_fewer_than_three_seeds_take_the_plain_mean(make):
    [batch] = conv.convergence_by_batch([make.conv(32, 0, 4.0), make.conv(32, 1, 5.0)])
    assert batch.mean_epochs == pytest.approx(4.5)
    assert batch.method == "mean of 2 seeds (fewer than 3: none dropped)"


def test_infeasible_and_other_kinds_are_ignored(make):
    records = [make.tp(1, 1, 32, 1000.0), make.conv(32, 0, 4.0),
               replace(make.conv(64, 0, None), status=Status.INFEASIBLE)]
    assert [b.global_batch for b in conv.convergence_by_batch(records)] == [32]


@pytest.fixture
def three_batches(make):
    return ([make.conv(32, s, e, layout=(1, 1, 32)) for s, e in enumerate([3.0, 3.5, 4.0])]
            + [make.conv(64, s, e, layout=(2, 1, 32)) for s, e in enumerate([4.5, 4.0, 4.5])]
            + [make.conv(128, s, e, layout=(4, 1, 32)) for s, e in enumerate([6.0, None, 7.0])])


def test_table_normalizes_to_the_smallest_global_batch(three_batches, cell_texts):
    table = conv_table.convergence_table(conv.convergence_by_batch(three_batches), planned_seeds=(0, 1, 2))
    cells = cell_texts(table)
    assert [label for label, _ in table.rows] == ["32", "64", "128"]
    assert cells[("32", "epochs to target")] == "3.50 ± 0.41"
    assert cells[("64", "epochs to target")] == "4.50 ± 0.24"   # pstdev(4.5, 4.0, 4.5) = 0.2357
    assert cells[("128", "epochs to target")] == "7.00 ± 0.50"
    assert [cells[(g, "normalized")] for g in ("32", "64", "128")] == ["1.00", "1.29", "2.00"]   # 4.5 / 3.5 = 1.286
    assert cells[("128", "seeds converged/run")] == "2/3 a"
    assert table.footnotes == ("a: global batch 128: seed 1 did not converge by 10 epochs",)
    assert [cells[(g, "ran on (r×t×b)")] for g in ("32", "64", "128")] == ["1×1×32", "2×1×32", "4×1×32"]
    assert "Normalized to the smallest global batch, 32." in table.caption
    assert "olympic mean" in table.caption


def test_a_batch_that_did_not_converge_says_so_and_normalization_moves_up(make, cell_texts):
    records = ([make.conv(32, s, e) for s, e in enumerate([None, 3.0, None])]
               + [make.conv(64, s, e) for s, e in enumerate([4.0, 4.5, 5.0])]
               + [make.conv(128, s, e) for s, e in enumerate([6.0, 7.5, 9.0])])
    table = conv_table.convergence_table(conv.convergence_by_batch(records))
    cells = cell_texts(table)
    assert cells[("32", "epochs to target")] == "did not converge by 10"
    assert table.rows[0][1][0].mark == FAILED
    assert cells[("32", "normalized")] == "–"
    assert cells[("32", "seeds converged/run")] == "1/3 a,b"
    assert [cells[(g, "normalized")] for g in ("64", "128")] == ["1.00", "1.67"]   # 7.5 / 4.5
    assert "Normalized to global batch 64, the smallest that converged (global batch 32 did not)." in table.caption


def test_planned_seeds_that_have_not_run_are_footnoted(make, cell_texts):
    table = conv_table.convergence_table(conv.convergence_by_batch([make.conv(32, 0, 4.0), make.conv(32, 1, 5.0)]),
                                   planned_seeds=(0, 1, 2))
    assert cell_texts(table)[("32", "seeds converged/run")] == "2/2 a"
    assert table.footnotes == ("a: global batch 32: seed 2 not run yet",)
    assert cell_texts(table)[("32", "epochs to target")] == "4.50 ± 0.50"


def test_empty_convergence_table_says_no_data_yet():
    table = conv_table.convergence_table(())
    assert table.rows == () and "no data yet" in table.caption


def test_rcp_export_has_mlperfs_layout(three_batches, make):
    records = three_batches + [make.conv(256, s, None) for s in range(3)]
    rcp = conv_table.rcp_dict(conv.convergence_by_batch(records), benchmark="classifier", platform="Xeon; 1 node",
                        when="2025-11-20T09:00:00Z")
    assert list(rcp) == ["classifier_ref_32", "classifier_ref_64", "classifier_ref_128"]   # 256: none converged
    entry = rcp["classifier_ref_128"]
    for key in ("Benchmark", "Creator", "When", "Platform", "BS", "Hyperparams", "Epochs to converge"):
        assert key in entry
    assert entry["Benchmark"] == "classifier" and entry["BS"] == 128
    assert entry["Epochs to converge"] == [6.0, 7.0]            # reference files list converged runs only
    assert entry["Hyperparams"]["opt_base_learning_rate"] == 0.1
    assert entry["Hyperparams"]["opt_learning_rate_warmup_epochs"] == 1.0
    assert entry["orch"]["not_converged"] == [{"seed": 1, "status": "ok", "max_epochs": 10.0}]
    assert entry["orch"]["olympic_mean_epochs"] == pytest.approx(7.0)
    json.dumps(rcp, allow_nan=False)                            # valid JSON, no NaN or inf


def test_rcp_epochs_give_the_checkers_olympic_mean_when_all_converged(three_batches):
    """The checker's compute_rcp_stats: sort, drop one each end, mean; np.std over all."""
    entry = conv_table.rcp_dict(conv.convergence_by_batch(three_batches), benchmark="b")["b_ref_32"]
    epochs = sorted(entry["Epochs to converge"])
    assert sum(epochs[1:-1]) / len(epochs[1:-1]) == pytest.approx(entry["orch"]["olympic_mean_epochs"])
    mean = sum(epochs) / len(epochs)
    assert math.sqrt(sum((e - mean) ** 2 for e in epochs) / len(epochs)) == pytest.approx(entry["orch"]["stdev_epochs"])
