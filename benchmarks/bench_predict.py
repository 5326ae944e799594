"""How long `orch predict` takes for a 4-node and a 64-node target, how many fits it makes, and whether it
stays torch- and Ray-free.

    .venv/bin/python benchmarks/bench_predict.py [--results results/example-predict-retinanet]
        [--runs 5] [--target 4|64|both]

The targets: `sweeps/topologies/cluster-4x2s28c.yaml` (4 nodes of 2 sockets × 28 cores) with the
epochs of `results/example-retinanet`'s RCP file; and `sweeps/topologies/cluster-64x2s28c.yaml`
with MLPerf's RetinaNet RCP file. Per target:

- counts, the same on any machine: step-model fits (least-squares runs through `step._solve`), bootstrap
  refits made (the bootstrap waits for a layout predicted by orch's model beyond the data), all
  least-squares solves (`core.predict.lsq`: step model, links, epochs);
- in process, the median of several runs: reading the records and fitting every model with its hold-out
  validation (`read_inputs` then `app.predict.fit`), then predicting every feasible layout (`app.predict.predicted`);
- end to end, in a fresh process each run (interpreter start-up, imports, fit, predict, output):
  `orch predict ... --json` (prints everything, writes nothing): the figure the target (< 2 s on the
  slowest CPU at hand) is about; and `orch predict ... --validate --json` (the nested validation with printed
  intervals, for reference);
- the heavy modules the process imported (must be none; scipy among them: the fits are numpy's).

The times are this machine's at the time of the run: run it on a quiet machine before quoting them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ray", "torchvision", "scipy")
TARGET_S = 2.0
TARGETS = {
    "4": (REPO / "sweeps" / "topologies" / "cluster-4x2s28c.yaml",
          REPO / "results" / "example-retinanet" / "report" / "rcps_retinanet.json"),
    "64": (REPO / "sweeps" / "topologies" / "cluster-64x2s28c.yaml",
           REPO / "tests" / "data" / "rcp" / "rcps_retinanet.json"),
}
PROBE = """
import contextlib, io, json, sys
from orchestrator.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "heavy": sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)}))
""".replace("HEAVY", repr(HEAVY))


def timed(fn, runs: int) -> tuple[float, object]:
    samples, out = [], None
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), out


def end_to_end(argv: list[str], runs: int) -> tuple[list[float], str]:
    """Wall seconds of `orch predict argv` in a new process, each run, and the last run's import report."""
    samples, report = [], ""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=REPO, env=env)
        samples.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"orch predict failed:\n{done.stderr}")
        report = done.stdout.strip().splitlines()[-1]
    return samples, report


def counts(options: SimpleNamespace) -> str:
    """Fits, bootstrap refits and least-squares solves of one prediction, counted (deterministic)."""
    from orchestrator.app.predict import fit, predicted
    from orchestrator.core.predict import comm, epochs, lsq, step
    from orchestrator.io.predict_inputs import read_inputs

    solves, calls = [], []
    solve, lsq_solve = step._solve, lsq.solve

    def counting(*a, **k):
        calls.append(1)
        return lsq_solve(*a, **k)
    step._solve = lambda *a, **k: solves.append(1) or solve(*a, **k)
    comm.solve = epochs.solve = step.solve = counting
    try:
        inputs = read_inputs(options)
        fitted = fit(inputs)
        predicted(inputs, fitted)
    finally:
        step._solve, comm.solve, epochs.solve, step.solve = solve, lsq_solve, lsq_solve, lsq_solve
    boot = fitted.basis.boot
    refits = len(boot.models()) if boot.computed else 0
    return (f"{len(solves)} step-model fits (least-squares runs), {refits} bootstrap refits among them, "
            f"{len(calls)} least-squares solves in all")


def bench(target: str, results: Path, runs: int) -> None:
    from orchestrator.app.predict import fit, predicted
    from orchestrator.io.predict_inputs import read_inputs

    topology, rcp = TARGETS[target]
    options = SimpleNamespace(results=str(results), topology=str(topology), nodes=None, local_batch=None,
                              rcp=str(rcp), samples_per_epoch=None, calibration=[], deadline_h=None,
                              budget_node_h=None, validate=False)
    print(f"target: {topology.name}, RCP {rcp.relative_to(REPO)}")
    print(f"  counted: {counts(options)}")
    inputs = read_inputs(options)
    fit_s, fitted = timed(lambda: fit(inputs), runs)
    predict_s, report = timed(lambda: predicted(inputs, fitted), runs)
    nodes = max(p.layout.nodes for p in report.predictions)
    print(f"  read, fit + validation ({len(fitted.cells)} cells): median {fit_s * 1e3:8.1f} ms")
    print(f"  predict {len(report.predictions)} layouts on 1..{nodes} nodes: median {predict_s * 1e3:8.1f} ms")
    argv = ["predict", str(results), "--topology", str(topology), "--rcp", str(rcp), "--json"]
    for what, extra in (("--json", []), ("--validate --json", ["--validate"])):
        samples, heavy = end_to_end(argv + extra, runs)
        median = statistics.median(samples)
        verdict = f"{'under' if median < TARGET_S else 'OVER'} the {TARGET_S:g} s target" if not extra else "reference"
        print(f"  end to end, new process, {what}: median {median:.2f} s (runs "
              f"{', '.join(f'{s:.2f}' for s in samples)}; {verdict}); {heavy}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=REPO / "results" / "example-predict-retinanet")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", choices=("4", "64", "both"), default="both")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    for target in (("4", "64") if args.target == "both" else (args.target,)):
        bench(target, args.results, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
