"""Time-to-train and hardware-efficiency arithmetic against hand-computed values."""

import pytest

from orchestrator.core.measured import convergence as conv
from orchestrator.core.tabulate import throughput as tables
from orchestrator.core.tabulate import time_to_train as ttt
from orchestrator.core.text.table import BEST, FAILED, MISSING

SAMPLES_PER_EPOCH = 1_200_000


def test_hours_to_train_arithmetic():
    # 3.5 epochs × 1.2 M samples = 4.2 M samples; at 4,000 samples/s that is 1,050 s = 0.2917 h
    assert ttt.hours_to_train(3.5, SAMPLES_PER_EPOCH, 4000.0) == pytest.approx(1050 / 3600)
    assert ttt.hours_to_train(10.0, 3600, 1.0) == pytest.approx(10.0)


@pytest.fixture
def sweep(make):
    records = [make.tp(1, 1, 32, 4000.0), make.tp(2, 1, 32, 7600.0), make.tp(1, 4, 32, 11000.0),
               make.tp(2, 2, 32, 13000.0), make.tp(4, 1, 32, 14000.0), make.tp(1, 2, 256, 9000.0),
               make.bad(4, 2, 32, "oom", "too big")]
    records += [make.conv(32, s, e) for s, e in enumerate([3.0, 3.5, 4.0])]       # olympic mean 3.5
    records += [make.conv(64, s, e) for s, e in enumerate([4.0, 4.5, 4.5])]       # 4.5
    records += [make.conv(128, s, e) for s, e in enumerate([6.0, None, None])]    # did not converge
    return records


def test_layout_times_join_throughput_and_convergence(sweep):
    times = ttt.layout_times(sweep, {"samples_per_epoch": SAMPLES_PER_EPOCH}, conv.convergence_by_batch(sweep))
    by_point = {t.point: t for t in times}
    assert [t.point for t in times] == [(1, 1, 32), (1, 2, 256), (2, 1, 32), (1, 4, 32), (2, 2, 32), (4, 1, 32)]
    assert by_point[(1, 1, 32)].hours == pytest.approx(3.5 * 1.2e6 / 4000 / 3600)      # 0.2917
    assert by_point[(2, 1, 32)].hours == pytest.approx(4.5 * 1.2e6 / 7600 / 3600)      # 0.1974
    assert by_point[(1, 4, 32)].hours == pytest.approx(3.5 * 1.2e6 / 11000 / 3600)     # 0.1061
    assert by_point[(2, 2, 32)].hours == pytest.approx(4.5 * 1.2e6 / 13000 / 3600)     # 0.1154
    assert by_point[(4, 1, 32)].hours is None and by_point[(4, 1, 32)].not_converged
    assert by_point[(4, 1, 32)].missing == "global batch 128 did not converge by 10 epochs (1 of 3 seeds converged)"
    assert by_point[(1, 2, 256)].missing == "no convergence run for global batch 256 yet"
    assert (4, 2, 32) not in by_point                                                # oom: no throughput


def test_fastest_overall_and_per_core_count(sweep):
    times = ttt.layout_times(sweep, {"samples_per_epoch": SAMPLES_PER_EPOCH}, conv.convergence_by_batch(sweep))
    overall, per_cores = ttt.fastest(times)
    assert overall.point == (1, 4, 32)           # 0.106 h beats 2×2×32 at 0.115 h despite fewer samples/s
    assert {c: t.point for c, t in per_cores.items()} == {1: (1, 1, 32), 2: (2, 1, 32), 4: (1, 4, 32)}


def test_time_to_train_table(sweep, cell_texts):
    times = ttt.layout_times(sweep, {"samples_per_epoch": SAMPLES_PER_EPOCH}, conv.convergence_by_batch(sweep))
    table = ttt.time_to_train_table(times, SAMPLES_PER_EPOCH)
    cells = cell_texts(table)
    assert [label for label, _ in table.rows] == ["1×1×32", "1×2×256", "2×1×32", "1×4×32", "2×2×32", "4×1×32"]
    assert [cells[(p, "hours")] for p in ("1×1×32", "2×1×32", "1×4×32", "2×2×32")] == ["0.292", "0.197", "0.106",
                                                                                       "0.115"]
    assert cells[("1×4×32", "fastest")] == "overall"
    assert cells[("1×1×32", "fastest")] == "at 1 core" and cells[("2×1×32", "fastest")] == "at 2 cores"
    assert cells[("2×2×32", "fastest")] == ""
    # letters follow row order: 1×2×256 comes before 4×1×32
    assert cells[("1×2×256", "hours")] == "– a"
    assert cells[("4×1×32", "hours")] == "did not converge b"
    assert cells[("2×1×32", "global batch")] == "64" and cells[("2×1×32", "epochs")] == "4.50"
    assert table.footnotes == ("a: no convergence run for global batch 256 yet",
                               "b: global batch 128 did not converge by 10 epochs (1 of 3 seeds converged)")
    marks = {label: row[4].mark for label, row in table.rows}
    assert marks["1×4×32"] == BEST and marks["4×1×32"] == FAILED and marks["1×2×256"] == MISSING
    assert list(marks.values()).count(BEST) == 1
    assert "1,200,000" in table.caption


def test_without_samples_per_epoch_there_are_epochs_but_no_hours(sweep, cell_texts):
    times = ttt.layout_times(sweep, {}, conv.convergence_by_batch(sweep))
    assert all(t.hours is None for t in times)
    cells = cell_texts(ttt.time_to_train_table(times, None))
    assert cells[("1×1×32", "epochs")] == "3.50"
    assert cells[("1×1×32", "hours")].startswith("– ")
    assert ttt.fastest(times) == (None, {})


