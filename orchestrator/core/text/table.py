"""A small table model shared by the plan and every report table, so that the terminal, Markdown, CSV
and JSON renderings of one table can never disagree about its content."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from string import ascii_lowercase

from orchestrator.core.json.values import JsonReadable

# Cell marks, for styling and for machine readers.
BEST = "best"
INFEASIBLE = "infeasible"
FAILED = "failed"
MISSING = "missing"

DASH = "–"
GRID_CORNER = "threads \\ ranks"     # rows threads per rank, columns ranks


@dataclass(frozen=True, slots=True)
class Cell:
    text: str                       # what a person reads: '1.87', '– a', 'oom'
    value: float | None = None      # the number behind it, for CSV/JSON
    mark: str | None = None         # BEST, INFEASIBLE, FAILED, MISSING or None

    @staticmethod
    def number(value: float, fmt: str = "{:.2f}", mark: str | None = None) -> Cell:
        return Cell(fmt.format(value), value, mark)


@dataclass(frozen=True, slots=True)
class Table:
    """Rows × columns of cells, with the labels of both axes and lettered footnotes."""

    name: str                                  # file-safe id, e.g. 'scalability-b4'
    title: str
    corner: str                                # top-left label, e.g. 'threads \\ ranks'
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Cell, ...]], ...]
    footnotes: tuple[str, ...] = ()            # already lettered: 'a: ...'
    caption: str = ""                          # one paragraph under the title: what a cell means
    key_columns: tuple[str, ...] = ()          # kept first where a terminal is too narrow for every column

    def to_dict(self) -> dict[str, JsonReadable]:
        return {
            "name": self.name, "title": self.title, "caption": self.caption, "corner": self.corner,
            "columns": list(self.columns),
            "rows": [{"label": label, "cells": [{"text": c.text, "value": c.value, "mark": c.mark} for c in cells]}
                     for label, cells in self.rows],
            "footnotes": list(self.footnotes),
        }


@dataclass(slots=True)
class Footnotes:
    """Letters for distinct messages, in order of first use.

    >>> notes = Footnotes()
    >>> notes.letter("too big"), notes.letter("spans sockets"), notes.letter("too big")
    ('a', 'b', 'a')
    >>> notes.lines()
    ('a: too big', 'b: spans sockets')
    """

    messages: list[str] = field(default_factory=list)

    def letter(self, message: str) -> str:
        if message not in self.messages:
            self.messages.append(message)
        index = self.messages.index(message)
        letters = ascii_lowercase
        return letters[index] if index < len(letters) else f"n{index}"

    def letters(self, messages: list[str] | tuple[str, ...]) -> str:
        return ",".join(self.letter(m) for m in messages)

    def lines(self) -> tuple[str, ...]:
        return tuple(f"{self.letter(m)}: {m}" for m in self.messages)


def mark_best(rows: list[list[Cell]], columns: Sequence[int] | None = None) -> None:
    """Mark the highest number among `columns` (all columns by default; every cell on a tie)."""
    where = [(cells, i) for cells in rows for i in (columns if columns is not None else range(len(cells)))
             if cells[i].value is not None]
    if not where:
        return
    top = max(v for cells, i in where if (v := cells[i].value) is not None)
    for cells, i in where:
        if cells[i].value == top:
            cells[i] = Cell(cells[i].text, cells[i].value, BEST)


def grid_table(*, name: str, title: str, caption: str, ranks: Sequence[int], threads: Sequence[int],
               cell: Callable[[int, int], Cell], notes: Footnotes, best: bool = False) -> Table:
    """The grid layout shared by the plan and the throughput tables: one row per threads-per-rank value,
    one column per rank count, `cell(ranks, threads)` in each, filled row by row (so footnote letters
    follow reading order); `best` marks the highest number."""
    rows = [(str(threads_per_rank), [cell(r, threads_per_rank) for r in ranks]) for threads_per_rank in threads]
    if best:
        mark_best([cells for _, cells in rows])
    return Table(name=name, title=title, corner=GRID_CORNER, columns=tuple(str(r) for r in ranks),
                 rows=tuple((label, tuple(cells)) for label, cells in rows), footnotes=notes.lines(),
                 caption=caption)
