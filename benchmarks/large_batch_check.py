"""The large-batch check: predict epochs-to-target at global batches 4× to 8× beyond the largest kept,
from the small batches only, and compare with what was measured.

    .venv/bin/python benchmarks/large_batch_check.py RESULTS_DIR [RESULTS_DIR ...] [--kept 16,32,64]

Each folder is a sweep of convergence runs over global batches spanning 32× or more, several seeds each
(`sweeps/large-batch-classifier.yaml`, `sweeps/large-batch-stripes.yaml`). The batches up to the largest kept
(default: every batch at most 1/8 of the largest) are fitted; those at least 4× above the largest kept are held
out and predicted by

- **with B_simple**: `orch predict`'s epochs model: where the runs recorded the learning-rate rule, the form that
  knows it (`orchestrator/core/predict/epochs_lr.py`: E = A·B/(ε(B)·(1 − k·ε(B)·(1 + B_noise/B)))), with the
  kept runs' B_simple as the prior on B_noise;
- **k always fitted**: the same, with k fitted however little the kept epochs need it (no χ² gate,
  `epochs_lr.K_NEEDED`): what the gate guards against;
- **without**: the same model on the kept epochs alone (with fewer than 4 kept batches, k frozen at 0: the
  rule's k = 0 limit, E ∝ B/ε(B));
- **one batch + B_simple**: the largest kept batch alone with B_simple (what `orch predict` does when a sweep
  measured one global batch);
- **old, with B_simple** / **old, without**: E_min·(1 + B/B_crit), blind to the rule (orch before the rule's
  form; what it still fits to records without the rule, and to RCP files);
- **RCP rule**: MLPerf's checker's linear interpolation, flat beyond the largest reference batch;
- **independent**: epochs independent of the batch (the kept batches' mean).

The held-out runs' own B_simple is never used, nor their epochs: the form, the prior's width (noise_prior's)
and every constant were chosen from the theory and the kept batches. Per method: the median |error| of the
prediction against the held-out batch's olympic mean, how many held-out batches lie inside the interval (one sd
in log, as `orch predict` prints it), and the interval's median width (high ÷ low). The bar: a median
|error| of at most 20%, every held-out batch inside, and B_simple narrowing the interval. Pure arithmetic on the
records.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core.measured.convergence import convergence_by_batch  # noqa: E402
from orchestrator.core.predict import epochs_lr  # noqa: E402
from orchestrator.core.predict.epochs import BatchPoint, EpochsModel, fit_epochs, points_from_batches  # noqa: E402
from orchestrator.core.predict.noise_prior import BCritPrior, prior_from_records  # noqa: E402
from orchestrator.core.predict.validate import epochs_growth, rcp_interpolation, validate_epochs  # noqa: E402

METHODS = ("with B_simple", "k always fitted", "without", "one batch + B_simple", "old, with B_simple", "old, without",
           "RCP rule", "independent")


@dataclass(frozen=True, slots=True)
class Held:
    """One held-out batch predicted by one method."""

    folder: str
    method: str
    global_batch: int
    measured: float
    predicted: float | None
    low: float | None
    high: float | None

    @property
    def error_pct(self) -> float | None:
        return None if self.predicted is None else 100 * (self.predicted / self.measured - 1)

    @property
    def inside(self) -> bool | None:
        if self.low is None or self.high is None:
            return None
        return self.low <= self.measured <= self.high


def _model(kept: list[BatchPoint], prior: BCritPrior | None) -> EpochsModel:
    model = fit_epochs(kept, prior)
    return replace(model, growth_log_per_doubling=epochs_growth(validate_epochs(kept, prior)))


@contextlib.contextmanager
def k_always_fitted() -> Iterator[None]:
    """The rule's form with k fitted whatever the χ² gain (`epochs_lr.K_NEEDED` at -∞): what the gate prevents."""
    saved = dict(epochs_lr.K_NEEDED)
    epochs_lr.K_NEEDED.update({False: -math.inf, True: -math.inf})
    try:
        yield
    finally:
        epochs_lr.K_NEEDED.update(saved)


def blind(points: list[BatchPoint]) -> list[BatchPoint]:
    """The points without their learning-rate rule: the old form's input."""
    return [replace(p, lr_scaling=None) for p in points]


def predict_held(folder: str, kept: list[BatchPoint], held: list[BatchPoint], prior: BCritPrior | None) -> list[Held]:
    """Every held-out batch by every method (a method that cannot predict is left out: no prior, no row)."""
    models: dict[str, EpochsModel] = {"without": _model(kept, None), "old, without": _model(blind(kept), None)}
    if prior is not None:
        models["with B_simple"] = _model(kept, prior)
        models["one batch + B_simple"] = fit_epochs([kept[-1]], prior)
        models["old, with B_simple"] = _model(blind(kept), prior)
    flat = statistics.mean(p.mean for p in kept)
    out = []
    for p in held:
        for method, model in models.items():
            e = model.predict(p.global_batch)
            out.append(Held(folder, method, p.global_batch, p.mean, e.epochs, e.low, e.high))
        if prior is not None:
            with k_always_fitted():     # its refits at the batch predicted are ungated too
                e = _model(kept, prior).predict(p.global_batch)
            out.append(Held(folder, "k always fitted", p.global_batch, p.mean, e.epochs, e.low, e.high))
        out.append(Held(folder, "RCP rule", p.global_batch, p.mean, rcp_interpolation(kept, p.global_batch),
                        None, None))
        out.append(Held(folder, "independent", p.global_batch, p.mean, flat, None, None))
    return out