def test_empty_time_to_train_table():
    table = ttt.time_to_train_table([], SAMPLES_PER_EPOCH)
    assert table.rows == () and "no data yet" in table.caption


def test_hardware_efficiency_arithmetic(make, cell_texts):
    records = [make.tp(1, 1, 32, 4000.0, flops=6.3e6), make.tp(2, 2, 32, 13000.0, flops=6.3e6),
               make.tp(4, 1, 32, 14000.0), make.tp(1, 4, 32, 11000.0, flops=6.3e6),
               make.peak_at_once(1, 1, [150.0]), make.peak_at_once(2, 2, [260.0, 250.0])]
    table = tables.hardware_efficiency_table(records)
    cells = cell_texts(table)
    rows = {label: row for label, row in table.rows}
    # 13,000 samples/s × 6.3 MFLOP = 81.9 GFLOP/s; the 2×2 layout's own peak 260 + 250 = 510; 81.9 / 510 = 16.06 %
    assert cells[("2×2×32", "GFLOP/s")] == "81.9" and cells[("2×2×32", "peak GFLOP/s")] == "510"
    assert rows["2×2×32"][4].value == pytest.approx(100 * 81.9 / 510)
    assert cells[("2×2×32", "% of peak")] == "16.1%"
    # 4,000 × 6.3 MFLOP = 25.2 GFLOP/s of 150 = 16.8 %, the best
    assert rows["1×1×32"][4].value == pytest.approx(16.8) and rows["1×1×32"][4].mark == BEST
    assert cells[("1×4×32", "peak GFLOP/s")] == "– a" and cells[("1×4×32", "% of peak")] == "–"
    assert cells[("4×1×32", "GFLOP/s")] == "– b" and cells[("4×1×32", "% of peak")] == "–"
    # 4×1 has no peak of its own: 4 × the 1-rank peak, footnoted as an overstatement
    assert cells[("4×1×32", "peak GFLOP/s")] == "600 c"
    assert table.footnotes == ("a: no fp32 peak measured for 4 thread(s)",
                               "b: no FLOPs per sample: not counted in the trial",
                               "c: ranks × the peak of one rank alone (recorded before peaks were measured with all "
                               "ranks at once; it overstates what the ranks reach together)")
    assert [label for label, _ in table.rows] == ["1×1×32", "1×4×32", "2×2×32", "4×1×32"]   # by cores, then ranks


def test_a_layout_whose_trial_counted_no_flops_uses_the_sweeps_figure_and_says_where_from(make, cell_texts):
    records = [make.tp(1, 1, 32, 4000.0, flops=6.3e6), make.tp(4, 1, 32, 14000.0), make.peak_at_once(1, 1, [150.0]),
               make.peak_at_once(4, 1, [150.0] * 4)]
    source = ("counted by orch's FLOP counter (torch's, convolutions over the taps inside the input) on a training "
              "step at local batch 8 in the probe: 6 MFLOP per sample")
    table = tables.hardware_efficiency_table(records, fallback_flops=6.0e6, fallback_source=source)
    cells = cell_texts(table)
    # the trial's own count stands where it has one; 14,000 × 6.0 MFLOP = 84.0 GFLOP/s where it has none
    assert cells[("1×1×32", "GFLOP/s")] == "25.2"
    assert cells[("4×1×32", "GFLOP/s")] == "84.0 a" and cells[("4×1×32", "% of peak")] == "14.0%"
    assert table.footnotes == (f"a: FLOPs per sample not counted in the trial: {source}",)
    assert "as the trial counted one training step" in table.caption
    assert "only the kernel taps inside the input" in table.caption


def test_old_one_rank_peaks_stay_readable_as_ranks_times_peak(make, cell_texts):
    records = [make.tp(2, 2, 32, 13000.0, flops=6.3e6), make.peak(2, 296.0)]   # recorded before concurrent peaks
    table = tables.hardware_efficiency_table(records)
    cells = cell_texts(table)
    assert cells[("2×2×32", "peak GFLOP/s")] == "592 a" and cells[("2×2×32", "% of peak")] == "13.8%"
    assert table.footnotes[0].startswith("a: ranks × the peak of one rank alone")


def test_a_layout_measured_at_once_wins_over_ranks_times_one_rank(make, cell_texts):
    # a 2-core machine seen: 2 ranks at once 288 GFLOP/s, while 2 × one rank alone would say 427
    records = [make.tp(2, 1, 32, 7600.0, flops=6.3e6), make.peak(1, 213.5), make.peak_at_once(2, 1, [145.0, 143.0])]
    table = tables.hardware_efficiency_table(records)
    cells = cell_texts(table)
    assert cells[("2×1×32", "peak GFLOP/s")] == "288" and table.footnotes == ()
    assert table.rows[0][1][4].value == pytest.approx(100 * 7600 * 6.3e6 / 1e9 / 288)


def test_peak_precision_defaults_to_fp32_else_the_one_measured(make):
    both = [make.tp(1, 1, 32, 1000.0, flops=1e9), make.peak(1, 100.0, "fp32"), make.peak(1, 400.0, "bf16")]
    assert tables.hardware_efficiency_table(both).rows[0][1][4].value == pytest.approx(1000.0)   # 1,000 / 100
    assert tables.hardware_efficiency_table(both, precision="bf16").rows[0][1][4].value == pytest.approx(250.0)
    only_bf16 = [both[0], both[2]]
    table = tables.hardware_efficiency_table(only_bf16)
    assert table.rows[0][1][4].value == pytest.approx(250.0) and "bf16" in table.caption


def test_hardware_efficiency_without_ok_layouts_says_no_data_yet(make):
    table = tables.hardware_efficiency_table([make.bad(1, 1, 32, "failed", "x"), make.peak(1, 100.0)])
    assert table.rows == () and "no data yet" in table.caption
