"""Concurrent trials on a 2-node cluster: the same sweep of node-sized throughput trials run one after another
(`--max-concurrent 1`) and concurrently (the default, measure.isolation: node), side by side in one run.

    .venv/bin/python benchmarks/bench_concurrency.py [--pairs 2] [--quick]

A 2-node local Ray cluster (`ray.cluster_utils.Cluster`, one CPU per node) and a topology file that gives
node 0 CPU 0 and node 1 CPU 1 (the nodes have the same shape, numbered apart), so that each trial really
fills one node and two trials on two nodes use disjoint cores. Each pair runs the serial and the concurrent
sweep, in alternating order (so that a burst of noise on the shared machine hits both), into fresh results
folders. Printed: each sweep's wall time, concurrent ÷ serial, and every trial's throughput in both modes
with its repeats' CV: concurrency must not change the figures beyond that spread. Here it can: the two
emulated nodes share this machine's memory bus and last-level cache, which two real nodes would not.

The target: concurrent wall ≤ 0.6 × serial wall.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment_line, format_table  # noqa: E402
from predict_multinode import two_node_topology  # noqa: E402

from orchestrator.core.measured.records import Kind  # noqa: E402
from orchestrator.io.store import load_results  # noqa: E402

SWEEP = """
name: concurrency
workload: {name: classifier, params: {hidden: 512, train_samples: 8192}}
grid: {ranks: [1], threads_per_rank: [1], local_batch: %s}
measure: {warmup_steps: 5, timed_steps: %d, repeats: 3, peak: false, allreduce: false}
"""


def sweep_once(sweep: Path, topology: Path, address: str, results: Path, concurrent: bool) -> float:
    from orchestrator.cli import main

    args = ["sweep", str(sweep), "--address", address, "--topology", str(topology), "--results", str(results),
            "--no-report", "--json"]
    started = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()):   # --json's records: the results file has them
        code = main(args + ([] if concurrent else ["--max-concurrent", "1"]))
    wall_s = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"the sweep failed (exit {code}); see {results}")
    return wall_s


def throughputs(results: Path) -> dict[str, tuple[float, float]]:
    """key: (samples/s, CV of the repeats) of every throughput trial."""
    return {r.key: (r.throughput.samples_per_s, r.throughput.cv or 0.0)
            for r in load_results(results).records.ok(Kind.THROUGHPUT) if r.throughput is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=2, help="serial + concurrent pairs (default 2)")
    parser.add_argument("--quick", action="store_true", help="one pair, shorter trials")
    args = parser.parse_args()
    # Six trials of similar length (a few seconds of timing each), so that two nodes can share them evenly.
    pairs, steps = (1, 300) if args.quick else (args.pairs, 1000)
    import ray
    from ray.cluster_utils import Cluster

    out = Path(tempfile.mkdtemp(prefix="bench-concurrency-"))
    sweep = out / "concurrency.yaml"
    sweep.write_text(textwrap.dedent(SWEEP % ("[32, 48, 64, 80, 96, 128]", steps)))
    topology = two_node_topology(out)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    walls: dict[bool, list[float]] = {False: [], True: []}
    figures: dict[bool, list[dict[str, tuple[float, float]]]] = {False: [], True: []}
    try:
        for pair in range(pairs):
            for concurrent in ((False, True) if pair % 2 == 0 else (True, False)):
                results = out / f"{'concurrent' if concurrent else 'serial'}-{pair}"
                walls[concurrent].append(sweep_once(sweep, topology, cluster.address, results, concurrent))
                figures[concurrent].append(throughputs(results))
                print(f"pair {pair}: {'concurrent' if concurrent else 'serial'} {walls[concurrent][-1]:.1f} s",
                      file=sys.stderr)
    finally:
        ray.shutdown()
        cluster.shutdown()
    report(walls, figures)


def report(walls: dict[bool, list[float]], figures: dict[bool, list[dict[str, tuple[float, float]]]]) -> None:
    print(environment_line())
    serial, concurrent = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"sweep wall time, median of {len(walls[False])}: serial {serial:.1f} s "
          f"({', '.join(f'{w:.1f}' for w in walls[False])}), concurrent {concurrent:.1f} s "
          f"({', '.join(f'{w:.1f}' for w in walls[True])}); concurrent ÷ serial = {concurrent / serial:.2f} "
          f"(target ≤ 0.60)")
    rows = []
    for key in sorted(figures[False][0], key=lambda k: int(k.rsplit("-b", 1)[1])):
        s = [f[key] for f in figures[False]]
        c = [f[key] for f in figures[True]]
        s_med, c_med = statistics.median(v for v, _ in s), statistics.median(v for v, _ in c)
        cv = max(cv for _, cv in s + c)
        diff = c_med / s_med - 1
        rows.append([key, f"{s_med:,.0f}", f"{c_med:,.0f}", f"{diff:+.1%}", f"{cv:.1%}",
                     "yes" if abs(diff) <= cv else "no"])
    print(format_table(["trial", "serial samples/s", "concurrent samples/s", "difference", "largest CV",
                        "within CV"], rows))


if __name__ == "__main__":
    main()
