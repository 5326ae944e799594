"""The default sweep's cells from two checkouts, side by side: does a change move the figures?

Runs `orch sweep sweeps/retinanet.yaml --no-convergence --no-report` from each checkout (its own
`.venv/bin/python`, so its own code in the driver and the ranks), alternating A B A B … for `--rounds` rounds
so both see the same machine, each into a fresh results folder. It then prints every ok cell's value per run,
and the ratio of the medians: samples/s for throughput cells, GFLOP/s for peaks, and the largest message's
milliseconds for the all-reduce. A Mann-Whitney test (scipy) on the runs says whether a difference is resolved
at all. Two vCPUs vary by several percent from run to run. Run it on a quiet machine.

    git worktree add /tmp/before <commit>     # with a venv whose python imports that tree
    python benchmarks/sweep_ab.py /tmp/before . --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from scipy.stats import mannwhitneyu


def cells(folder: Path) -> dict[str, float]:
    """Each ok cell's figure in one results folder."""
    out: dict[str, float] = {}
    for line in (folder / "trials.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["status"] != "ok":
            continue
        if r["kind"] == "throughput":
            out[r["key"]] = r["throughput"]["samples_per_s"]
        elif r["kind"] == "peak":
            out[r["key"]] = r["peak"]["gflops"]
        elif r["kind"] == "allreduce":
            out[r["key"]] = r["allreduce"]["time_s"][-1] * 1e3
    return out


def sweep_once(tree: Path, results: Path) -> float:
    """One sweep from `tree` into `results`; its wall seconds (the sweep's failure ends the benchmark)."""
    started = time.monotonic()
    subprocess.run([str(tree / ".venv/bin/python"), "-m", "orchestrator.cli", "sweep", "sweeps/retinanet.yaml",
                    "--no-convergence", "--no-report", "--results", str(results)],
                   cwd=tree, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def report(runs: dict[str, list[dict[str, float]]]) -> None:
    a, b = runs
    keys = sorted(set().union(*runs[a], *runs[b]))
    print(f"{'cell':26} {a + ' (runs)':>36} {b + ' (runs)':>36} {b + ' ÷ ' + a:>10} {'p':>6}")
    for key in keys:
        va, vb = ([c[key] for c in runs[side] if key in c] for side in (a, b))
        if not va or not vb:
            print(f"{key:26} ok on one side only")
            continue
        p = mannwhitneyu(vb, va, alternative="two-sided").pvalue
        text = [", ".join(f"{v:.1f}" for v in side) for side in (va, vb)]
        print(f"{key:26} {text[0]:>36} {text[1]:>36} {statistics.median(vb) / statistics.median(va):>10.3f}"
              f" {p:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path, help="checkout A (with its .venv)")
    parser.add_argument("after", type=Path, help="checkout B (with its .venv)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in trees}
    with tempfile.TemporaryDirectory(prefix="sweep-ab-") as tmp:
        for round_ in range(1, args.rounds + 1):
            for side, tree in trees.items():
                folder = Path(tmp) / f"{side}-{round_}"
                wall_s = sweep_once(tree, folder)
                runs[side].append(cells(folder))
                print(f"{side} round {round_}: {wall_s:.0f} s", flush=True)
    report(runs)


if __name__ == "__main__":
    main()
