"""Scalability family against hand-computed values: normalization, footnotes, baseline fallback,
absolute throughput, scaling efficiency and weak scaling."""

from dataclasses import replace

import pytest

from orchestrator.core.tabulate import throughput as tables
from orchestrator.core.text.table import BEST, FAILED, INFEASIBLE, MISSING

DERIVED = {"ranks": [1, 2, 4], "threads": [1, 2], "local_batches": [32]}


@pytest.fixture
def grid(make):
    """1 rank × 1 thread = 4,000 samples/s; the rest hand-picked so the ratios are easy to check."""
    return [make.tp(1, 1, 32, 4000.0), make.tp(2, 1, 32, 7600.0, cv=0.012), make.tp(4, 1, 32, 14000.0),
            make.tp(1, 2, 32, 7000.0), make.tp(2, 2, 32, 13000.0),
            make.infeasible(4, 2, 32, "4 ranks × 2 cores = 8 > 6 cores", "memory: 4 ranks × 3 GiB > 10 GiB")]


def test_cells_are_median_throughput_over_the_1_rank_fewest_threads_cell(grid, cell_texts):
    [table] = tables.scalability_tables(grid, DERIVED)
    assert table.name == "scalability-b32"
    assert table.columns == ("1", "2", "4") and [label for label, _ in table.rows] == ["1", "2"]
    cells = cell_texts(table)
    # 7,600 / 4,000 = 1.90; 14,000 / 4,000 = 3.50; 7,000 / 4,000 = 1.75; 13,000 / 4,000 = 3.25
    assert [cells[("1", c)] for c in ("1", "2", "4")] == ["1.00", "1.90", "3.50"]
    assert [cells[("2", c)] for c in ("1", "2")] == ["1.75", "3.25"]
    assert table.rows[0][1][2].value == pytest.approx(3.5)
    assert [c.mark for _, row in table.rows for c in row].count(BEST) == 1 and table.rows[0][1][2].mark == BEST
    assert "Baseline: 1 rank × 1 thread (1 core) at 4,000 samples/s." in table.caption
    assert "intended" not in table.caption


def test_points_without_a_number_get_lettered_footnotes(make, cell_texts):
    records = [make.tp(1, 1, 32, 4000.0),
               make.infeasible(2, 1, 32, "spans sockets", "too little memory"),
               make.infeasible(4, 1, 32, "too little memory"),
               make.bad(1, 2, 32, "oom", "rank 0: USS 3,900 MiB > budget 3,686 MiB"),
               make.bad(2, 2, 32, "timeout"),
               # 4 × 2 is absent from the records: not run yet
               ]
    [table] = tables.scalability_tables(records, DERIVED)
    cells = cell_texts(table)
    assert cells[("1", "2")] == "– a,b"          # both reasons, in order of first use
    assert cells[("1", "4")] == "– b"            # the shared reason keeps its letter
    assert cells[("2", "1")] == "oom c"
    assert cells[("2", "2")] == "timeout d"
    assert cells[("2", "4")] == "– e"
    assert table.footnotes == ("a: spans sockets", "b: too little memory",
                               "c: rank 0: USS 3,900 MiB > budget 3,686 MiB", "d: no reason recorded",
                               "e: not run yet")
    marks = {(label, col): c.mark for label, row in table.rows for col, c in zip(table.columns, row)}
    assert marks[("1", "2")] == INFEASIBLE and marks[("2", "1")] == FAILED and marks[("2", "4")] == MISSING


def test_failed_reason_lines_become_separate_footnotes(make, cell_texts):
    records = [make.tp(1, 1, 32, 4000.0), make.bad(2, 1, 32, "failed", "rank 1 exited with -11\nrank 0 hung")]
    [table] = tables.scalability_tables(records, {"ranks": [1, 2], "threads": [1], "local_batches": [32]})
    assert cell_texts(table)[("1", "2")] == "failed a,b"
    assert table.footnotes == ("a: rank 1 exited with -11", "b: rank 0 hung")


def test_missing_baseline_falls_back_to_the_fewest_cores_ok_cell_and_says_so(make, cell_texts):
    records = [make.bad(1, 1, 32, "timeout", "over timeout_s 900 s"),
               make.tp(2, 1, 32, 7600.0), make.tp(1, 2, 32, 7000.0), make.tp(2, 2, 32, 13000.0)]
    [table] = tables.scalability_tables(records, {"ranks": [1, 2], "threads": [1, 2], "local_batches": [32]})
    cells = cell_texts(table)
    # 2 × 1 and 1 × 2 both use 2 cores; the one with fewer ranks wins: 1 × 2 at 7,000.
    assert cells[("2", "1")] == "1.00"
    assert cells[("1", "2")] == "1.09"           # 7,600 / 7,000 = 1.0857
    assert cells[("2", "2")] == "1.86"           # 13,000 / 7,000 = 1.857
    assert cells[("1", "1")] == "timeout a"
    assert ("The intended baseline, 1 rank × 1 thread (1 core), did not run ok (timeout); normalized instead to "
            "the ok cell with the fewest cores, 1 rank × 2 threads (2 cores).") in table.caption
    assert "at 7,000 samples/s" in table.caption


def test_baseline_not_run_yet_is_named_as_such(make):
    records = [make.tp(2, 1, 32, 7600.0)]
    base = tables.find_baseline(tables.throughput_index(records), tables.grid_axes(records, DERIVED), 32)
    assert base.point == (2, 1, 32) and base.intended == (1, 1, 32) and base.cores == 2
    assert "1 rank × 1 thread (1 core), was not run yet" in base.note


