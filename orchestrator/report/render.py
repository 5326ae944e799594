"""Render `orchestrator.core.text.table.Table` as terminal (rich), Markdown, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json

from orchestrator.core.text.table import BEST, FAILED, INFEASIBLE, MISSING, Table

_STYLES = {BEST: "bold green", INFEASIBLE: "dim", FAILED: "bold red", MISSING: "dim"}


def to_rich(table: Table):
    """A rich renderable: the table with its caption above and footnotes below, laid out for the width of the
    console it is printed on (`FittedTable`)."""
    return FittedTable(table)


class FittedTable:
    """A table that a person can read at the console's width (80 columns by default), never cut to "lea…".

    Every column when they fit; else the corner, the table's key columns and as many others as fit, in the
    table's order, with a line naming the columns left out (every rendering to a file keeps them all); where not
    even one column fits beside the row labels, the table turned on its side: a block per row, a line per cell.
    Measured at render time (rich's `__rich_console__`), so `orch sweep`'s end, `orch report` and `orch predict`
    all fit whatever terminal they print on."""

    def __init__(self, table: Table):
        self.table = table

    def __rich_console__(self, console, options):
        from rich.text import Text

        table, width = self.table, options.max_width
        if table.caption:
            yield Text(table.caption, style="italic")
        shown = _columns_that_fit(table, width)
        if shown:
            yield _rich_table(table, shown)
            left_out = [c for i, c in enumerate(table.columns) if i not in shown]
            if left_out:
                yield Text(f"{len(left_out)} more column(s) at {width} columns: {', '.join(left_out)} (every "
                           f"column is in {table.name}.csv and the Markdown report, or on a wider terminal)",
                           style="dim")
        else:
            yield from _sideways(table)
        yield from (Text(note, style="dim") for note in table.footnotes)


def _widths(table: Table) -> tuple[int, list[int]]:
    """(the corner column's, each column's) width rich needs without cutting: a header may wrap between
    words, a cell is kept on one line."""
    from rich.cells import cell_len

    def header(text: str) -> int:
        return max((cell_len(word) for word in text.split()), default=0)

    corner = max([cell_len(table.corner), *(cell_len(label) for label, _ in table.rows)])   # kept on one line
    columns = [max([header(name), *(cell_len(cells[i].text) for _, cells in table.rows if i < len(cells))])
               for i, name in enumerate(table.columns)]
    return corner, columns


def _columns_that_fit(table: Table, width: int) -> tuple[int, ...]:
    """Indices of the columns to show at `width`: all of them if they fit, else key columns first, then the
    others in order, while they fit; () when not even one fits beside the row labels."""
    corner, columns = _widths(table)

    def total(chosen: list[int]) -> int:   # a column costs its text + two spaces of padding + one border
        return corner + 3 + sum(columns[i] + 3 for i in chosen) + 1

    everything = list(range(len(columns)))
    if total(everything) <= width:
        return tuple(everything)
    keys = [i for i, name in enumerate(table.columns) if name in table.key_columns]
    chosen: list[int] = []
    for i in keys + [i for i in everything if i not in keys]:
        if total([*chosen, i]) <= width:
            chosen.append(i)
    return tuple(sorted(chosen))


def _rich_table(table: Table, shown: tuple[int, ...]):
    from rich.table import Table as RichTable
    from rich.text import Text

    rich_table = RichTable(title=table.title, title_justify="left")
    rich_table.add_column(table.corner, justify="right", style="bold", no_wrap=True)
    for i in shown:
        rich_table.add_column(table.columns[i], justify="right")
    for label, cells in table.rows:
        rich_table.add_row(label, *(Text(cells[i].text, style=_STYLES.get(cells[i].mark or "", ""), no_wrap=True)
                                    if i < len(cells) else Text("") for i in shown))
    return rich_table


def _sideways(table: Table):
    """The table turned on its side, for a console too narrow for a column beside the row labels."""
    from rich.text import Text

    yield Text(table.title, style="italic")
    for label, cells in table.rows:
        yield Text(f"{table.corner}: {label}", style="bold")
        for name, cell in zip(table.columns, cells):
            yield Text(f"  {name}: {cell.text}", style=_STYLES.get(cell.mark or "", ""))


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(table: Table, level: int = 3) -> str:
    lines = [f"{'#' * level} {table.title}", ""]
    if table.caption:
        lines += [table.caption, ""]
    header = [table.corner, *table.columns]
    lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * len(table.columns)) + "|")
    for label, cells in table.rows:
        texts = [f"**{c.text}**" if c.mark == BEST else c.text for c in cells]
        lines.append("| " + " | ".join(_md_escape(t) for t in [label, *texts]) + " |")
    if table.footnotes:
        lines.append("")
        lines += [f"- {_md_escape(note)}" for note in table.footnotes]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    """Numbers where there are numbers (so spreadsheets can compute), else the cell text; footnotes as
    trailing comment rows."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([table.corner, *table.columns])
    for label, cells in table.rows:
        writer.writerow([label, *(repr_number(c.value) if c.value is not None else c.text for c in cells)])
    for note in table.footnotes:
        writer.writerow([f"# {note}"])
    return out.getvalue()


def repr_number(value: float) -> str:
    """Shortest text that round-trips, without float noise for integral values."""
    return str(int(value)) if float(value).is_integer() else repr(round(value, 6))


def to_json(table: Table) -> str:
    return json.dumps(table.to_dict(), indent=2) + "\n"
