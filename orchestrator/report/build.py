"""A sweep's report from its results folder: every table, the RCP-style convergence file, the plots and the
Markdown document that ties them together.

`analyze` is pure (results in, tables out); `write_report` writes files; `terminal_report` gives rich
renderables. Output is deterministic (no generation time, no absolute paths) so golden files stay stable.

    results = load_results("results/classifier")
    paths = write_report(results, results.path / "report")       # report.md, CSV, JSON, PNG
    Console().print(*terminal_report(results))
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.json.values import JsonReadable
from orchestrator.core.measured import convergence as conv
from orchestrator.core.measured.records import Records
from orchestrator.core.tabulate import convergence as conv_table
from orchestrator.core.tabulate import throughput as tab
from orchestrator.core.tabulate import time_to_train as ttt
from orchestrator.core.text.table import Table
from orchestrator.errors import InputError
from orchestrator.io.files import write_atomic
from orchestrator.io.store import REPORT_DIR, Results
from orchestrator.report import markdown, plots
from orchestrator.report.render import to_csv, to_json, to_rich

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import RenderableType

    from orchestrator.core.predict.fit import Fitted

FORMATS = ("md", "csv", "json", "png")
REPORT_FILE = "report.md"


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the report shows, computed from the records."""

    scalability: tuple[Table, ...]          # normalized, one per local batch
    throughput: tuple[Table, ...]           # absolute samples/s with CV
    efficiency: tuple[Table, ...]
    weak_scaling: tuple[Table, ...]
    hardware: Table
    convergence: tuple[conv.BatchConvergence, ...]
    convergence_table: Table
    times: tuple[ttt.LayoutTime, ...]
    time_to_train: Table
    rcp: dict[str, JsonReadable]
    prediction: tuple[Table, ...] = ()       # the fitted models and their held-out validation, when fittable
    fitted: Fitted | None = None             # the fitted models, for the calibration plot
    warnings: tuple[str, ...] = ()           # what makes the figures untrustworthy (a busy machine), said first

    def sections(self) -> list[tuple[str, list[Table]]]:
        """(heading, tables) in report order; a section without tables has no data yet."""
        return [
            ("Scalability", list(self.scalability)),
            ("Throughput", list(self.throughput)),
            ("Scaling efficiency", list(self.efficiency)),
            ("Weak scaling", list(self.weak_scaling)),
            ("Convergence", [self.convergence_table] if self.convergence else []),
            ("Time to train", [self.time_to_train] if self.times else []),
            ("Hardware efficiency", [self.hardware] if self.hardware.rows else []),
            ("Prediction", list(self.prediction)),
        ]

    def tables(self) -> list[Table]:
        return [t for _, tables in self.sections() for t in tables]


def planned_seeds(results: Results) -> tuple[int, ...]:
    return results.spec.convergence.seeds if results.spec.convergence is not None else ()


def platform(results: Results) -> str:
    """'Intel(R) Xeon(R) ...; 1 node(s): 2 socket(s) × 4 cores ...; backend gloo' for the RCP file."""
    env = results.environment
    parts = [env.cpu_model, results.topology.describe() if results.topology else None,
             f"backend {env.backend.chosen}" if env.backend is not None else None]
    return "; ".join(p for p in parts if p)


def analyze(results: Results) -> ReportData:
    """All tables of the report. Pure."""
    records, derived = results.records, results.derived
    batches = conv.convergence_by_batch(records)
    times = tuple(ttt.layout_times(records, derived, batches))
    prediction, fitted = _prediction(records)
    return ReportData(
        scalability=tuple(tab.scalability_tables(records, derived)),
        throughput=tuple(tab.throughput_tables(records, derived)),
        efficiency=tuple(tab.efficiency_tables(records, derived)),
        weak_scaling=tuple(tab.weak_scaling_tables(records, derived)),
        hardware=tab.hardware_efficiency_table(records, fallback_flops=derived.train_flops_per_sample,
                                               fallback_source=(derived.sources or {}).get("flops_per_sample", "")),
        convergence=batches,
        convergence_table=conv_table.convergence_table(batches, planned_seeds(results)),
        times=times,
        time_to_train=ttt.time_to_train_table(times, derived.samples_per_epoch),
        rcp=conv_table.rcp_dict(batches, benchmark=benchmark_name(results), platform=platform(results),
                          when=results.environment.started_at or "", params=dict(results.spec.workload.params)),
        warnings=machine_warnings(records),
        prediction=prediction, fitted=fitted,
    )


def machine_warnings(records: Records) -> tuple[str, ...]:
    """What the records say of the machine they ran on, in the words `orch predict` uses: GEMM peaks that slow
    down on more cores mean a busy machine (or vCPUs sharing a core), and the scaling tables are not findings."""
    from orchestrator.core.predict.data import gemm_peaks
    from orchestrator.core.predict.evidence import disturbed_warning

    warning = disturbed_warning(gemm_peaks(records))
    return (warning,) if warning else ()


def _prediction(records: Records) -> tuple[tuple[Table, ...], Fitted | None]:
    """The Prediction section: the models `orch predict` fits, with their held-out validation; nothing
    when the records cannot support a fit (the section then says which cells would)."""
    from orchestrator.core.predict import tables as ptab
    from orchestrator.core.predict.fit import NotFittable, fit_all

    try:
        fitted = fit_all(records, coverage=True)
    except NotFittable:
        return (), None
    tables = [ptab.model_table(fitted)] + ([ptab.calibration_table(fitted)] if fitted.links else [])
    tables.append(ptab.validation_table(fitted))
    if fitted.points:
        tables.append(ptab.epochs_table(fitted))
    return tuple(tables), fitted


def benchmark_name(results: Results) -> str:
    """The workload's name, as the RCP file's benchmark and in its file name."""
    from orchestrator.core.planning.names import name_problem

    reference = results.spec.workload.name
    # Older folders have no derived.workload: their spec's reference was the workload's name then; a reference
    # that is a path or an import path never names a file.
    fallback = reference if isinstance(reference, str) and name_problem(reference, "", workload=False) is None else None
    return results.derived.workload or fallback or "workload"


def rcp_file_name(results: Results) -> str:
    """Named like MLPerf's files, `rcps_<benchmark>.json`."""
    return f"rcps_{benchmark_name(results)}.json"


def check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; valid formats are: {', '.join(FORMATS)}")
    return tuple(formats)


def write_report(results: Results, out_dir: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write the report into `out_dir` (created if needed) and return the files written, in order:
    per table `<name>.csv` / `<name>.json`, `rcps_<workload>.json`, the PNG plots, then `report.md`.

    Files from an earlier report that this one does not produce are left alone.
    """
    formats = check_formats(formats)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = analyze(results)
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


def report_file_names(results: Results) -> list[str]:
    """The names of every file `write_report` may write for these results (the files `orch report --mlflow`
    uploads from RESULTS/report when it wrote none itself): nothing else in the folder is the report's."""
    data = analyze(results)
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


def terminal_report(results: Results) -> list[RenderableType]:
    """Rich renderables: a summary, then every table under its section heading (for `orch report
    --format terminal` and the end of `orch sweep`)."""
    from rich.rule import Rule
    from rich.text import Text

    data = analyze(results)
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
