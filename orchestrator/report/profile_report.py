"""Write `orch profile`'s output: profile.md, a CSV and a JSON per table, and the PNGs.

    targets = [json.loads(p.read_text()) for p in sorted(out.glob("*/profile-result.json"))]
    write_profile_report(targets, out, header)
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.core import profile_analysis as pa
from orchestrator.report import profile_plots as pp

PROFILE_FILE = "profile.md"
NAMED_TARGET = 0.9     # the share of a profiled step that should sit inside named ops
Rows = Sequence[Mapping[str, Any]]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    return "–" if value is None else str(value).replace("|", "\\|")


def md_table(rows: Rows, columns: Sequence[str] | None = None) -> str:
    if not rows:
        return "_(no rows)_\n"
    cols = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _write_rows(out: Path, name: str, rows: Rows) -> list[Path]:
    csv_path, json_path = out / f"{name}.csv", out / f"{name}.json"
    json_path.write_text(json.dumps(list(rows), indent=1) + "\n")
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return [csv_path, json_path]


def profile_links(results_dir: Path, report_dir: Path) -> str:
    """A "Profiles" section for report.md when `orch profile` wrote into the results folder (its default
    output, RESULTS/<sweep>/profile/): a link to each profile.md found there, else nothing."""
    found = sorted(Path(results_dir).glob(f"profile/**/{PROFILE_FILE}"))
    if not found:
        return ""
    lines = ["", "## Profiles", "", "Where the step time goes (`orch profile`): oneDNN primitives, layers, operators, "
             "roofline; profiled steps are not throughput figures.", ""]
    for path in found:
        rel = os.path.relpath(path.resolve(), Path(report_dir).resolve())
        lines.append(f"- [{path.parent.relative_to(results_dir).as_posix()}]({Path(rel).as_posix()})")
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def summary_rows(targets: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for t in targets:
        s = pa.summary(t)
        e = pa.efficiency(t)
        rows.append({"target": t["label"], "ranks": t["ranks"], "threads": t["threads"],
                     "local_batch": t["local_batch"],
                     "step_ms": s.plain_step_ms, "cpu_share": _pct(pa.cpu_share(t)),
                     "onednn_ms_per_step": s.onednn_ms,
                     "named_share": _pct(s.named_share), "verbose_overhead": _pct(s.verbose_overhead),
                     "profiler_overhead": _pct(s.profiler_overhead),
                     "peak_gflops": t["results"][0]["peak"]["gflops"],
                     "triad_gbs": t["results"][0]["stream_triad_gbs"],
                     "efficiency_ratio": e["efficiency_ratio"], "isolated_vs_logged": e["isolated_vs_logged"]})
    return rows


def _breakdown_rows(targets: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    values = [pa.onednn_breakdown(t) for t in targets]
    keys = sorted({k for v in values for k in v},
                  key=lambda k: (k == pa.OUTSIDE_ONEDNN, -max(v.get(k, 0) for v in values)))
    return [{"primitive": k, **{f"{t['label']} ms": v.get(k, 0.0) for t, v in zip(targets, values)},
             **{f"{t['label']} share": _pct(v.get(k, 0.0) / sum(v.values())) for t, v in zip(targets, values)}}
            for k in keys]


def _layer_share_rows(targets: Sequence[Mapping[str, Any]], top: int = 8) -> list[dict[str, Any]]:
    names = list(dict.fromkeys(r["layer"] for t in targets for r in pa.layers(t, top)))
    rows = [{"layer": n, **{t["label"]: _pct(pa.layer_share(t, n)) for t in targets}} for n in names]
    return sorted(rows, key=lambda r: -max(pa.layer_share(t, r["layer"]) for t in targets))


def write_profile_report(targets: Sequence[Mapping[str, Any]], out: Path, header: Mapping[str, Any]) -> list[Path]:
    """Every table and plot for the targets that ran (`status` ok); failed ones are listed with the cause."""
    ok = [t for t in targets if t.get("status") == "ok" and t.get("results")]
    failed = [t for t in targets if t not in ok]
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    md = [f"# Profile: {header['sweep']}", "", _intro(header, ok), ""]
    for t in failed:
        md.append(f"- **{t['label']} did not run:** {t.get('status')} — {t.get('reason')}")
    if not ok:
        (out / PROFILE_FILE).write_text("\n".join(md) + "\n")
        return [out / PROFILE_FILE]
    low = [f"{t['label']} ({100 * pa.summary(t).named_share:.1f}%)" for t in ok
           if pa.summary(t).named_share < NAMED_TARGET]
    if low:
        md += [f"**Below {NAMED_TARGET:.0%} of the profiled step in named ops:** {', '.join(low)}. The rest is shown "
               "as \"other (between ops)\" in the categories table: Python and framework time, and waits that no "
               "op records (a rank waiting for its peers' gradients at the end of backward).", ""]
    sections = _sections(ok)
    for title, name, rows, note in sections:
        md += [f"## {title}", "", note, "", md_table(rows),
               f"Data: [{name}.csv]({name}.csv), [{name}.json]({name}.json)", ""]
        if rows:
            paths += _write_rows(out, name, rows)
    for png, caption in pp.write_plots(ok, out):
        md += [f"![{caption}]({png.name})", ""]
        paths.append(png)
    md += _per_target(ok, out, paths)
    (out / PROFILE_FILE).write_text("\n".join(md) + "\n")
    return [out / PROFILE_FILE, *paths]


def _intro(header: Mapping[str, Any], ok: Sequence[Mapping[str, Any]]) -> str:
    return (f"Workload `{header['workload']}`, {header['steps']} profiled steps per pass after {header['warmup']} "
            f"warm-up steps, on {header['machine']}; backend {header['backend']}. Command: `{header['command']}`.\n\n"
            "Each target ran as a throughput trial runs (Ray placement group, one pinned process per rank, the "
            "same launcher), in three passes of the same steps: plain (timed, no profiling: the step time "
            "below), oneDNN verbose on, torch.profiler on. The overheads are those passes' step times against "
            "the plain one. None of these steps is a throughput figure; `orch sweep` measures throughput. "
            "Per-rank figures are rank 0's; step times are the slowest rank's.")


def _sections(ok: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, Rows, str]]:
    cats = [pa.categories(t) for t in ok]
    return [
        ("Summary", "summary", summary_rows(ok),
         "`cpu_share`: CPU time the rank process got during the plain steps ÷ (wall time × its threads), "
         "the lowest over ranks: well below 100% means other processes took the rank's cores, and the step "
         "times measure that contention rather than the layout. `named_share`: share of the profiled step inside "
         "named ops (ATen ops, autograd nodes, collectives) "
         "plus DDP's all-reduce wait, identified by its place between DDP's bucket copies; "
         "the rest is Python and framework time between ops, shown as \"other\". `efficiency_ratio`: "
         "Σ(isolated time × calls) of the replayed convolution and matmul problems ÷ the plain step time; "
         "`isolated_vs_logged`: the same sum ÷ what those primitives took inside the step."),
        ("oneDNN primitives by kind and direction (ms per step)", "onednn_breakdown", _breakdown_rows(ok),
         f"From oneDNN's verbose log of the profiled steps (rank 0). `{pa.OUTSIDE_ONEDNN}`: the rest of the "
         "verbose pass's step — work oneDNN never saw (fp32 linear layers go to BLAS, elementwise ops and losses "
         "are ATen) and Python."),
        ("How each oneDNN kind scales (ms per step, verbose pass)", "onednn_scaling",
         pa.scaling(ok, [pa.onednn_breakdown(t) for t in ok]) if len(ok) > 1 else [],
         "The primitive breakdown above, each kind against the first layout of the same variant, with the verdicts "
         "explained below."),
        ("Layers side by side (share of the profiled step, forward + backward)", "layer_shares",
         _layer_share_rows(ok),
         "The largest layers of any target, each with its share of the profiler pass's step in every target "
         "(workload regions such as `focal_loss` included)."),
        ("Operator categories side by side (ms per step, profiler self time)", "categories",
         pa.scaling(ok, cats),
         "Speed-up against the first layout of the same variant; the verdict compares it with the threads ratio "
         "(same local batch per rank): `scales with threads` ≥ 60% of the ideal gain, `does not scale` < 25%. "
         "With the same "
         "threads per rank (more ranks), a category that slows down is contending for shared resources."),
    ]


def _per_target(ok: Sequence[Mapping[str, Any]], out: Path, paths: list[Path]) -> list[str]:
    md = []
    for t in ok:
        label = t["label"]
        kernels = pa.onednn_kernels(t)
        layers = pa.layers(t)
        points = pa.roofline_points(t)
        by_kind = pa.roofline_by_kind(points)
        ops = t["results"][0]["profiler"]["ops"][:25]
        replay = t["results"][0]["replay"]
        md += [f"## {label}: {t['ranks']} rank(s) × {t['threads']} thread(s), local batch {t['local_batch']}", ""]
        if t.get("applied"):
            md += [f"Applied: `{json.dumps(t['applied'])}`", ""]
        for title, name, rows in (("oneDNN kernels", "onednn_kernels", kernels), ("Top layers", "layers", layers),
                                  ("Roofline by kind", "roofline_by_kind", by_kind),
                                  ("Roofline per problem", "roofline", points),
                                  ("Operators (top 25 by self time; all in the CSV)", "ops", ops),
                                  ("Replayed primitives", "replay", replay)):
            full = t["results"][0]["profiler"]["ops"] if name == "ops" else rows
            paths += _write_rows(out, f"{name}-{label}", full) if full else []
            shown = rows if name not in ("roofline", "replay") else rows[:15]
            md += [f"### {title}", "", md_table(shown), f"Data: [{name}-{label}.csv]({name}-{label}.csv)", ""]
        traces = ", ".join(f"[{r['profiler']['trace']}]({label}/{r['profiler']['trace']})" for r in t["results"])
        logs = ", ".join(f"[{r['onednn']['log']}]({label}/{r['onednn']['log']})" for r in t["results"])
        md += [f"Chrome traces (open in chrome://tracing or https://ui.perfetto.dev): {traces}. "
               f"oneDNN verbose logs: {logs}.", ""]
    return md
