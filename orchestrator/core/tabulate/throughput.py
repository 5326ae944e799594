"""Throughput tables over the trial records: normalized scalability, absolute samples/s, scaling
efficiency, weak scaling, and hardware efficiency against the measured GEMM peak.

Pure functions: records (as `orchestrator.core.measured.records` defines them) and spec.json's "derived" in,
`Table` out. No I/O, no clock. Convergence lives in `orchestrator.core.measured.convergence`, time-to-train in
`orchestrator.core.tabulate.time_to_train`.

Grid tables have threads per rank as rows and ranks as columns, one table per local batch. A cell that has
no number says why: `– a` (infeasible, or not run yet) or the status (`failed a`, `oom b`, `timeout c`),
with the reason in a lettered footnote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from orchestrator.core.json.values import JsonMapping
from orchestrator.core.measured import records as rec
from orchestrator.core.measured.peaks import LayoutPeak, choose_precision, peak_index
from orchestrator.core.planning.trial import Trial
from orchestrator.core.profile.flop_count import TORCH_DEFAULT, rule_of
from orchestrator.core.text.table import (
    DASH,
    FAILED,
    INFEASIBLE,
    MISSING,
    Cell,
    Footnotes,
    Table,
    grid_table,
    mark_best,
)

NOT_RUN_YET = "not run yet"
# The roof of the scaling-efficiency table: the same work per core cannot run faster on more cores; above it,
# the baseline was slowed, or it is a layout that uses its cores less well than the cell (a fallback baseline).
LINEAR_IN_CORES = "linear scaling in cores from the baseline (its throughput × the cores ÷ its cores)"
NO_REASON = "no reason recorded"
NO_MEASUREMENT = "recorded as ok but without a throughput measurement"



@dataclass(frozen=True, slots=True)
class Axes:
    """The grid's resolved axes, each sorted."""

    ranks: tuple[int, ...]
    threads: tuple[int, ...]
    local_batches: tuple[int, ...]


def format_quantity(value: float) -> str:
    """At least three significant digits, never an exponent, thousands separated.

    >>> [format_quantity(v) for v in (15234.4, 523.4, 52.34, 5.234, 0.05234)]
    ['15,234', '523', '52.3', '5.23', '0.0523']
    """
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def layout_label(point: Trial) -> str:
    """'2×4×32' for 2 ranks × 4 threads per rank × local batch 32."""
    return f"{point.ranks}×{point.threads_per_rank}×{point.local_batch}"


def describe_point(point: Trial) -> str:
    """'1 rank × 2 threads (2 cores)', the words used in captions."""
    ranks, threads, cores = point.ranks, point.threads_per_rank, point.cores
    return (f"{ranks} rank{'s' if ranks != 1 else ''} × {threads} thread{'s' if threads != 1 else ''} "
            f"({cores} core{'s' if cores != 1 else ''})")


def record_trial(record: rec.Record) -> Trial:
    """The grid point a record belongs to."""
    return record.trial


def throughput_index(records: Iterable[rec.Record]) -> dict[Trial, rec.Record]:
    """Throughput records by their grid point."""
    return rec.Records.of(records).by_trial()


def grid_axes(records: Iterable[rec.Record], derived: rec.Derived | JsonMapping) -> Axes:
    """The axes from spec.json's derived section, widened by any value the records hold (a record from
    an older grid must not vanish from the tables)."""
    index, grid = throughput_index(records), rec.Derived.of(derived)
    ranks = set(grid.ranks or ()) | {p.ranks for p in index}
    threads = set(grid.threads or ()) | {p.threads_per_rank for p in index}
    batches = set(grid.local_batches or ()) | {p.local_batch for p in index}
    return Axes(tuple(sorted(ranks)), tuple(sorted(threads)), tuple(sorted(batches)))


def samples_per_s(record: rec.Record | None) -> float | None:
    """The median global throughput of an ok throughput record, else None."""
    if record is None or not record.ok or record.throughput is None:
        return None
    return record.throughput.samples_per_s


def reason_messages(record: rec.Record) -> list[str]:
    """Why a record is not ok, one message per reason: the infeasible `reasons` (their cell-independent
    summary when there is one, so a table needs one footnote per rule), else the `reason` lines."""
    messages = [r.summary or r.message or r.code or NO_REASON for r in record.reasons]
    return messages or record.reason_lines() or [NO_REASON]


