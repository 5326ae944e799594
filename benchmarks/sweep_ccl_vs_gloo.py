"""The default sweep's cells under gloo and under oneCCL, one after the other in one run, then `orch predict`'s
fitted ρ for each: what the in-node all-reduce changes in the numbers orch reports.

Both runs use `sweeps/retinanet.yaml` as it is (same workload, grid and measure), without convergence, in
the interpreter that runs this script (.venv-ipex: torch 2.8 + the bindings), changed in two keys only:
`backend` (gloo, then ccl; the order alternates by round) and, for ccl, `constraints.ccl_workers: 0`. With
the default ccl_workers 1 a rank needs a core more for oneCCL's worker, and on a 2-core machine 2 × 1 and
1 × 2 would not fit; with 0 the worker shares the rank's core, as gloo's threads do. Each run writes
RESULTS/<backend>-r<round>/ (a normal results folder with its report, and `orch predict`'s in predict/).

    .venv-ipex/bin/python benchmarks/sweep_ccl_vs_gloo.py [--results results/ccl-vs-gloo] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core.measured.records import Kind, Record  # noqa: E402
from orchestrator.io.store import load_results  # noqa: E402

SWEEP = REPO / "sweeps" / "retinanet.yaml"
BACKENDS = ("gloo", "ccl")
CELLS = ((1, 1), (1, 2), (2, 1))   # (ranks, threads per rank): what a 2-core machine hosts


def sweep_file(folder: Path, backend: str) -> Path:
    doc = yaml.safe_load(SWEEP.read_text())
    doc["name"] = f"retinanet-{backend}"
    doc["backend"] = backend
    if backend == "ccl":
        doc.setdefault("constraints", {})["ccl_workers"] = 0
    path = folder / f"retinanet-{backend}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def orch(*args: str) -> None:
    print(f"$ orch {' '.join(args)}  (load average {os.getloadavg()[0]:.2f})", flush=True)
    # this checkout's orch in the driver, the Ray workers and the ranks, whatever the venv installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, check=True, env=env)


def cells(results: Path) -> dict[tuple[int, int], Record]:
    """(ranks, threads) -> the throughput record, for the sweep's first local batch."""
    return {(r.ranks or 0, r.threads_per_rank or 0): r for r in load_results(results).records.of_kind(Kind.THROUGHPUT)}


def rho(results: Path) -> str:
    model = json.loads((results / "predict" / "prediction-model.json").read_text())
    row = next((r for r in model["rows"] if r["label"] == "ρ"), None)
    return f"{row['cells'][0]['text']} ({row['cells'][2]['text']})" if row else "–"


def summary(backend: str, results: Path) -> list[str]:
    measured = cells(results)
    sections = {c: measured[c].throughput if c in measured else None for c in CELLS}
    rate = {c: s.samples_per_s if s is not None else None for c, s in sections.items()}
    base = rate[(1, 1)]
    communication = measured[(2, 1)].communication if (2, 1) in measured else None
    out = [backend, str(communication.version if communication is not None else "–")]
    for c in CELLS:
        r, section = rate[c], sections[c]
        cv = section.cv if section is not None else None
        out.append(f"{r:.2f} (cv {cv or 0.0:.1%})" if r else str(measured[c].status) if c in measured else "–")
    out += [f"{rate[c] / base:.3f}" if rate[c] and base else "–" for c in ((2, 1), (1, 2))]
    return [*out, rho(results)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=REPO / "results" / "ccl-vs-gloo")
    parser.add_argument("--rounds", type=int, default=1, help="gloo/ccl pairs, order alternating (default 1)")
    args = parser.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    files = {b: sweep_file(args.results, b) for b in BACKENDS}
    rows = []
    for round_index in range(args.rounds):
        for backend in BACKENDS if round_index % 2 == 0 else BACKENDS[::-1]:
            out = args.results / f"{backend}-r{round_index}"
            orch("sweep", str(files[backend]), "--results", str(out), "--no-convergence")
            orch("predict", str(out), "--validate", "--out", str(out / "predict"))
            rows.append((round_index, backend, out))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import format_table

    table = [[str(r), *summary(b, out)] for r, b, out in rows]
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    print(format_table(["round", "backend", "version", "1×1 samples/s", "1×2 samples/s", "2×1 samples/s",
                        "2×1 ÷ 1×1", "1×2 ÷ 1×1", "orch predict ρ"], table))


if __name__ == "__main__":
    main()
