"""A sweep's report written: every table of its `ReportData` (report.data) as CSV and JSON, the RCP-style
convergence file, the plots and the Markdown document that ties them together (`write_report`), or the same
tables as rich renderables (`terminal_report`). Output is deterministic (no generation time, no absolute paths) so
golden files stay stable.

    results = load_results("results/classifier")
    data = orchestrator.app.report.analyzed(results)             # the tables, the models fitted once
    paths = write_report(results, data, results.path / "report")  # report.md, CSV, JSON, PNG
    Console().print(*terminal_report(results, data))
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import InputError
from orchestrator.io.files import write_atomic
from orchestrator.io.store import REPORT_DIR, Results
from orchestrator.report import markdown, plots
from orchestrator.report.data import ReportData, rcp_file_name
from orchestrator.report.render import to_csv, to_json, to_rich

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import RenderableType

FORMATS = ("md", "csv", "json", "png")
REPORT_FILE = "report.md"


def check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; valid formats are: {', '.join(FORMATS)}")
    return tuple(formats)


def write_report(results: Results, data: ReportData, out_dir: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write the report into `out_dir` (created if needed) and return the files written, in order:
    per table `<name>.csv` / `<name>.json`, `rcps_<workload>.json`, the PNG plots, then `report.md`.

    Files from an earlier report that this one does not produce are left alone.
    """
    formats = check_formats(formats)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def put(name: str, text: str) -> None:
        path = out_dir / name
        write_atomic(path, text, durable=False)   # never through a link; a second `orch report` never tears it
        written.append(path)

    for table in data.tables():
        if "csv" in formats:
            put(f"{table.name}.csv", to_csv(table))
        if "json" in formats:
            put(f"{table.name}.json", to_json(table))
    if "json" in formats and data.rcp:
        put(rcp_file_name(results), json.dumps(data.rcp, indent=2) + "\n")
    figures: dict[str, list[str]] = {}
    if "png" in formats:
        for section, name, fig in _figures(data, results):
            written.append(plots.save(fig, out_dir / name))
            figures.setdefault(section, []).append(name)
    if "md" in formats:
        files = [p.name for p in written]
        from orchestrator.report.profile_report import profile_links

        text = markdown.render(results, data, figures=figures, files=files)
        put(REPORT_FILE, text + profile_links(results.path, out_dir))
    return written


class LinkedReportFolder(InputError):
    """RESULTS/report is a link: a report is written there only when the user names the folder (--out)."""


def report_folder(results: Results, out_dir: str | Path | None) -> Path:
    """Where a report goes: `out_dir` as the user named it (a link included: theirs to make), else
    RESULTS/report, refused when it is a link (LinkedReportFolder): a results folder someone else handed over
    could point it at any folder of the user's, and a report would overwrite files of the same names there."""
    if out_dir is not None:
        return Path(out_dir)
    default = results.path / REPORT_DIR
    if default.is_symlink():
        raise LinkedReportFolder(f"the report folder {default} is a link (to {os.readlink(default)[:200]!r}): orch "
                                 "writes a report through a link only into a folder you name; give --out DIR")
    return default


def report_file_names(results: Results, data: ReportData) -> list[str]:
    """The names of every file `write_report` may write for these results (the files `orch report --mlflow`
    uploads from RESULTS/report when it wrote none itself): nothing else in the folder is the report's."""
    names = [f"{t.name}.{ext}" for t in data.tables() for ext in ("csv", "json")]
    names += [rcp_file_name(results), REPORT_FILE, "throughput-vs-cores.png", "convergence.png",
              "time-to-train.png", "allreduce.png"]
    names += [f"{t.name}.png" for t in data.scalability]
    return names


def _figures(data: ReportData, results: Results) -> Iterator[tuple[str, str, Figure]]:
    """(section, file name, figure) for every plot that has data."""
    candidates: list[tuple[str, str, Callable[[], Figure | None]]] = [
        ("Scalability", f"{t.name}.png", partial(plots.heatmap_figure, t)) for t in data.scalability]
    candidates += [
        ("Throughput", "throughput-vs-cores.png", partial(plots.throughput_figure, results.records)),
        ("Convergence", "convergence.png", partial(plots.convergence_figure, data.convergence)),
        ("Time to train", "time-to-train.png", partial(plots.time_to_train_figure, data.times)),
    ]
    if data.fitted is not None:
        from orchestrator.report.prediction import calibration_figure

        candidates.append(("Prediction", "allreduce.png", partial(calibration_figure, data.fitted)))
    for section, name, draw in candidates:
        fig = draw()
        if fig is not None:
            yield section, name, fig


def terminal_report(results: Results, data: ReportData) -> list[RenderableType]:
    """Rich renderables: a summary, then every table under its section heading (for `orch report
    --format terminal` and the end of `orch sweep`)."""
    from rich.rule import Rule
    from rich.text import Text

    name = results.spec.name
    out: list[RenderableType] = [Rule(f"orch report: {name}"), Text("\n".join(markdown.summary_lines(results, data)))]
    out += [Text(f"warning: {warning}", style="yellow") for warning in data.warnings]
    for section, tables in data.sections():
        out.append(Rule(section, style="dim"))
        out += [to_rich(t) for t in tables] if tables else [Text(markdown.empty_message(results, section))]
    errors = markdown.skipped_lines(results)
    if errors:
        out += [Rule("Skipped record lines", style="dim"), Text("\n".join(errors), style="yellow")]
    return out
