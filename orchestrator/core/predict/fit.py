"""Everything `orch predict` fits, from one sweep's records (plus, optionally, calibration records of
another sweep, e.g. the network of a cluster measured apart): cells, all-reduce fits, step model, epochs
model, and their validations. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from orchestrator.core.measured.convergence import convergence_by_batch
from orchestrator.core.measured.records import Kind, Record, Records
from orchestrator.core.predict import comm, data
from orchestrator.core.predict.edge import curve_from_records
from orchestrator.core.predict.epochs import BatchPoint, EpochsModel, fit_epochs, points_from_batches
from orchestrator.core.predict.evidence import disturbed_warning
from orchestrator.core.predict.interval import Basis, basis_of, printer
from orchestrator.core.predict.noise_prior import prior_from_records
from orchestrator.core.predict.step import Cell, StepModel, fit_step_model
from orchestrator.core.predict.validate import (
    EpochsHeldOut,
    SchemeResult,
    Skipped,
    epochs_growth,
    schemes,
    validate_epochs,
    validate_step,
)
from orchestrator.errors import InputError

MIN_CELLS = 3


class NotFittable(InputError):
    """The records cannot support a fit; the message says which cells would."""


@dataclass(frozen=True, slots=True)
class Fitted:
    cells: tuple[Cell, ...]
    links: Mapping[str, comm.LinkFit]
    samples: tuple[comm.Sample, ...]
    buckets: tuple[int, ...]
    thread_prior: Mapping[int, float]
    model: StepModel
    validation: tuple[SchemeResult, ...]
    points: tuple[BatchPoint, ...]
    epochs_model: EpochsModel | None
    epochs_validation: tuple[EpochsHeldOut, ...]
    epochs_source: str                       # 'records', 'RCP file …' or '' when there is no convergence data
    warnings: tuple[str, ...]
    basis: Basis                              # what each cell's prediction rests on (interval.predict_cell)
    pruned_points: tuple[BatchPoint, ...] = ()   # RCP batches the checker's pruning dropped: shown, not fitted
    skipped: tuple[Skipped, ...] = ()         # hold-out schemes that could not be fitted, with the reason
    coverage: bool = False                    # the validation says what `orch predict` prints for held-out cells
    eval_every_epochs: float | None = None    # the convergence runs' evaluation interval; None: unknown (an RCP)


def suggest_cells(cells: Sequence[Cell]) -> list[str]:
    """Cells that, measured, would make the model fittable: the neighbours of what exists.

    >>> from orchestrator.core.predict.step import Layout
    >>> suggest_cells([Cell(Layout(1, 1, 32), 100.0)])
    ['1×2×32', '2×1×32', '1×1×64']
    """
    if not cells:
        return ["1×1×B", "1×2×B", "2×1×B (B: a local batch)"]
    have = {(c.layout.ranks, c.layout.threads, c.layout.local_batch) for c in cells}
    r, t, b = min(have)
    wanted = [(r, 2 * t, b), (2 * r, t, b), (r, t, 2 * b), (r, t, max(1, b // 2))]
    if not any(c.layout.ranks == 1 for c in cells):
        wanted.insert(0, (1, t, b))
    return [f"{x}×{y}×{z}" for x, y, z in wanted if (x, y, z) not in have][:3]


def check_fittable(cells: Sequence[Cell]) -> None:
    has_single = any(c.layout.ranks == 1 for c in cells)
    if len(cells) >= MIN_CELLS and has_single:
        return
    listed = ", ".join(c.layout.label for c in cells) or "none"
    need = f"at least {MIN_CELLS} ok throughput cells, one of them with 1 rank"
    raise NotFittable(f"too few measured cells to fit: {len(cells)} ok ({listed}); the model needs {need}. "
                      f"Measure for example {', '.join(suggest_cells(cells))} (add them to the sweep's grid and "
                      "rerun: finished trials are kept).")


def fit_all(records: Iterable[Record], *, extra_calibration: Iterable[Record] = (),
            rcp_points: Sequence[BatchPoint] | None = None, rcp_source: str = "",
            rcp_pruned: Sequence[BatchPoint] = (), coverage: bool = False) -> Fitted:
    """Fit every model the records allow. Raises NotFittable when the throughput cells cannot support one.
    With `coverage`, the validation also predicts each held-out cell as `orch predict` would from the training
    cells alone, interval included (a nested fit per held-out group: `orch predict --validate`, `orch report`)."""
    records = Records.of(records)
    cells = data.cells_from_records(records)
    check_fittable(cells)
    samples = comm.samples_from_records([*records, *extra_calibration])
    links = comm.fit_links(samples)
    buckets = data.gradient_buckets(records)
    prior = data.thread_speedups(records)
    warnings = []
    if any(c.layout.ranks > 1 for c in cells) and not links:
        warnings.append("no all-reduce calibration in these records (sweeps before orch 0.2, or measure.allreduce: "
                        "false): communication is not modelled; multi-rank predictions rest on the fitted terms only")
    if links and not buckets:
        warnings.append("the records do not say how many gradient bytes a step all-reduces (recorded since orch 0.2): "
                        "communication is not modelled")
    model = fit_step_model(cells, links, buckets, prior, starts=3)
    if model.solver_note:
        warnings.append(f"step-time fit: {model.solver_note}")
    gemm = data.gemm_peaks(records)
    show = printer(links, buckets, prior, gemm) if coverage else None
    validation = tuple(validate_step(cells, links, buckets, prior, printer=show))
    basis = basis_of(cells, links, buckets, prior, gemm, model=model, validation=validation, samples=samples,
                     bucket_ready=data.bucket_ready_shares(records, buckets))
    if basis.evidence.disturbed:
        warnings.append(disturbed_warning(gemm))
    # B_simple's prior on B_crit comes from the sweep's own runs, so it goes with their epochs, not an RCP file's
    b_crit_prior, curve = None, None
    if rcp_points is not None:
        points, source = tuple(rcp_points), rcp_source
    else:
        points = tuple(points_from_batches(convergence_by_batch(records)))
        source = "convergence records" if points else ""
        b_crit_prior = prior_from_records(records)
        curve = curve_from_records(records, None if b_crit_prior is None else
                                   (b_crit_prior.b_simple, b_crit_prior.sd_log))
    epochs_model = fit_epochs(points, b_crit_prior, curve) if any(p.converged for p in points) else None
    held = tuple(validate_epochs(points, b_crit_prior, curve))
    if epochs_model is not None:
        epochs_model = replace(epochs_model, growth_log_per_doubling=epochs_growth(held))
    if points and epochs_model is None:
        warnings.append("no global batch reached the target: epochs cannot be predicted")
    if not points:
        warnings.append("no convergence data (run the sweep with a convergence section, or give --rcp): "
                        "throughput only, no time-to-train")
    cadence = None if rcp_points is not None else eval_cadence(records)
    return Fitted(tuple(cells), links, tuple(samples), buckets, prior, model, validation, points, epochs_model,
                  held, source, tuple(warnings), basis, tuple(rcp_pruned), tuple(schemes(cells)[1]), coverage, cadence)


def eval_cadence(records: Records) -> float | None:
    """The evaluation interval, in epochs, the convergence runs counted their epochs at (None: none says)."""
    for r in records.of_kind(Kind.CONVERGENCE):
        if r.convergence is not None and r.convergence.eval_every_epochs:
            return float(r.convergence.eval_every_epochs)
    return None


def basis_from_records(records: Iterable[Record]) -> Basis:
    """The basis of `interval.predict_cell` from a sweep's records so far (throughput cells, all-reduce
    calibration, GEMM peaks): what an adaptive sweep asks "how well do we know this cell?" with.
    Raises NotFittable when the cells cannot support a fit."""
    records = Records.of(records)
    cells = data.cells_from_records(records)
    check_fittable(cells)
    samples = comm.samples_from_records(records)
    links = comm.fit_links(samples)
    buckets = data.gradient_buckets(records)
    return basis_of(cells, links, buckets, data.thread_speedups(records), data.gemm_peaks(records), samples=samples,
                    bucket_ready=data.bucket_ready_shares(records, buckets))