def status_cell(record: rec.Record | None, notes: Footnotes) -> Cell:
    """The cell of a point without a number: absent '– a' (not run yet), infeasible '– a,b', or its
    status ('oom c') with the reasons as footnotes."""
    if record is None:
        return Cell(f"{DASH} {notes.letter(NOT_RUN_YET)}", None, MISSING)
    if record.ok:    # ok but without its throughput section: a writer bug, shown as such
        return Cell(f"{DASH} {notes.letter(NO_MEASUREMENT)}", None, MISSING)
    letters = notes.letters(reason_messages(record))
    if record.status == rec.Status.INFEASIBLE:
        return Cell(f"{DASH} {letters}", None, INFEASIBLE)
    return Cell(f"{record.status} {letters}", None, FAILED)


@dataclass(frozen=True, slots=True)
class Baseline:
    """The point a table is normalized to, and why it is not the intended one when it is not."""

    point: Trial
    samples_per_s: float
    intended: Trial
    note: str = ""     # empty when point == intended

    @property
    def cores(self) -> int:
        return self.point.cores


def find_baseline(index: Mapping[Trial, rec.Record], axes: Axes, local_batch: int) -> Baseline | None:
    """The cell with the fewest ranks (1) and the fewest threads; when that one is not ok, the cheapest
    ok cell in `Trial.cost` order (fewest cores, then ranks, then threads, as the planner picks its
    convergence layout). None when no cell of this local batch is ok.

    Example: intended 1×1 timed out; ok cells 2×1 and 1×2 (both 2 cores) → 1×2, with a note that says so.
    """
    if not axes.ranks or not axes.threads:
        return None
    intended = Trial(axes.ranks[0], axes.threads[0], local_batch)
    record = index.get(intended)
    value = samples_per_s(record)
    if value:
        return Baseline(intended, value, intended)
    ok = {p: sps for p in index if p.local_batch == local_batch and (sps := samples_per_s(index[p]))}
    if not ok:
        return None
    point = min(ok, key=lambda p: p.cost)
    why = "was not run yet" if record is None else f"did not run ok ({record.status})"
    note = (f"The intended baseline, {describe_point(intended)}, {why}; normalized instead to the ok cell "
            f"with the fewest cores, {describe_point(point)}.")
    return Baseline(point, ok[point], intended, note)


# The cell of an ok point in a grid table: (cell, None), or (None, why it cannot be computed).
CellValue = Callable[[Trial, rec.Record, float, "Baseline"], tuple[Cell | None, str | None]]


def _grid_table(records: Iterable[rec.Record], derived: rec.Derived | JsonMapping, *, name: str, title: str,
                caption: Callable[[Baseline | None, int], str], value: CellValue, best: bool = True,
                roof: tuple[float, str] | None = None) -> list[Table]:
    """One table per local batch. `value(point, ok_record, samples_per_s, baseline)` gives the cell of an ok
    point, or (None, message) when it cannot be computed (shown as '– x' with the message as footnote).
    `roof` (value, what it is): a cell above it gets the footnote `above_roof_note(what)`."""
    index = throughput_index(records)
    axes = grid_axes(records, derived)
    tables = []
    for batch in axes.local_batches:
        notes = Footnotes()
        base = find_baseline(index, axes, batch)

        def cell(ranks: int, threads: int, batch: int = batch, base: Baseline | None = base,
                 notes: Footnotes = notes) -> Cell:
            point = Trial(ranks, threads, batch)
            record = index.get(point)
            sps = samples_per_s(record)
            if record is None or sps is None or base is None:   # an ok point means a baseline exists
                return status_cell(record, notes)
            made, missing = value(point, record, sps, base)
            if made is None:
                return Cell(f"{DASH} {notes.letter(missing or NO_REASON)}", None, MISSING)
            return _flag_above(made, roof, notes)

        tables.append(grid_table(name=f"{name}-b{batch}", title=title.format(batch=batch), caption=caption(base, batch),
                                 ranks=axes.ranks, threads=axes.threads, cell=cell, notes=notes, best=best))
    return tables


ROOF_TOLERANCE = 1e-9   # a ratio of two equal figures may come out a rounding error above its roof


