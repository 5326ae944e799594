"""Render `orchestrator.core.table.Table` as terminal (rich), Markdown, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json

from orchestrator.core.table import BEST, FAILED, INFEASIBLE, MISSING, Table

_STYLES = {BEST: "bold green", INFEASIBLE: "dim", FAILED: "bold red", MISSING: "dim"}


def to_rich(table: Table):
    """A rich renderable: the table with its caption above and footnotes below."""
    from rich.console import Group
    from rich.table import Table as RichTable
    from rich.text import Text

    # Footnotes go below as plain text: as a rich caption they would wrap to the table's (narrow) width.
    rich_table = RichTable(title=table.title, title_justify="left")
    rich_table.add_column(table.corner, justify="right", style="bold")
    for column in table.columns:
        rich_table.add_column(column, justify="right")
    for label, cells in table.rows:
        rich_table.add_row(label, *(Text(c.text, style=_STYLES.get(c.mark or "", "")) for c in cells))
    parts = [Text(table.caption, style="italic")] if table.caption else []
    notes = [Text(note, style="dim") for note in table.footnotes]
    return Group(*parts, rich_table, *notes)


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
