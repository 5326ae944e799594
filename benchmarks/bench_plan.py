"""How long `orch plan` takes, end to end and in process, and whether it stays torch- and Ray-free.

    .venv/bin/python benchmarks/bench_plan.py [--runs 7]

End to end: `orch plan` in a fresh process (interpreter start-up, imports, YAML, detection or topology file,
planning, rendering), the median of several runs. In process: `make_plan` for the grid of
sweeps/retinanet-table3.yaml (ranks 1-16 × threads 7-56 × local batch 1, 2) on the 8-socket and the 4-node
topologies. The retinanet workload is not loaded: the spec is parsed directly and one rank's memory is a stand-in
(8 GiB per sample of local batch), so the numbers time the planner, not a workload's estimate.

Prints one line per measurement; timings are for this machine at the time of the run, not targets.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEPS = REPO / "sweeps"
TOPOLOGIES = SWEEPS / "topologies"
HEAVY = ("torch", "ray", "torchvision")

PROBE = f"""
import contextlib, io, json, sys
from orchestrator.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(sys.argv[1:])
print(json.dumps({{"rc": rc, "heavy": sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})}}))
"""


def orch_command() -> list[str]:
    script = Path(sys.executable).parent / "orch"
    return [str(script)] if script.exists() else [
        sys.executable, "-c", "from orchestrator.cli import console_main; console_main()"]


def median_ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e3:8.1f} ms  (min {min(samples) * 1e3:.1f}, " \
           f"max {max(samples) * 1e3:.1f}, n={len(samples)})"


def end_to_end(argv: list[str], runs: int) -> str:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(orch_command() + argv, capture_output=True, text=True, cwd=REPO)
        samples.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"orch {' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return median_ms(samples)


def heavy_imports(argv: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])["heavy"]


def in_process(runs: int) -> list[str]:
    from orchestrator.core.plan import make_plan
    from orchestrator.core.plan_view import plan_tables, plan_to_dict
    from orchestrator.core.spec import parse_spec
    from orchestrator.io.topofile import load_topology
    from orchestrator.io.yamlfile import read_yaml

    data, _ = read_yaml(SWEEPS / "retinanet-table3.yaml", "sweep file")
    spec, problems = parse_spec(data)
    if spec is None:
        raise SystemExit(f"retinanet-table3.yaml: {problems}")
    lines = []
    for name in ("xeon-8s28c.yaml", "cluster-4x2s28c.yaml"):
        topology = load_topology(TOPOLOGIES / name)
        plan_s, view_s = [], []
        for _ in range(runs):
            start = time.perf_counter()
            plan = make_plan(spec, topology, rank_memory_mib=lambda batch: 8192.0 * batch, ccl_available=False)
            plan_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            plan_tables(plan)
            plan_to_dict(plan)
            view_s.append(time.perf_counter() - start)
        lines.append(f"{'in process':12s}{'make_plan, table3 on ' + name:48s}{median_ms(plan_s)}; "
                     f"{len(plan.feasible)}/{len(plan.trials)} points feasible")
        lines.append(f"{'in process':12s}{'tables + JSON, table3 on ' + name:48s}{median_ms(view_s)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="repetitions per measurement (default 7)")
    args = parser.parse_args()

    classifier = str(SWEEPS / "classifier.yaml")
    cases = {
        "topology file": ["plan", classifier, "--topology", str(TOPOLOGIES / "emulated-2s1c.yaml")],
        "topology file, 8 sockets": ["plan", classifier, "--topology", str(TOPOLOGIES / "xeon-8s28c.yaml")],
        "detected topology": ["plan", classifier],
        "detected topology --json": ["plan", classifier, "--json"],
    }
    print(f"bench_plan: python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'baseline':12s}{'python -c pass':48s}{median_ms(_bare_python(args.runs))}")
    for label, argv in cases.items():
        print(f"{'end to end':12s}{'orch plan, ' + label:48s}{end_to_end(argv, args.runs)}")
    for line in in_process(args.runs):
        print(line)
    for label in ("topology file", "detected topology"):
        heavy = heavy_imports(cases[label])
        print(f"{'imports':12s}{'orch plan, ' + label:48s}torch/ray imported: {_yes_no(heavy)}")
    here = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
    print(f"{'imports':12s}{'this process, after in-process planning':48s}torch/ray imported: {_yes_no(here)}")


def _yes_no(modules: list[str]) -> str:
    return "yes: " + ", ".join(modules) if modules else "no"


def _bare_python(runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        samples.append(time.perf_counter() - start)
    return samples


if __name__ == "__main__":
    main()
