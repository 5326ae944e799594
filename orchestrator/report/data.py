"""What a sweep's report shows, computed from its results folder and the models fitted to its records: every
table, the convergence aggregates and the RCP-style file's content (`ReportData`, from `analyze`). Pure: the
writers (report.build: files and the terminal; report.markdown: the document) render it, and the fit is handed in
(orchestrator.app.report fits once per report).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.core.json.values import JsonReadable
from orchestrator.core.measured import convergence as conv
from orchestrator.core.measured.records import Records
from orchestrator.core.tabulate import convergence as conv_table
from orchestrator.core.tabulate import throughput as tab
from orchestrator.core.tabulate import time_to_train as ttt
from orchestrator.core.text.table import Table
from orchestrator.io.store import Results

if TYPE_CHECKING:
    from orchestrator.core.predict.fit import Fitted


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


def analyze(results: Results, fitted: Fitted | None) -> ReportData:
    """All tables of the report, with the models `fitted` to the records (None where they cannot be fitted: the
    section then says which cells would). Pure: the fit is the caller's (orchestrator.app.report fits once per
    report, so the files, the terminal and the trackers all show the same fit)."""
    records, derived = results.records, results.derived
    batches = conv.convergence_by_batch(records)
    times = tuple(ttt.layout_times(records, derived, batches))
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
        prediction=prediction_tables(fitted), fitted=fitted,
    )


def machine_warnings(records: Records) -> tuple[str, ...]:
    """What the records say of the machine they ran on, in the words `orch predict` uses: GEMM peaks that slow
    down on more cores mean a busy machine (or vCPUs sharing a core), and the scaling tables are not findings."""
    from orchestrator.core.predict.data import gemm_peaks
    from orchestrator.core.predict.evidence import disturbed_warning

    warning = disturbed_warning(gemm_peaks(records))
    return (warning,) if warning else ()


def prediction_tables(fitted: Fitted | None) -> tuple[Table, ...]:
    """The Prediction section: the models `orch predict` fits, with their held-out validation; nothing without
    a fit."""
    from orchestrator.core.predict import tables as ptab

    if fitted is None:
        return ()
    tables = [ptab.model_table(fitted)] + ([ptab.calibration_table(fitted)] if fitted.links else [])
    tables.append(ptab.validation_table(fitted))
    if fitted.points:
        tables.append(ptab.epochs_table(fitted))
    return tuple(tables)


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
