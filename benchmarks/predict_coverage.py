"""On every results folder: what `orch predict` prints for held-out cells, how far off it is,
and how many of them lie inside their printed intervals.

    .venv/bin/python benchmarks/predict_coverage.py [FOLDER ...] [--cells]

Without folders: every committed one (results/*/ and results/ccl-vs-gloo/*/ with a trials.jsonl). Per folder
and hold-out scheme (`orch predict --validate`'s; docs/prediction.md): the printed estimate's median / max
absolute % error, orch's model's and Amdahl's beside it, the held-out cells inside their printed intervals and
their median half-width ((high − low) ÷ 2 over the estimate). Then the totals over every folder:

- every held-out cell of a one-level-out scheme on threads or ranks with a finite interval;
- the share of held-out cells inside their intervals over every scheme and folder, and the median width;
- one level out on threads and on ranks: the median and max |error| of the printed estimate.

Pure arithmetic on the records (no Ray, no torch): the figures do not depend on the machine it runs on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _half(width_pct: float | None) -> float | None:
    return None if width_pct is None else width_pct / 2


def committed() -> list[Path]:
    found = sorted(p.parent for p in (REPO / "results").glob("*/trials.jsonl"))
    found += sorted(p.parent for p in (REPO / "results").glob("ccl-vs-gloo/*/trials.jsonl"))
    return [f for f in found if _grid(f)]


def _grid(folder: Path) -> bool:
    """A throughput grid (ok cells of two layouts at least), not a convergence study of one layout."""
    from orchestrator.io.store import load_results  # as main does: --help needs no orch

    records = load_results(folder).records
    return len({(r.ranks, r.threads_per_rank) for r in records if r.kind == "throughput" and r.status == "ok"}) >= 2


def _pct(value: float | None) -> str:
    return "–" if value is None or value != value else f"{value:.1f}%"


def cell_rows(name: object, scheme: str, held: object) -> list[str]:
    """One line per held-out cell: measured, printed [low–high], inside or not, the predictor."""
    from orchestrator.core.predict.predictors import label

    out = []
    for h in held:                                                     # type: ignore[attr-defined]
        p = h.printed
        ends = "no interval" if p is None or p.low is None else f"[{p.low:,.1f}–{p.high:,.1f}]"
        inside = {None: "", True: "inside", False: "OUTSIDE"}[h.inside]
        out.append(f"    {name} | {scheme} | {h.cell.layout.label}: measured {h.cell.samples_per_s:,.1f}, printed "
                   f"{p.samples_per_s:,.1f} {ends} {inside} ({label(p.predictor)})")
    return out


def folder_rows(path: Path, cells: bool = False) -> tuple[list[str], list[tuple[str, object]]]:
    """Markdown rows of one folder, and its held-out cells as (scheme kind/axis, HeldOut)."""
    from orchestrator.core.predict.fit import NotFittable, fit_all
    from orchestrator.core.predict.validate import AMDAHL, MODEL
    from orchestrator.io.store import load_results

    try:
        fitted = fit_all(load_results(path).records, coverage=True)
    except NotFittable as err:
        return [f"| {path.name} | not fittable: {err} |"], []
    rows, held = [], []
    name = path.relative_to(REPO / "results") if path.is_relative_to(REPO / "results") else path
    for r in fitted.validation:
        printed = r.printed
        rows.append(f"| {name} | {r.scheme} | {len(r.held_out)} | "
                    f"{_pct(printed.median_abs_pct if printed else None)} / "
                    f"{_pct(printed.max_abs_pct if printed else None)} | "
                    f"{_pct(r.scores[MODEL].median_abs_pct)} / {_pct(r.scores[MODEL].max_abs_pct)} | "
                    f"{_pct(r.scores[AMDAHL].median_abs_pct)} / {_pct(r.scores[AMDAHL].max_abs_pct)} | "
                    f"{r.inside}/{r.with_interval} of {len(r.held_out)} | ±{_pct(_half(r.median_width_pct))} |")
        if cells:
            rows += cell_rows(name, r.scheme, r.held_out)
        held += [((r.kind, r.axis), h) for h in r.held_out]
    if fitted.basis.evidence.disturbed:
        rows.append(f"| {name} | disturbed: {fitted.basis.evidence.disturbed} | | | | | | |")
        held = [(("disturbed", axis), h) for (_, axis), h in held]
    for s in fitted.skipped:
        rows.append(f"| {name} | {s.scheme} | – | skipped: {s.why} | | | | |")
    return rows, held


def totals(held: list[tuple[tuple[str, str], object]]) -> list[str]:
    from orchestrator.core.predict.validate import PRINTED

    def line(what: str, cells: list[object]) -> str:
        if not cells:
            return f"- {what}: no held-out cell"
        errors = [abs(h.error_pct(PRINTED)) for h in cells]          # type: ignore[attr-defined]
        with_interval = [h for h in cells if h.inside is not None]     # type: ignore[attr-defined]
        inside = sum(bool(h.inside) for h in with_interval)            # type: ignore[attr-defined]
        widths = [h.width_pct for h in with_interval]                  # type: ignore[attr-defined]
        width = _half(statistics.median(widths)) if widths else None
        share = 100.0 * inside / len(cells)
        return (f"- {what}: {len(cells)} held-out cells, {len(with_interval)} with a finite interval, "
                f"{inside} inside it ({share:.1f}%); median half-width ±{_pct(width)}; printed estimate's |error| "
                f"median {statistics.median(errors):.1f}%, max {max(errors):.1f}%, "
                f"{sum(e > 15 for e in errors)} over 15%")

    one_level = [h for (kind, axis), h in held if kind in ("level", "all but one") and axis in ("threads", "ranks")]
    return [line("disturbed folders (left out below)", [h for (kind, _), h in held if kind == "disturbed"]),
            line("every scheme", [h for (kind, _), h in held if kind != "disturbed"]),
            line("one level out on threads", [h for (k, a), h in held if k in ("level", "all but one")
                                              and a == "threads"]),
            line("one level out on ranks", [h for (k, a), h in held if k in ("level", "all but one") and a == "ranks"]),
            line("one level out on threads or ranks", one_level)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="results folders (default: every committed one)")
    parser.add_argument("--cells", action="store_true", help="also every held-out cell with its printed interval")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    folders = [p.resolve() for p in args.folders] or committed()
    print("| folder | held out | cells | printed: median / max | orch model | Amdahl | inside interval | "
          "median half-width |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    held: list[tuple[tuple[str, str], object]] = []
    for path in folders:
        rows, cells = folder_rows(path, args.cells)
        print("\n".join(rows))
        held += cells
    print()
    print("\n".join(totals(held)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