def _flag_above(cell: Cell, roof: tuple[float, str] | None, notes: Footnotes) -> Cell:
    """`cell` with the above-the-roof footnote's letter when its value is above the roof's."""
    if roof is None or cell.value is None or cell.value <= roof[0] * (1 + ROOF_TOLERANCE):
        return cell
    return Cell(f"{cell.text} {notes.letter(above_roof_note(roof[1]))}", cell.value, cell.mark)


def _baseline_words(base: Baseline | None) -> str:
    if base is None:
        return "No point of this local batch ran ok yet, so there is nothing to normalize to."
    text = (f"Baseline: {describe_point(base.point)} at {format_quantity(base.samples_per_s)} samples/s.")
    return f"{base.note} {text}" if base.note else text


def scalability_tables(records: Iterable[rec.Record], derived: rec.Derived | JsonMapping) -> list[Table]:
    """Median global throughput normalized to the baseline cell (see `find_baseline`), per local batch.

    Example: baseline 1×1 at 4,000 samples/s, 2 ranks × 1 thread at 7,600 → cell '1.90'.
    """
    def value(point: Trial, record: rec.Record, sps: float, base: Baseline) -> tuple[Cell, None]:
        return Cell.number(sps / base.samples_per_s), None

    def caption(base: Baseline | None, batch: int) -> str:
        return ("Median global throughput (samples/s summed over ranks) ÷ the baseline's. Cells of equal total "
                "cores (ranks × threads) show whether splitting into more ranks pays. " + _baseline_words(base))

    return _grid_table(records, derived, name="scalability", value=value, caption=caption,
                       title="Scalability, local batch {batch}: throughput normalized to the baseline")


def throughput_tables(records: Iterable[rec.Record], derived: rec.Derived | JsonMapping) -> list[Table]:
    """Median global samples/s with the coefficient of variation over repeats, e.g. '7,600 ±1.2%'
    (a record's `cv` is a fraction: 0.012 is 1.2 %)."""
    def value(point: Trial, record: rec.Record, sps: float, base: Baseline) -> tuple[Cell, None]:
        cv = record.throughput.cv if record.throughput is not None else None
        spread = f" ±{cv * 100:.1f}%" if cv is not None else ""
        return Cell(f"{format_quantity(sps)}{spread}", sps), None

    def caption(base: Baseline | None, batch: int) -> str:
        return ("Median over repeats of the global throughput in samples/s; ± the coefficient of variation "
                "of the repeats (standard deviation ÷ mean).")

    return _grid_table(records, derived, name="throughput", value=value, caption=caption,
                       title="Throughput, local batch {batch}: samples/s (± CV over repeats)")


def efficiency_tables(records: Iterable[rec.Record], derived: rec.Derived | JsonMapping) -> list[Table]:
    """Scaling efficiency in percent: speedup over the baseline ÷ (cores ÷ baseline cores).

    Example: baseline 1×1 (1 core) at 4,000 samples/s; 2 ranks × 2 threads (4 cores) at 13,000 →
    speedup 3.25 over 4× the cores → '81%'. 100% is linear scaling in cores.
    """
    def value(point: Trial, record: rec.Record, sps: float, base: Baseline) -> tuple[Cell, None]:
        speedup, cores = sps / base.samples_per_s, point.cores
        return Cell.number(100 * speedup / (cores / base.cores), "{:.0f}%"), None

    def caption(base: Baseline | None, batch: int) -> str:
        return ("Speedup over the baseline ÷ (cores used ÷ baseline cores), in percent: 100% is linear scaling "
                "in cores. " + _baseline_words(base))

    return _grid_table(records, derived, name="efficiency", value=value, caption=caption, best=False,
                       title="Scaling efficiency, local batch {batch} (%)", roof=(100.0, LINEAR_IN_CORES))


