"""Write a projection (`orch profile --project-to`) and its validation against a run on the target:
projection.md and projection.json; validation.md and validation.json."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.core.profile import projection as pj
from orchestrator.io.files import write_atomic
from orchestrator.report.profile_report import md_table

PROJECTION_FILE = "projection.md"
VALIDATION_FILE = "validation.md"

RULES = ("Each oneDNN primitive problem's time per step (verbose pass) × attainable(source) ÷ attainable(target) "
         "at its arithmetic intensity, attainable = min(peak, intensity × bandwidth), the peak its class's own (a "
         "convolution direction's) where both CPUs have one: compute-bound problems scale "
         "by the peak ratio, memory-bound ones by the bandwidth ratio, reorders (no FLOPs) by the bandwidth ratio, "
         "kinds with no cost model as the rest. The rest (plain step − primitives: ATen, optimizer, Python, "
         "communication) is scaled by a stated rule: `same` (kept as measured; the projection), `bandwidth` or "
         "`peak` (the same ratios), shown so the rule's weight is visible. The step is the slowest rank's.")


def _top(rows: Sequence[Mapping[str, Any]], n: int = 12) -> list[dict[str, Any]]:
    return [{k: r[k] for k in ("kind", "direction", "problem", "bound", "measured_ms", "scale", "projected_ms")}
            for r in sorted(rows, key=lambda r: -r["measured_ms"])[:n]]


def write_projection(projections: Sequence[Mapping[str, Any]], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "projection.json", json.dumps(list(projections), indent=1) + "\n", durable=False)
    md = ["# Projected step time", "", RULES, ""]
    for p in projections:
        s, t = p["source_roof"], p["target_roof"]
        steps = p["projected_step_ms"]
        md += [f"## {p['label']} → {p['target']}", "", p["note"] + ".", "",
               md_table([{"": name, "GFLOP/s": r["gflops"], "GB/s": r["gbs"], **r.get("kind_gflops", {})}
                         for name, r in (("source", s), ("target", t))]),
               f"Measured plain step {p['measured_step_ms']:.1f} ms; projected **{steps['same']:.1f} ms** "
               f"(rest kept), {steps['bandwidth']:.1f} ms (rest × bandwidth ratio), {steps['peak']:.1f} ms (rest × "
               "peak ratio).", "", "Largest primitives of rank 0 (ms per step):", "",
               md_table(_top(p["ranks"][0]["primitives"])), ""]
    write_atomic(out / PROJECTION_FILE, "\n".join(md) + "\n", durable=False)
    return out / PROJECTION_FILE


def write_validation(rows_by_target: Mapping[str, Sequence[pj.ValidationRow]], header: Mapping[str, Any],
                     out: Path) -> Path:
    """Projected against measured on the target, kind by kind and for the step, per layout."""
    out.mkdir(parents=True, exist_ok=True)
    plain = {label: [r.to_json() for r in rows] for label, rows in rows_by_target.items()}
    write_atomic(out / "validation.json", json.dumps({"header": dict(header), "targets": plain}, indent=1) + "\n",
                 durable=False)
    md = ["# Projection against a run on the target", "", f"Commands: `{header['native_command']}` then "
          f"`{header['target_command']}`.", "", RULES, "",
          f"`error`: projected ÷ measured − 1. `{pj.OUTSIDE}` is projected under the `same` rule.", ""]
    for label, rows in rows_by_target.items():
        shown = [{**r.to_json(), "error": "–" if r.error is None else f"{r.error:+.1%}"} for r in rows]
        md += [f"## {label}", "", md_table(shown), ""]
        above = header.get("kernels_above", {}).get(label)
        if above:
            md += [f"**The target run used kernels above the cap:** {', '.join(above)}: it was not capped.", ""]
    write_atomic(out / VALIDATION_FILE, "\n".join(md) + "\n", durable=False)
    return out / VALIDATION_FILE