def test_no_ok_cell_says_there_is_nothing_to_normalize_to(make):
    records = [make.bad(1, 1, 32, "oom", "x"), make.infeasible(2, 1, 32, "y")]
    [table] = tables.scalability_tables(records, {"ranks": [1, 2], "threads": [1], "local_batches": [32]})
    assert all(c.value is None for _, row in table.rows for c in row)
    assert "nothing to normalize to" in table.caption


def test_one_table_per_local_batch_each_with_its_own_baseline(make, cell_texts):
    records = [make.tp(1, 1, 32, 4000.0), make.tp(2, 1, 32, 6000.0),
               make.tp(1, 1, 256, 5000.0), make.tp(2, 1, 256, 9000.0)]
    small, large = tables.scalability_tables(records, {"ranks": [1, 2], "threads": [1], "local_batches": [32, 256]})
    assert (small.name, large.name) == ("scalability-b32", "scalability-b256")
    assert cell_texts(small)[("1", "2")] == "1.50" and cell_texts(large)[("1", "2")] == "1.80"


def test_axes_include_points_the_derived_grid_does_not_list(make):
    records = [make.tp(1, 1, 32, 4000.0), make.tp(8, 1, 32, 20000.0)]
    [table] = tables.scalability_tables(records, {"ranks": [1, 2], "threads": [1], "local_batches": [32]})
    assert table.columns == ("1", "2", "8")


def test_no_records_and_no_axes_give_no_tables():
    assert tables.scalability_tables([], {}) == []
    assert tables.weak_scaling_tables([], {}) == []


def test_absolute_throughput_shows_the_cv_in_percent(grid, cell_texts):
    [table] = tables.throughput_tables(grid, DERIVED)
    cells = cell_texts(table)
    assert cells[("1", "2")] == "7,600 ±1.2%"     # cv 0.012
    assert cells[("1", "1")] == "4,000 ±1.0%"
    assert table.rows[0][1][1].value == 7600.0
    assert table.rows[0][1][2].mark == BEST        # 14,000 is the highest


def test_scaling_efficiency_is_speedup_over_core_ratio(grid, cell_texts):
    [table] = tables.efficiency_tables(grid, DERIVED)
    values = {(label, col): c.value for label, row in table.rows for col, c in zip(table.columns, row)}
    assert values[("1", "1")] == pytest.approx(100.0)
    assert values[("1", "2")] == pytest.approx(95.0)      # 1.9 speedup on 2 cores
    assert values[("1", "4")] == pytest.approx(87.5)      # 3.5 on 4
    assert values[("2", "2")] == pytest.approx(81.25)     # 3.25 on 4
    assert cell_texts(table)[("2", "2")] == "81%"
    assert cell_texts(table)[("2", "4")] == "– a,b"


def test_scaling_efficiency_uses_the_fallback_baseline_cores(make):
    records = [make.bad(1, 1, 32, "timeout", "t"), make.tp(1, 2, 32, 7000.0), make.tp(2, 2, 32, 13000.0)]
    [table] = tables.efficiency_tables(records, {"ranks": [1, 2], "threads": [1, 2], "local_batches": [32]})
    # speedup 13,000 / 7,000 = 1.857 on 4 / 2 = 2× the cores → 92.86 %
    assert table.rows[1][1][1].value == pytest.approx(100 * 13000 / 7000 / 2)


def test_weak_scaling_compares_with_r_times_the_1_rank_throughput(grid, cell_texts):
    [table] = tables.weak_scaling_tables(grid, DERIVED)
    values = {(label, col): c.value for label, row in table.rows for col, c in zip(table.columns, row)}
    assert values[("1", "2")] == pytest.approx(95.0)                     # 7,600 / (2 × 4,000)
    assert values[("1", "4")] == pytest.approx(87.5)                     # 14,000 / (4 × 4,000)
    assert values[("2", "2")] == pytest.approx(100 * 13000 / (2 * 7000))  # 92.86, against 1 × 2 threads


def test_weak_scaling_without_a_1_rank_reference_says_so(make, cell_texts):
    records = [make.bad(1, 1, 32, "oom", "too big"), make.tp(2, 1, 32, 7600.0)]
    [table] = tables.weak_scaling_tables(records, {"ranks": [1, 2], "threads": [1], "local_batches": [32]})
    assert cell_texts(table)[("1", "2")] == "– b"
    assert table.footnotes == ("a: too big", "b: no ok 1-rank measurement at 1 thread(s) per rank to compare with")


def test_weak_scaling_starts_from_the_first_rank_count_when_1_is_not_in_the_grid(make):
    records = [make.tp(2, 1, 32, 8000.0), make.tp(4, 1, 32, 14000.0)]
    [table] = tables.weak_scaling_tables(records, {"ranks": [2, 4], "threads": [1], "local_batches": [32]})
    assert table.rows[0][1][1].value == pytest.approx(87.5)              # 14,000 / (4/2 × 8,000)


@pytest.mark.parametrize("value, text", [(15234.4, "15,234"), (523.4, "523"), (52.34, "52.3"), (5.234, "5.23"),
                                         (0.05234, "0.0523"), (0.0, "0")])
def test_format_quantity_keeps_three_significant_digits(value, text):
    assert tables.format_quantity(value) == text


def test_an_ok_record_without_its_measurement_is_not_shown_as_a_number(make, cell_texts):
    broken = replace(make.tp(2, 1, 32, 1.0), throughput=None)
    [table] = tables.scalability_tables([make.tp(1, 1, 32, 4000.0), broken],
                                        {"ranks": [1, 2], "threads": [1], "local_batches": [32]})
    assert cell_texts(table)[("1", "2")] == "– a"
    assert table.footnotes == ("a: recorded as ok but without a throughput measurement",)
