"""How long `orch predict` takes for a 64-node target, bootstrap included, and whether it stays torch- and Ray-free.

    .venv/bin/python benchmarks/bench_predict.py [--results results/example-predict-retinanet]
        [--rcp tests/data/rcp/rcps_retinanet.json | --rcp none] [--topology FILE] [--runs 5]

The default case is issue 19's: the small RetinaNet example with MLPerf's RetinaNet RCP file, planned on
`sweeps/topologies/cluster-64x2s28c.yaml` (64 nodes of 2 sockets × 28 cores, hyperthreads 2, 192 GiB).

In process, each the median of several runs:
- fit: reading the records and fitting every model with its full hold-out validation and the residual
  bootstrap of the step fit (`load_inputs` → `fit_all`; the number of bootstrap refits is printed);
- predict: every feasible layout of the target at node counts 1, 2, 4, ..., 64 (the plan code of `orch plan`)
  with intervals, epochs, time-to-train, marks and the recommendation.
End to end, in a fresh process each run (interpreter start-up, imports, fit with bootstrap, predict, output):
- `orch predict ... --json` (prints everything, writes nothing): the figure issue 19's target (< 2 s) is about;
- `orch predict ... --json --out DIR` (also the files and the four PNGs);
and the heavy modules the process imported (must be none). Prints one line per measurement; the times are for
this machine at the time of the run, so run it on a quiet machine before quoting them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ray", "torchvision")
TARGET_S = 2.0
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=REPO / "results" / "example-predict-retinanet")
    parser.add_argument("--rcp", default=str(REPO / "tests" / "data" / "rcp" / "rcps_retinanet.json"),
                        help="RCP file, or 'none' for the results' own convergence data")
    parser.add_argument("--topology", type=Path, default=REPO / "sweeps" / "topologies" / "cluster-64x2s28c.yaml")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from orchestrator.io.predict_inputs import load_inputs
    from orchestrator.report.prediction import prediction_report

    rcp = None if args.rcp == "none" else args.rcp
    options = SimpleNamespace(results=str(args.results), topology=str(args.topology), nodes=None, local_batch=None,
                              rcp=rcp, samples_per_epoch=None, calibration=[], deadline_h=None, budget_node_h=None)
    fit_s, inputs = timed(lambda: load_inputs(options), args.runs)
    predict_s, report = timed(lambda: prediction_report(inputs), args.runs)
    nodes = max(p.layout.nodes for p in report.predictions)
    print(f"fit + validation + bootstrap ({len(inputs.fitted.cells)} cells, {len(inputs.fitted.bootstrap)} refits): "
          f"median {fit_s * 1e3:8.1f} ms")
    print(f"predict {len(report.predictions)} layouts on 1..{nodes} nodes:           median {predict_s * 1e3:8.1f} ms")
    argv = ["predict", str(args.results), "--topology", str(args.topology), "--json", *(["--rcp", rcp] if rcp else [])]
    with tempfile.TemporaryDirectory() as tmp:
        cases = (("--json, no files", []), ("--json --out (files, 4 PNGs)", ["--out", str(Path(tmp) / "o")]))
        for what, extra in cases:
            samples, heavy = end_to_end(argv + extra, args.runs)
            median = statistics.median(samples)
            verdict = "under" if median < TARGET_S else "OVER"
            runs = ", ".join(f"{s:.2f}" for s in samples)
            print(f"end to end, new process, {what}: median {median:.2f} s (runs {runs}; {verdict} the "
                  f"{TARGET_S:g} s target); {heavy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
