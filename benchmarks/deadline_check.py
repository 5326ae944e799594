"""Is `orch predict --deadline`'s chance of missing a deadline right? Checked against the seeds' actual
spread on every committed results folder with convergence runs.

    .venv/bin/python benchmarks/deadline_check.py [FOLDER ...]

For each converged seed, the stopping distribution `orch predict` gives its global batch (epochs counted at the
runs' evaluation interval, `core.predict.deadline`) is asked how likely a run was to need more epochs than this
seed did: that is the predicted chance of missing a deadline set at this seed's time-to-train (throughput
fixed). Over many seeds those chances (1 − the mid-PIT) spread uniformly on [0, 1] when the distribution is
right: a median near 0.5, and 80% of them inside [0.1, 0.9]. Too many near 0 or 1 means the band is too narrow;
too many near 0.5, too wide. With 3 or more converged global batches each batch is predicted from a fit without
it (held out), else from the fit of all (in sample, marked). Pure arithmetic on the records: the same on any
machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def committed() -> list[Path]:
    return sorted(p.parent for p in (REPO / "results").glob("*/trials.jsonl"))


def folder_checks(path: Path) -> tuple[list, float | None]:
    """The seed checks of one folder, and its evaluation interval (empty without convergence runs)."""
    from orchestrator.core.measured.convergence import convergence_by_batch
    from orchestrator.core.predict.deadline import seed_checks
    from orchestrator.core.predict.epochs import points_from_batches
    from orchestrator.core.predict.fit import eval_cadence
    from orchestrator.core.predict.noise_prior import prior_from_records
    from orchestrator.io.store import load_results

    records = load_results(path).records
    points = points_from_batches(convergence_by_batch(records))
    if sum(p.converged for p in points) == 0:
        return [], None
    cadence = eval_cadence(records)
    return seed_checks(points, cadence, prior_from_records(records)), cadence


def summary(checks: list) -> tuple[int, float, float, int]:
    """(seeds, median P(over), share inside [0.1, 0.9], how many were held out)."""
    over = [c.p_over() for c in checks]
    inside = sum(0.1 <= p <= 0.9 for p in over) / len(over)
    return len(over), statistics.median(over), inside, sum(c.held_out for c in checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path)
    args = parser.parse_args(argv)
    print("| folder | evaluations every | seeds (held out) | median P(over) | inside [0.1, 0.9] (80% nominal) |")
    print("|---|---:|---:|---:|---:|")
    every: list = []
    for path in args.folders or committed():
        checks, cadence = folder_checks(path)
        if not checks:
            continue
        every += checks
        n, median, inside, held = summary(checks)
        print(f"| {path.name} | {cadence if cadence else '–'} | {n} ({held}) | {median:.2f} | {inside:.0%} |")
    if every:
        n, median, inside, held = summary(every)
        print(f"| all | | {n} ({held}) | {median:.2f} | {inside:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