def weak_scaling_tables(records: Iterable[rec.Record], derived: rec.Derived | JsonMapping) -> list[Table]:
    """Weak-scaling efficiency along the rank axis in percent: throughput(R ranks) ÷ (R × throughput(1
    rank)) at the same threads per rank and local batch (the global batch grows with R). When the rank axis
    does not start at 1, its first value R0 is the reference: throughput(R) ÷ (R/R0 × throughput(R0)).

    Example: 1 rank × 1 thread at 4,000 samples/s, 4 ranks × 1 thread at 14,000 → 14,000 ÷ 16,000 → '88%'.
    """
    index = throughput_index(records)
    first_rank = min(grid_axes(records, derived).ranks, default=1)

    def value(point: Trial, record: rec.Record, sps: float,
              base: Baseline) -> tuple[Cell | None, str | None]:
        reference = samples_per_s(index.get(point._replace(ranks=first_rank)))
        if reference is None:
            return None, (f"no ok {first_rank}-rank measurement at {point.threads_per_rank} thread(s) per rank "
                          "to compare with")
        return Cell.number(100 * sps / (point.ranks / first_rank * reference), "{:.0f}%"), None

    def caption(base: Baseline | None, batch: int) -> str:
        return (f"Throughput with R ranks ÷ (R × throughput with {first_rank} rank"
                f"{'s' if first_rank != 1 else ''}) at the same threads per rank and local batch {batch}, "
                "in percent: 100% means adding ranks (and so global batch) adds throughput linearly.")

    return _grid_table(records, derived, name="weak-scaling", value=value, caption=caption, best=False,
                       title="Weak-scaling efficiency, local batch {batch} (%)",
                       roof=(100.0, f"linear scaling in ranks (the {first_rank}-rank throughput × ranks ÷ "
                                    f"{first_rank})"))


def above_roof_note(roof: str) -> str:
    """The footnote of a cell above the roof it is divided by (`roof` names it): one wording for every table."""
    return (f"above 100% of {roof}: a disturbed or mis-roofed measurement (the roof is not what the cores can "
            "do, or something slowed the roof's measurement), not a finding")


def hardware_efficiency_table(records: Iterable[rec.Record], precision: str | None = None,
                              fallback_flops: float | None = None, fallback_source: str = "") -> Table:
    """Achieved FLOP/s of every ok layout against the measured compute roof of the same cores, in percent.

    achieved = samples_per_s × train_flops_per_sample (the trial's own count by orch's FLOP counter, a
    convolution's taps inside the input as the roof's convolutions are counted: `core.profile.flop_count`; a record
    older than that count, torch's own formula, is footnoted; where it has none, `fallback_flops`, the sweep's
    figure from `fallback_source`, footnoted); roof = the layout's
    compute roof measured with all of its ranks at once, pinned as in the trial: the best of several GEMM
    sizes and convolution shapes (see `orchestrator.core.measured.peaks`; older results: the GEMM alone, or ranks × one
    rank's GEMM, footnoted). Example: 2 ranks × 2 threads at 13,000 samples/s × 6.0e6 FLOP/sample =
    78.0 GFLOP/s against a measured 2×2 roof of 472 GFLOP/s → '16.5%'. A cell above 100% is flagged: the
    roof was beaten, so the roof or the measurement is wrong, and the cell is never marked best.
    """
    peaks = peak_index(records)
    precision = choose_precision(peaks, precision)
    index = throughput_index(records)
    notes = Footnotes()
    rows, above, roofs = [], [], []
    ok = {p: sps for p, record in index.items() if (sps := samples_per_s(record))}
    for point in sorted(ok, key=lambda p: (p.local_batch, p.cores, p.ranks)):
        ranks, threads, sps = point.ranks, point.threads_per_rank, ok[point]
        record = index[point]
        counted = record.throughput.train_flops_per_sample if record.throughput is not None else None
        achieved, cell = _achieved(sps, counted, fallback_flops, fallback_source, notes)
        if counted and flops_rule_of(record) == TORCH_DEFAULT:
            cell = Cell(f"{cell.text} {notes.letter(OLD_COUNT_NOTE)}", cell.value, cell.mark)
        roof = peaks.roof_of_layout(ranks, threads, precision)
        cells = [Cell(str(ranks * threads), ranks * threads), Cell(format_quantity(sps), sps), cell]
        cells.append(_peak_cell(roof, ranks, threads, precision, notes))
        cells.append(_percent_of_roof(achieved, roof, precision, notes))
        rows.append((layout_label(point), cells))
        roofs.append(roof)
        above.append(roof is not None and achieved is not None and achieved > roof.gflops)
    mark_best([cells for (_, cells), over in zip(rows, above) if not over], columns=(4,))
    caption = _hardware_caption(precision, gemm_only=any(r.gemm_only for r in roofs if r is not None))
    if not rows:
        caption = "No layout ran ok yet: no data yet."
    return Table(name="hardware-efficiency", title="Hardware efficiency: achieved FLOP/s ÷ measured peak",
                 corner="layout (r×t×b)",
                 columns=("cores", "samples/s", "GFLOP/s", "peak GFLOP/s", "% of peak"),
                 rows=tuple((label, tuple(cells)) for label, cells in rows), footnotes=notes.lines(),
                 caption=caption)


