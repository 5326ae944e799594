"""How long `orch predict` takes for a 64-node target, and whether it stays torch- and Ray-free.

    .venv/bin/python benchmarks/bench_predict.py [--results results/example-predict] [--runs 5]

In process, each the median of several runs:
- fit: reading the records and fitting every model with its full hold-out validation (`fit_all`);
- predict: every feasible layout of the target at node counts 1, 2, 4, ..., 64 (the plan code of `orch plan`)
  with intervals, epochs, time-to-train, marks and the recommendation;
End to end: `orch predict --json` in a fresh process (interpreter start-up, imports, fit, predict, the files
and their PNG plots), and the list of heavy modules it imported (must be empty).

The target is a 64-node cluster of 2 sockets × 28 cores (hyperthreads 2) with 192 GiB per node, written to a
temporary topology file. Prints one line per measurement; the times are for this machine at the time of the run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ray", "torchvision")
TARGET = "nodes: 64\nsockets: 2\ncores_per_socket: 28\nthreads_per_core: 2\nmemory_gib: 192\n"
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=REPO / "results" / "example-predict")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from orchestrator.io.predict_inputs import load_inputs
    from orchestrator.report.prediction import prediction_report

    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "cluster-64x2s28c.yaml"
        target.write_text(TARGET)
        options = SimpleNamespace(results=str(args.results), topology=str(target), nodes=None, local_batch=None,
                                  rcp=None, samples_per_epoch=None, calibration=[], deadline_h=None,
                                  budget_node_h=None)
        fit_s, inputs = timed(lambda: load_inputs(options), args.runs)
        predict_s, report = timed(lambda: prediction_report(inputs), args.runs)
        print(f"fit + validation ({len(inputs.fitted.cells)} cells):          median {fit_s * 1e3:8.1f} ms")
        print(f"predict {len(report.predictions)} layouts on 1..64 nodes:       median {predict_s * 1e3:8.1f} ms")
        print(f"in process, fit + predict:                 {(fit_s + predict_s) * 1e3:8.1f} ms (target < 1000 ms)")
        argv = ["predict", str(args.results), "--topology", str(target), "--json", "--out", str(Path(tmp) / "out")]
        samples = []
        for _ in range(max(1, args.runs // 2)):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=REPO)
            samples.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"orch predict failed:\n{done.stderr}")
        print(f"end to end (new process, files and PNGs):  median {statistics.median(samples) * 1e3:8.1f} ms; "
              f"heavy modules imported: {done.stdout.strip().splitlines()[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
