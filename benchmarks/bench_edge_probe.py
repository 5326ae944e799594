"""What measuring the stability edge costs the default sweep (`convergence.edge`, run.rank.edge): its share of the
sweep's wall time, on this CPU (or under the AVX2 cap, `--avx2`).

    .venv/bin/python benchmarks/bench_edge_probe.py [--avx2] [--ab] [--sweep sweeps/retinanet.yaml]

Runs the sweep into a fresh folder with the edge probed as the sweep file says (the default, `auto`: one short
range test per global batch, on its first seed), timing the whole command. Each probe records its own wall time
(`edge.probe_s`, measured around it in the rank, and not counted in the run's training time), so the probe's
share of the sweep is Σ probe_s ÷ the sweep's wall time, measured in the same run. With `--ab` the same sweep runs
again with `convergence.edge: none` in a second fresh folder, and the two wall times are compared too (one pair:
the machine's own noise between two runs is of the same order as the probe's share, so the records' figure is the
one to quote). Prints the CPU, the precision, the wall times and the shares.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
ORCH = [sys.executable, "-m", "orchestrator.cli"]
AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def run_sweep(sweep: Path, out: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([*ORCH, "sweep", str(sweep), "--results", str(out), "--no-report"], check=True, cwd=REPO,
                   env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def probes(out: Path) -> tuple[int, float, str]:
    """(probes, Σ probe_s, precision) of a folder's convergence records."""
    count, total, precision = 0, 0.0, "?"
    env = json.loads((out / "environment.json").read_text())
    precision = (env.get("precision") or {}).get("chosen") or precision
    for line in (out / "trials.jsonl").read_text().splitlines():
        record = json.loads(line)
        edge = (record.get("convergence") or {}).get("edge")
        if edge and edge.get("probe_s") is not None:
            count, total = count + 1, total + float(edge["probe_s"])
    return count, total, precision


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", default=str(REPO / "sweeps" / "retinanet.yaml"))
    parser.add_argument("--avx2", action="store_true", help="under ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2")
    parser.add_argument("--ab", action="store_true", help="also run it with convergence.edge: none, and compare")
    args = parser.parse_args()
    env = AVX2 if args.avx2 else {}
    with tempfile.TemporaryDirectory(prefix="bench-edge-") as tmp:
        wall = run_sweep(Path(args.sweep), Path(tmp) / "with", env)
        count, probe_s, precision = probes(Path(tmp) / "with")
        print(f"CPU: {cpu_model()}{' under the AVX2 cap' if args.avx2 else ''}; precision {precision}")
        print(f"sweep with the edge probed: {wall:.1f} s wall; {count} probe(s), {probe_s:.2f} s in all: "
              f"{100 * probe_s / wall:.2f}% of the sweep")
        if args.ab:
            doc = yaml.safe_load(Path(args.sweep).read_text())
            doc.setdefault("convergence", {})["edge"] = "none"
            plain = Path(tmp) / "plain.yaml"
            plain.write_text(yaml.safe_dump(doc, sort_keys=False))
            wall_none = run_sweep(plain, Path(tmp) / "without", env)
            print(f"sweep with convergence.edge: none: {wall_none:.1f} s wall; with ÷ without = "
                  f"{wall / wall_none:.3f} (one pair)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
