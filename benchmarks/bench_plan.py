"""How long `orch plan` takes, end to end and in process, and whether it stays torch- and Ray-free.

    .venv/bin/python benchmarks/bench_plan.py [--runs 7]

End to end: `orch plan` in a fresh process (interpreter start-up, imports, YAML, detection or topology file,
planning, rendering), the median of several runs. In process: `make_plan` for the grid of
sweeps/retinanet-table3.yaml (ranks 1-16 × threads 7-56 × local batch 1, 2) on the 8-socket and the 4-node
topologies. The retinanet workload is not loaded: the spec is parsed directly and one rank's memory is a stand-in
(8 GiB per sample of local batch), so the numbers time the planner, not a workload's estimate.

At scale (in process and end to end, each against its target): the table3 grid on 10,000 nodes × 2 sockets
× 56 cores × 2 threads (< 1 s), a 585-point grid (ranks 1-4096 × 9 threads × 5 local batches) on 64 nodes ×
2 sockets × 32 cores (< 1 s), and a 5,000-point grid on the same 64 nodes ("a few seconds": < 5 s). Planning
groups alike nodes, so these cost time in the grid and the ranks placed, not in the cluster's size.

Prints one line per measurement; timings are for this machine at the time of the run (a busy machine is
slower: the load average is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

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
    return median_ms(_walls(argv, runs))


def _walls(argv: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(orch_command() + argv, capture_output=True, text=True, cwd=REPO)
        samples.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"orch {' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return samples


def heavy_imports(argv: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])["heavy"]


def in_process(runs: int) -> list[str]:
    from orchestrator.core.planning.plan import make_plan
    from orchestrator.core.planning.spec import parse_spec
    from orchestrator.core.planning.view import plan_tables, plan_to_dict
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


TABLE3_GRID = {"ranks": [1, 2, 4, 8, 16], "threads_per_rank": [7, 14, 28, 56], "local_batch": [1, 2]}
# (label, topology in compact form, grid, target seconds)
SCALE_CASES = [
    ("table3, 10,000 nodes × 2 sockets × 56 cores × 2 threads",
     {"name": "n", "nodes": 10_000, "sockets": 2, "cores_per_socket": 56, "threads_per_core": 2, "memory_gib": 512},
     TABLE3_GRID, 1.0),
    ("585 points (ranks 1-4096) on 64 nodes × 2 sockets × 32 cores",
     {"name": "n", "nodes": 64, "sockets": 2, "cores_per_socket": 32, "threads_per_core": 2, "memory_gib": 256},
     {"ranks": [2 ** k for k in range(13)], "threads_per_rank": [1, 2, 3, 4, 6, 8, 12, 16, 32],
      "local_batch": [1, 2, 4, 8, 16]}, 1.0),
    ("5,000 points on 64 nodes × 2 sockets × 32 cores",
     {"name": "n", "nodes": 64, "sockets": 2, "cores_per_socket": 32, "threads_per_core": 2, "memory_gib": 256},
     {"ranks": list(range(1, 101)), "threads_per_rank": list(range(1, 26)), "local_batch": [1, 2]}, 5.0),
]


def _verdict(seconds: float, target_s: float) -> str:
    return f"target < {target_s:g} s: {'met' if seconds < target_s else 'MISSED'}"


def at_scale(runs: int) -> list[str]:
    """make_plan + the plan's tables in process, then `orch plan` end to end, for each SCALE_CASES entry."""
    from orchestrator.core.json.schema import load
    from orchestrator.core.machine.topology import CompactTopology, build_compact
    from orchestrator.core.planning.plan import make_plan
    from orchestrator.core.planning.spec import parse_spec
    from orchestrator.core.planning.view import plan_tables

    lines = []
    with tempfile.TemporaryDirectory() as folder:
        for label, topo_fields, grid, target_s in SCALE_CASES:
            sweep = {"name": "scale", "workload": {"name": "classifier"}, "grid": grid}
            spec, problems = parse_spec(sweep)
            compact, more = load(CompactTopology, topo_fields)
            if spec is None or compact is None:
                raise SystemExit(f"{label}: {problems + more}")
            samples = []
            for _ in range(runs):
                start = time.perf_counter()
                plan = make_plan(spec, build_compact(compact, "bench"), rank_memory_mib=lambda batch: 512.0 * batch,
                                 ccl_available=False)
                plan_tables(plan)
                samples.append(time.perf_counter() - start)
            placed = sum(p.trial.ranks for p in plan.feasible)
            lines.append(f"{'in process':12s}{'make_plan + tables, ' + label:78s}{median_ms(samples)}; "
                         f"{_verdict(statistics.median(samples), target_s)}; {len(plan.feasible)}/{len(plan.trials)} "
                         f"feasible, {placed:,} ranks placed")
            sweep_file, topo_file = Path(folder) / "sweep.yaml", Path(folder) / "topology.yaml"
            sweep_file.write_text(yaml.safe_dump(sweep))
            topo_file.write_text(yaml.safe_dump(topo_fields))
            argv = ["plan", str(sweep_file), "--topology", str(topo_file)]
            walls = _walls(argv, runs)
            lines.append(f"{'end to end':12s}{'orch plan, ' + label:78s}{median_ms(walls)}; "
                         f"{_verdict(statistics.median(walls), target_s)}")
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
    for line in at_scale(args.runs):
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
