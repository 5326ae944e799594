"""A layout that grows an axis no measured pair grows: its centre comes from the other axis, and the row says that
this does not predict it and what to measure. The cells are written by hand: ranks scale 1.7× on two cores."""

from __future__ import annotations

import pytest

from orchestrator.core.predict import interval
from orchestrator.core.predict.evidence import SAME_CORES_AXIS_SPAN, evidence_of
from orchestrator.core.predict.step import Cell, Layout

BATCHES = (16, 32, 64)


def cells_growing(axis: str) -> list[Cell]:
    grown = Layout(2, 1, 0) if axis == "ranks" else Layout(1, 2, 0)
    return [Cell(Layout(shape.ranks, shape.threads, b), (100.0 + b) * (1.7 if shape.cores == 2 else 1.0))
            for shape in (Layout(1, 1, 0), grown) for b in BATCHES]


@pytest.mark.parametrize("measured, predicted", [("ranks", Layout(1, 2, 32)), ("threads", Layout(2, 1, 32))])
def test_the_row_says_the_other_axis_does_not_predict_this_one(measured, predicted):
    basis = interval.basis_of(cells_growing(measured), {}, [], None, {})
    p = interval.predict_cell(basis, predicted)
    other = "threads" if measured == "ranks" else "ranks"
    note = next(n for n in p.notes if "central estimate" in n)
    assert f"no cell grows the {other}" in note and f"more {other} settles it" in note
    lo, hi = SAME_CORES_AXIS_SPAN
    assert f"{lo:g}-{hi:g}×" in note
    assert p.low < p.value <= p.high


def test_only_the_axis_no_pair_grows_is_unmeasured():
    ev = evidence_of(cells_growing("ranks"), {})
    assert ev.unmeasured_axes(Layout(2, 2, 32), Layout(1, 1, 32)) == ("threads",)
    assert ev.unmeasured_axes(Layout(2, 1, 32), Layout(1, 1, 32)) == ()
    both = evidence_of(cells_growing("ranks") + cells_growing("threads"), {})
    assert both.unmeasured_axes(Layout(2, 2, 32), Layout(1, 1, 32)) == ()


def test_the_span_is_one_that_neither_axis_predicts():
    lo, hi = SAME_CORES_AXIS_SPAN
    assert lo < 1 < hi