# The footnote of a GFLOP/s figure whose FLOPs torch's own formula counted (a record older than the valid-tap count).
OLD_COUNT_NOTE = ("FLOPs per sample counted by an orch older than the valid-tap count, with torch's own convolution "
                  "formula: every kernel tap, those in the zero padding too. Where the model has padded convolutions, "
                  "this GFLOP/s and its % of peak are too high by the padded taps' share (most for small feature "
                  "maps; none for a model of matmuls alone); a trial measured now counts only the taps inside the "
                  "input, as the roof's convolutions are counted")


def flops_rule_of(record: rec.Record) -> str:
    """How a throughput record's FLOPs per sample were counted (core.profile.flop_count.rule_of): a script's stated
    figure is known in older records by the script in `applied`."""
    section = record.throughput
    return rule_of(section.train_flops_rule if section is not None else None,
                   stated=bool(record.applied and "script" in record.applied))


def _hardware_caption(precision: str | None, gemm_only: bool) -> str:
    """What the table divides by: the compute roof, or (records from before it) the GEMM alone."""
    achieved = ("Achieved GFLOP/s = samples/s × training FLOP per sample, as the trial counted one training step "
                "(torch's FLOP counter with convolutions counted as benchdnn and the roof count them: only the kernel "
                "taps inside the input, in the forward and in each gradient; matmuls as torch counts them), against ")
    if gemm_only:
        return achieved + (f"the measured {precision or 'GEMM'} GEMM peak of the same cores: the layout's ranks "
                           "running the GEMM all at once, each pinned as in the trial.")
    return achieved + (f"the measured {precision or 'compute'} roof of the same cores (`peak GFLOP/s`): the layout's "
                       "ranks all at once, each pinned as in the trial, running GEMMs of several sizes and "
                       "convolutions of several shapes in both memory formats; the roof is the best rate of any of "
                       "them. A cell above 100% is flagged: nothing a step runs can beat the roof.")


def _percent_of_roof(achieved: float | None, roof: LayoutPeak | None, precision: str | None,
                     notes: Footnotes) -> Cell:
    """'16.5%', or '104.6% a' with the footnote that says the roof was beaten; '–' without both figures."""
    if achieved is None or roof is None:
        return Cell(DASH, None, MISSING)
    percent = 100 * achieved / roof.gflops
    if percent <= 100:
        return Cell.number(percent, "{:.1f}%")
    what = f"the measured {precision or 'compute'} {'GEMM peak' if roof.gemm_only else 'roof'} of the same cores"
    return Cell(f"{percent:.1f}% {notes.letter(above_roof_note(what))}", percent)


def _achieved(samples_per_s: float, counted: float | None, fallback: float | None, fallback_source: str,
              notes: Footnotes) -> tuple[float | None, Cell]:
    """A layout's achieved GFLOP/s and its cell: from the trial's own count, else the sweep's figure (footnoted
    with its source), else none."""
    if counted:
        achieved = samples_per_s * counted / 1e9
        return achieved, Cell(format_quantity(achieved), achieved)
    if fallback:
        achieved = samples_per_s * fallback / 1e9
        mark = notes.letter(f"FLOPs per sample not counted in the trial: {fallback_source}")
        return achieved, Cell(f"{format_quantity(achieved)} {mark}", achieved)
    return None, Cell(f"{DASH} {notes.letter('no FLOPs per sample: not counted in the trial')}", None, MISSING)


def _peak_cell(peak: LayoutPeak | None, ranks: int, threads: int, precision: str | None, notes: Footnotes) -> Cell:
    if peak is None:
        missing = f"no {precision or 'GEMM'} peak measured for {threads} thread(s)"
        return Cell(f"{DASH} {notes.letter(missing)}", None, MISSING)
    if peak.concurrent:
        return Cell(format_quantity(peak.gflops), peak.gflops)
    derived = ("ranks × the peak of one rank alone (recorded before peaks were measured with all ranks at once; "
               "it overstates what the ranks reach together)")
    return Cell(f"{format_quantity(peak.gflops)} {notes.letter(derived)}", peak.gflops)
