"""The projection's error against a real run under the AVX2 cap.

1. `orch profile SWEEP --project-to avx2` natively (the cap variables removed): the profile, then both roofs
   probed on the rank's cores, natively and capped, and each target's step projected from its primitives;
2. `orch profile SWEEP --no-replay` under ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2: the real step on
   the target, measured by the same protocol (its plain pass), and its own primitives;
3. kind by kind and for the step: projected against measured, the error, and a check that no oneDNN kernel of
   the capped run used AVX-512 (else it was not capped). Writes OUT/validation.md and OUT/validation.json.

    .venv/bin/python benchmarks/validate_projection.py sweeps/retinanet-projection.yaml --out /tmp/projection
    .venv/bin/python benchmarks/validate_projection.py sweeps/retinanet-projection.yaml --layout 1x1x8 \\
        --steps 2 --out /tmp/projection-smoke                                           # a smoke run

The sweep file should fix the precision (retinanet-projection.yaml trains in fp32): with `precision: auto`
the native run may train in bf16 and the capped one in fp32, and a projection carries primitives across CPUs,
not across precisions. Exit status: 0 compared, 1 a run failed or the target run was not capped.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core.profile import projection as pj  # noqa: E402
from orchestrator.core.profile.result import ProfiledTarget  # noqa: E402
from orchestrator.io.profile_store import load_result  # noqa: E402
from orchestrator.report.projection_report import write_validation  # noqa: E402
from orchestrator.run.driver.profile_projection import ranks_from_json  # noqa: E402
from orchestrator.run.driver.roof_probe import AVX2_CAP_ENV, CAP_VARS  # noqa: E402


def _orch(args: list[str], capped: bool) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in CAP_VARS}
    env.update(AVX2_CAP_ENV if capped else {})
    cmd = [sys.executable, "-m", "orchestrator.cli", *args]
    words = " ".join(f"{k}={v}" for k, v in AVX2_CAP_ENV.items()) + " " if capped else ""
    shown = words + "orch " + " ".join(shlex.quote(a) for a in args)
    print(f"validate: {shown}", file=sys.stderr, flush=True)
    return subprocess.run(cmd, env={**env, "PYTHONPATH": str(REPO)}, cwd=REPO, check=False).returncode, shown


def _results(folder: Path) -> dict[str, ProfiledTarget]:
    header = json.loads((folder / "profile-header.json").read_text())
    return {label: load_result(folder / label / "profile-result.json") for label in header["targets"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep")
    parser.add_argument("--layout", action="append", default=[], help="as orch profile's (default: the file's)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--replay", action="store_true", help="replay primitives in the native run as well")
    args = parser.parse_args(argv)
    common = ["profile", args.sweep, *(f"--layout={lay}" for lay in args.layout), "--steps", str(args.steps)]
    code, native_cmd = _orch([*common, "--out", str(args.out / "native"), "--project-to", "avx2",
                              *([] if args.replay else ["--no-replay"])], capped=False)
    code2, capped_cmd = _orch([*common, "--out", str(args.out / "avx2"), "--no-replay"], capped=True)
    if code or code2:
        print(f"validate: a run failed (exit {code}, {code2})", file=sys.stderr)
        return 1
    projections = {p["label"]: p for p in json.loads((args.out / "native" / "projection.json").read_text())}
    capped = _results(args.out / "avx2")
    rows = {label: pj.validation_rows(ranks_from_json(p), capped[label])
            for label, p in projections.items() if label in capped}
    above = {label: pj.kernels_above(capped[label]) for label in rows}
    header = {"native_command": native_cmd, "target_command": capped_cmd,
              "kernels_above": {k: v for k, v in above.items() if v}}
    path = write_validation(rows, header, args.out)
    for label, found in rows.items():
        step = found[-1]
        print(f"validate: {label}: native {step.native_ms:.1f} ms, projected {step.projected_ms:.1f} ms, "
              f"measured under the cap {step.measured_ms:.1f} ms, error {step.error:+.1%}")
    print(f"validate: {path}", file=sys.stderr)
    return 1 if header["kernels_above"] else 0


if __name__ == "__main__":
    sys.exit(main())
