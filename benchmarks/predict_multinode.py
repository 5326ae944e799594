"""Multi-node prediction against measurement: predict 2 ranks × 1 thread on 2 nodes from single-node records
plus an across-node all-reduce calibration, then measure it on a 2-node Ray cluster and compare.

    .venv/bin/python benchmarks/predict_multinode.py [--single results/example-predict] [--out DIR]

1. Starts a 2-node local Ray cluster (`ray.cluster_utils.Cluster`, one CPU per node) and a topology file that
   gives node 0 CPU 0 and node 1 CPU 1, so that each rank really runs alone on its own Ray node.
2. Runs `orch sweep` there: the across-node all-reduce calibration and 2 × 1 at the single-node sweep's local
   batches (ranks {2}, threads {1}; the 2-node layout is the only placement of 2 ranks on these nodes).
3. Fits `orch predict`'s model to the single-node records (their cells and their own calibration) plus the
   across-node calibration, predicts each 2 × 1 × b on 2 nodes, and prints predicted, measured and the error.

Both "nodes" share this machine's one socket and its loopback, which the model (two nodes: no socket
sharing, the network calibrated on loopback) only partly sees: the comparison tests the mechanics of
predicting a layout class from calibration, on the hardware at hand.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def two_node_topology(folder: Path) -> Path:
    def node(name: str, cpu: int) -> dict:
        return {"name": name, "memory_mib": 8192, "sockets": [[[cpu]]],
                "numa_nodes": [{"index": 0, "cpus": [cpu], "memory_mib": 8192}]}

    path = folder / "two-nodes-1c.json"
    path.write_text(json.dumps({"nodes": [node("node0", 0), node("node1", 1)]}))
    return path


def run_cluster_sweep(single: Path, out: Path) -> Path:
    import ray
    from ray.cluster_utils import Cluster

    from orchestrator.cli import main

    spec = json.loads((single / "spec.json").read_text())
    params = spec["spec"]["workload"]["params"]
    measure = spec["spec"]["measure"]
    batches = spec["derived"]["local_batches"]
    sweep = out / "multinode.yaml"
    sweep.write_text(textwrap.dedent(f"""
        name: multinode
        workload: {{name: {spec['spec']['workload']['name']}, params: {json.dumps(params)}}}
        grid: {{ranks: [2], threads_per_rank: [1], local_batch: {json.dumps(batches)}}}
        measure: {{warmup_steps: {measure['warmup_steps']}, timed_steps: {measure['timed_steps']},
                   repeats: {measure['repeats']}, peak: false}}
        """))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    results = out / "results-multinode"
    try:
        code = main(["sweep", str(sweep), "--address", cluster.address, "--topology", str(two_node_topology(out)),
                     "--results", str(results), "--no-report"])
    finally:
        ray.shutdown()
        cluster.shutdown()
    if code != 0:
        raise SystemExit(f"the 2-node sweep failed (exit {code}); see {results}")
    return results


def compare(single: Path, multinode: Path) -> list[tuple[int, float, float, float]]:
    from orchestrator.core.measured import records as rec
    from orchestrator.core.predict.data import cells_from_records
    from orchestrator.core.predict.fit import fit_all
    from orchestrator.io.store import load_results

    measured = load_results(multinode).records
    calibration = list(measured.of_kind(rec.Kind.ALLREDUCE))
    fitted = fit_all(load_results(single).records, extra_calibration=calibration)
    print(f"fitted on {len(fitted.cells)} single-node cells; links calibrated: "
          + ", ".join(f"{k} (α {v.alpha_s * 1e6:.0f} µs, {v.bandwidth_gb_per_s:.2f} GB/s)"
                      for k, v in fitted.links.items()))
    rows = []
    for cell in cells_from_records(measured):
        # as the topology file says (each rank alone on its node's socket) and as the hardware is (the two
        # Ray nodes are one machine: both ranks share its one socket's memory bandwidth)
        as_file = fitted.model.samples_per_s(cell.layout)
        as_hardware = fitted.model.samples_per_s(replace(cell.layout, ranks_per_socket=2))
        rows.append((cell.layout.local_batch, as_file, as_hardware, cell.samples_per_s))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=Path, default=REPO / "results" / "example-predict",
                        help="single-node results folder to predict from (default: results/example-predict)")
    parser.add_argument("--out", type=Path, help="where to keep the 2-node sweep (default: a temporary folder)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="orch-multinode-"))
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(REPO))
    results = run_cluster_sweep(args.single, out)
    rows = compare(args.single, results)
    print("2 ranks × 1 thread on 2 nodes, samples/s; predicted as the topology file describes it (each rank alone on "
          "a socket) and as the hardware is (both nodes on this machine's one socket)")
    print(f"{'local batch':>11}  {'measured':>10}  {'as file':>10}  {'error':>7}  {'as hardware':>11}  {'error':>7}")
    for batch, as_file, as_hardware, measured in rows:
        print(f"{batch:>11}  {measured:>10,.1f}  {as_file:>10,.1f}  {100 * (as_file / measured - 1):>+6.1f}%  "
              f"{as_hardware:>11,.1f}  {100 * (as_hardware / measured - 1):>+6.1f}%")
    for name, column in (("as file", 1), ("as hardware", 2)):
        errors = [abs(100 * (r[column] / r[3] - 1)) for r in rows]
        print(f"{name}: median |error| {statistics.median(errors):.1f}%, max {max(errors):.1f}% "
              f"over {len(rows)} layouts")
    print(f"records in {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