def split(points: list[BatchPoint], kept_batches: list[int] | None) -> tuple[list[BatchPoint], list[BatchPoint]]:
    """(kept, held out): the kept batches as asked (default: at most 1/8 of the largest), and every converged
    batch at least 4× above the largest kept."""
    good = [p for p in points if p.converged]
    largest = max(p.global_batch for p in good)
    kept = [p for p in good if (p.global_batch in kept_batches if kept_batches else p.global_batch * 8 <= largest)]
    if not kept:
        raise SystemExit(f"no kept batch: the converged batches are {[p.global_batch for p in good]}")
    top = max(p.global_batch for p in kept)
    return kept, [p for p in good if p.global_batch >= 4 * top]


def folder_rows(path: Path, kept_batches: list[int] | None) -> tuple[list[Held], list[str]]:
    """The held-out predictions of one folder, and lines saying what was kept, held and measured."""
    from orchestrator.io.store import load_results

    records = load_results(path).records
    points = points_from_batches(convergence_by_batch(records))
    kept, held = split(points, kept_batches)
    prior = prior_from_records(records, batches=[p.global_batch for p in kept])
    not_converged = [p.global_batch for p in points if not p.converged]
    lines = [f"{path.name}: kept {[p.global_batch for p in kept]}, held out {[p.global_batch for p in held]}"
             + (f", did not converge {not_converged}" if not_converged else ""),
             "  measured epochs: " + ", ".join(f"{p.global_batch}: {p.mean:.3g} ± {p.sd:.2g}" for p in points
                                               if p.converged),
             f"  with B_simple: {_model(kept, prior).words()}" if prior is not None else
             "  no B_simple in the kept runs: only the methods without it",
             f"  without: {_model(kept, None).words()}",
             f"  old, with B_simple: {_model(blind(kept), prior).words()}" if prior is not None else "",
             f"  old, without: {_model(blind(kept), None).words()}"]
    return predict_held(path.name, kept, held, prior), lines


def _cell(h: Held) -> str:
    if h.predicted is None:
        return "–"
    ends = f" [{h.low:.3g}–{h.high:.3g}]" if h.low is not None and h.high is not None else ""
    mark = {None: "", True: " in", False: " OUT"}[h.inside]
    return f"{h.predicted:.3g}{ends} ({h.error_pct:+.0f}%){mark}"


def summary_rows(rows: list[Held]) -> list[str]:
    """Per method over every folder: median |error|, inside / with an interval, median width (high ÷ low)."""
    out = ["| method | held-out batches | median \\|error\\| | inside its interval | median width (high ÷ low) |",
           "|---|---:|---:|---:|---:|"]
    for method in METHODS:
        mine = [h for h in rows if h.method == method and h.predicted is not None]
        if not mine:
            continue
        errors = [abs(h.error_pct or 0.0) for h in mine]
        bounded = [h for h in mine if h.inside is not None]
        widths = [h.high / h.low for h in bounded if h.low and h.high]
        inside = f"{sum(bool(h.inside) for h in bounded)} of {len(bounded)}" if bounded else "no interval"
        width = f"×{statistics.median(widths):.2f}" if widths else "–"
        out.append(f"| {method} | {len(mine)} | {statistics.median(errors):.1f}% | {inside} | {width} |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--kept", help="the global batches to fit, e.g. 16,32,64 (default: at most 1/8 of the "
                                       "largest)")
    args = parser.parse_args(argv)
    kept = [int(b) for b in args.kept.split(",")] if args.kept else None
    rows: list[Held] = []
    for path in args.folders:
        held, lines = folder_rows(path, kept)
        rows += held
        print("\n".join(line for line in lines if line))
    print()
    print("| folder | global batch | measured | " + " | ".join(METHODS) + " |")
    print("|---|---:|---:|" + "---|" * len(METHODS))
    for folder, batch in dict.fromkeys((h.folder, h.global_batch) for h in rows):
        mine = {h.method: h for h in rows if (h.folder, h.global_batch) == (folder, batch)}
        measured = next(iter(mine.values())).measured
        cells = [_cell(mine[m]) if m in mine else "–" for m in METHODS]
        print(f"| {folder} | {batch} | {measured:.3g} | " + " | ".join(cells) + " |")
    print()
    print("\n".join(summary_rows(rows)))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
