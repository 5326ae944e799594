#!/usr/bin/env bash
# The AVX2 path on any x86-64 machine: cap oneDNN and ATen at AVX2 (what an AVX2-only CPU such as AMD Zen 3
# runs), then run the README's first command on the default sweep without its convergence runs and check what
# it recorded: precision auto chose fp32 (bf16 is emulated there), every trial is ok and none timed out; then
# the tests whose truth depends on the CPU's ISA (marked isa) under the same cap. .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
export ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
echo "avx2: orch sweep sweeps/retinanet.yaml --no-convergence under ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2" >&2
start=$(date +%s)
.venv/bin/orch sweep sweeps/retinanet.yaml --no-convergence --results "$results/retinanet"
echo "avx2: the sweep took $(( $(date +%s) - start )) s" >&2
.venv/bin/python - "$results/retinanet" <<'PY'
import json, sys
from pathlib import Path

folder = Path(sys.argv[1])
env = json.loads((folder / "environment.json").read_text())
records = [json.loads(line) for line in (folder / "trials.jsonl").read_text().splitlines() if line.strip()]
problems = []
if env["precision"]["chosen"] != "fp32":
    problems.append(f"precision auto chose {env['precision']['chosen']} under the AVX2 cap: {env['precision']['reason']}")
ran = [r for r in records if r["status"] != "infeasible"]
problems += [f"{r['key']}: {r['status']}: {r['reason']}" for r in ran if r["status"] != "ok"]
problems += [f"{r['key']}: trained in {r['applied']['precision']}" for r in ran
             if r["kind"] == "throughput" and r["applied"]["precision"] != "fp32"]
problems += [f"{r['key']}: GEMM peak in {r['peak']['precision']}" for r in ran
             if r["kind"] == "peak" and r["peak"]["precision"] != "fp32"]
if not any(r["kind"] == "throughput" for r in ran):
    problems.append("no throughput trial ran")
for p in problems:
    print(f"avx2: FAILED: {p}", file=sys.stderr)
print(f"avx2: {len(ran)} trials ok in fp32 ({env['precision']['reason']})" if not problems else "", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
echo "avx2: the ISA-dependent tests under the cap" >&2
.venv/bin/python -m pytest -m isa -p no:cacheprovider
