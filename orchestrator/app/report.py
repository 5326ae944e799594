"""`orch report`, `orch.load`, `orch.track`: a results folder read (finished or partial), its report written
from the records, and the folder logged to trackers after the fact. Records are only read, never changed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.app.options import ReportOptions, TrackOptions
from orchestrator.errors import InputError
from orchestrator.io.store import Results as StoredResults

if TYPE_CHECKING:
    from orchestrator.core.predict.fit import Fitted
    from orchestrator.report.data import ReportData

log = logging.getLogger(__name__)


def load(folder: str) -> StoredResults:
    """A results folder written by `orch sweep`, finished or partial (NotAResultsFolder when it is not one)."""
    from orchestrator.io.store import load_results

    log.debug("reading the results folder %s", folder)
    return load_results(folder)


def fitted(results: StoredResults) -> Fitted | None:
    """The step-time and epochs models `orch predict` fits, fitted to the folder's records with their held-out
    validation, for the report's Prediction section; None where the records cannot support a fit."""
    from orchestrator.core.predict.fit import NotFittable, fit_all

    try:
        return fit_all(results.records, coverage=True)
    except NotFittable:
        return None


def analyzed(results: StoredResults) -> ReportData:
    """Everything the report shows, its models fitted once: the files, the terminal and the trackers' list of
    files all render this one (report.data.analyze is pure and never fits)."""
    from orchestrator.report.data import analyze

    return analyze(results, fitted(results))


def check_trackers(options: ReportOptions) -> None:
    """TrackingUnavailable (bad input) when a tracker asked for is unknown or its package does not import,
    before anything is written."""
    from orchestrator.io.tracking import choose, require

    require(choose(None, mlflow=options.mlflow or False, tensorboard=options.tensorboard, others=options.trackers))


def formats_of(options: ReportOptions) -> frozenset[str]:
    """The formats asked for, `all` spelled out (default: the terminal and every file)."""
    from orchestrator.report.build import FORMATS

    chosen = set(options.formats or ("terminal", "all"))
    if "all" in chosen:
        chosen |= set(FORMATS)
    return frozenset(chosen)


@dataclass(frozen=True, slots=True)
class Written:
    """Where the report went, the file formats asked for and the files written (none when only the terminal
    was asked for)."""

    out_dir: Path
    formats: tuple[str, ...]
    paths: tuple[Path, ...]


def write(options: ReportOptions, results: StoredResults, data: ReportData) -> Written:
    """The report's files in the formats asked for, into `options.out` or RESULTS/report (refused when that is
    a link: LinkedReportFolder). InputError for a folder that cannot be written."""
    from orchestrator.report.build import FORMATS, report_folder, write_report

    chosen = formats_of(options)
    files = [f for f in FORMATS if f in chosen]
    out_dir = report_folder(results, options.out)
    if not files:
        return Written(out_dir, (), ())
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir}: is a file, not a folder")
    try:
        paths = write_report(results, data, out_dir, files)
    except OSError as error:   # a read-only or full file system, a folder not ours
        where = f"--out {out_dir}" if options.out else f"the report folder {out_dir}"
        raise InputError(f"{where}: cannot write the report there ({error.strerror}); give --out DIR") from None
    return Written(out_dir, tuple(files), tuple(paths))


def track_written(options: ReportOptions, results: StoredResults, data: ReportData, written: Written) -> bool | None:
    """The folder logged to the trackers `options` ask for, with the report's own files only (those written
    now, else those of its names in the report folder); None when none is asked for, else whether every
    tracker logged everything."""
    from orchestrator.report.build import report_file_names

    if not (options.mlflow or options.tensorboard or options.trackers):
        return None
    uploads = written.paths or tuple(written.out_dir / name for name in report_file_names(results, data))
    return track(TrackOptions(folder=str(results.path), mlflow=options.mlflow, tensorboard=options.tensorboard,
                              trackers=options.trackers, report_files=tuple(str(p) for p in uploads)))


def track(options: TrackOptions) -> bool:
    """Log a finished or partial results folder after the fact: what a sweep could not log as it ran (a server
    that was down, no tracking asked for), into the same MLflow parent run and TensorBoard folder, duplicating
    nothing; and the report's files: `report_files`, else those of `report_dir` (default RESULTS/report) that
    `orch report` writes, each a regular file, never a link. The MLflow URI is the option's or
    $MLFLOW_TRACKING_URI, never the folder's (a hint names it: docs/trust.md). True when every tracker logged
    everything; a failure is said as a warning."""
    from orchestrator.io.store import REPORT_DIR
    from orchestrator.io.tracking import End, after_the_fact, open_tracking
    from orchestrator.report.build import report_file_names

    results = load(options.folder)
    choice, hint = after_the_fact(results.spec.tracking, mlflow=options.mlflow,
                                  tensorboard=options.tensorboard, others=options.trackers)
    if not choice.wanted:
        raise InputError("nothing to log to: give mlflow (a tracking URI, or True) or tensorboard=True")
    if hint is not None:
        log.warning("%s", hint)
    tracking = open_tracking(choice, results.path, results.spec.name, live=False)
    if options.report_files is None:
        report = Path(options.report_dir) if options.report_dir else results.path / REPORT_DIR
        named = options.report_dir is not None   # a link the user names is theirs; the folder's own must not be one
        files = ([report / file for file in report_file_names(results, analyzed(results))]
                 if named or not report.is_symlink() else [])
    else:
        files = [Path(f) for f in options.report_files]
    tracking.open(results)
    tracking.finish(results, files, End.REPORT)
    return tracking.ok
