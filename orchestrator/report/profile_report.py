"""Write `orch profile`'s output: profile.md, a CSV and a JSON per table, and the PNGs.

    targets = [ProfiledTarget.from_json(json.loads(p.read_text())) for p in sorted(out.glob("*/profile-result.json"))]
    write_profile_report(targets, out, header)

The analysis's rows are typed (core/profile/analysis); the tables written here are the dicts of their fields,
so profile.md, the CSVs and the JSONs keep their columns.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestrator.core.json.values import JsonDict, JsonMapping, JsonReadable
from orchestrator.core.profile import analysis as pa
from orchestrator.core.profile import checks as pc
from orchestrator.core.profile.result import ProfiledTarget, RankProfile, ReplayRow, as_target
from orchestrator.core.profile.row import Row
from orchestrator.io.files import write_atomic
from orchestrator.report import profile_plots as pp

PROFILE_FILE = "profile.md"
NAMED_TARGET = 0.9     # the share of a plain step that should sit inside named ops (recorded, not inferred)
WITHHELD = "withheld (disturbed)"
Rows = Sequence[Mapping[str, JsonReadable]]
Targets = Sequence[ProfiledTarget | JsonMapping]   # typed, or as read from profile-result.json


def plain_rows(rows: Sequence[Row]) -> list[JsonDict]:
    """Typed rows as the table dicts the Markdown, CSV and JSON writers take."""
    return [r.to_json() for r in rows]


def _cell(value: object) -> str:
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
    write_atomic(json_path, json.dumps(list(rows), indent=1) + "\n", durable=False)
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


def summary_rows(targets: Targets, disturbed: frozenset[str] = frozenset()) -> list[JsonDict]:
    rows: list[JsonDict] = []
    for t in map(as_target, targets):
        s = pa.summary(t)
        e = pa.efficiency(t)
        bad = t.label in disturbed
        peak = t.results[0].peak
        rows.append({"target": t.label, "ranks": t.ranks, "threads": t.threads,
                     "local_batch": t.local_batch, "passes": t.runs,
                     "checks": "disturbed" if bad else "passed",
                     "step_ms": s.plain_step_ms, "cpu_share": _pct(pa.cpu_share(t)),
                     "onednn_ms_per_step": s.onednn_ms,
                     "named_of_profiled": _pct(s.named_share), "named_of_plain": _pct(s.named_of_plain),
                     f"named ≥ {NAMED_TARGET:.0%}": WITHHELD if bad else "yes" if s.named_of_plain >= NAMED_TARGET
                     else "no",
                     "verbose_overhead": _overhead(s.verbose_overhead, t),
                     "profiler_overhead": _overhead(s.profiler_overhead, t),
                     "peak_gflops": peak.gflops if peak else None,
                     "triad_gbs": t.results[0].stream_triad_gbs,
                     "roofs_gbs": _level_roofs(t.results[0]),
                     "efficiency_ratio": WITHHELD if bad and e.efficiency_ratio is not None
                     else above_one(e.efficiency_ratio),
                     "replayed_share_of_step": e.replayed_share_of_step})
    return rows


def _level_roofs(rank: RankProfile) -> str:
    """'L2 221 · L3 150 · DRAM 38.1' (GB/s), rank 0's bandwidth roof per level; '–' where none was measured."""
    measured = [f"{r.level} {_cell(r.gbs)}" for r in rank.level_roofs or () if r.gbs]
    return " · ".join(measured) or "–"


def above_one(value: float | None, beyond: bool | None = None) -> float | str | None:
    """A ratio whose roof is 1 (an efficiency, a fraction of the attainable), flagged in words where it is
    above 1: within the noise the checks allow (`beyond` None: more than NOISE_FLOOR above 1), a figure that
    says nothing; beyond it, a disturbed measurement the checks name. At most 1: the number itself.

    >>> above_one(0.93), above_one(1.04), above_one(1.3, beyond=True)
    (0.93, '1.04 (above 1 within the noise: not a finding)', '1.30 (above 1: a disturbed measurement, see Checks)')
    """
    if value is None or value <= 1:
        return value
    beyond = value > 1 + pc.NOISE_FLOOR if beyond is None else beyond
    why = "a disturbed measurement, see Checks" if beyond else "within the noise: not a finding"
    return f"{_cell(value)} (above 1{': ' if beyond else ' '}{why})"


def _efficiency_cell(row: pa.ReplayComparison) -> float | str | None:
    """A replayed primitive's efficiency; above 1 flagged, unless the replay ran another kernel (then the two
    times are of different work: the mismatch list says so)."""
    if row.same_implementation is False:
        return row.efficiency
    return above_one(row.efficiency, beyond=row.efficiency is not None and row.efficiency > 1 + pc.NOISE_FLOOR)


def _overhead(value: float, target: ProfiledTarget) -> str:
    """An overhead as a percentage; a negative one, which passed the checks only because it lies within the
    plain steps' noise, says so: profiling cannot speed a step up, so the figure is noise, not a finding."""
    if value >= 0:
        return _pct(value)
    return f"{_pct(value)} ≈ 0 (within the steps' ±{pc.step_noise(target):.0%} noise)"


def attribution_rows(targets: Targets) -> list[JsonDict]:
    """Every rank of every target: what the profiler recorded, against the plain and the profiled step;
    the inferred all-reduce wait in its own column, never in the named share."""
    return [{"target": t.label, "rank": a.rank, "plain_step_ms": a.plain_step_ms,
             "profiled_step_ms": a.profiled_step_ms, "profiler_overhead": _overhead(a.profiler_overhead, t),
             "profiler_overhead_ms": a.profiler_overhead_ms,
             "named_ms": a.named_ms, "named_of_plain": _pct(a.named_of_plain),
             "named_of_profiled": _pct(a.named_of_profiled), "recorded_allreduce_ms": a.recorded_allreduce_ms,
             "allreduce_wait_ms (inferred)": a.inferred_wait_ms, "other_ms": a.other_ms}
            for t in map(as_target, targets) for a in pa.attribution(t)]


def checks_section(ok: Sequence[ProfiledTarget], findings: Sequence[pc.Finding]) -> list[str]:
    """The top of profile.md: which targets are disturbed and why, or that every check passed."""
    runs = ", ".join(f"{t.label} {t.runs}" for t in ok)
    head = (f"Checks: nothing above its roof (the compute roof, and the bandwidth roof of the memory level its "
            "working set fits in: the `above_roof` column of every roofline table), no efficiency above 1, the "
            "replay on the rank's threads and CPUs, "
            f"no negative overhead, every rank ≥ "
            f"{pc.MIN_CPU_SHARE:.0%} of its CPUs in every pass, the same work measured twice within its noise "
            f"(≥ {pc.NOISE_FLOOR:.0%}). Runs per target (a disturbed target is run again): {runs}.")
    if not findings:
        return ["## Checks", "", head + " **All passed.**", ""]
    bad = sorted(pc.disturbed(findings))
    md = ["## Checks: disturbed", "", head, "",
          f"**Disturbed: {', '.join(bad)}.** Their figures are shown as measured, but every verdict that rests on "
          "them is withheld: scaling verdicts, the named-share check, the efficiency ratio, the fraction of the "
          "roof reached and the lost-time ranking. Why:", ""]
    md += [f"- {f.target}: **{f.check}** — {f.detail}" for f in findings]
    return md + [""]


def _breakdown_rows(targets: Sequence[ProfiledTarget]) -> list[dict[str, float | str]]:
    values = [pa.onednn_breakdown(t) for t in targets]
    keys = sorted({k for v in values for k in v},
                  key=lambda k: (k == pa.OUTSIDE_ONEDNN, -max(v.get(k, 0) for v in values)))
    return [{"primitive": k, **{f"{t.label} ms": v.get(k, 0.0) for t, v in zip(targets, values)},
             **{f"{t.label} share": _pct(v.get(k, 0.0) / sum(v.values())) for t, v in zip(targets, values)}}
            for k in keys]


def _layer_share_rows(targets: Sequence[ProfiledTarget], top: int = 8) -> list[dict[str, str]]:
    names = list(dict.fromkeys(r.layer for t in targets for r in pa.layers(t, top)))
    rows = [{"layer": n, **{t.label: _pct(pa.layer_share(t, n)) for t in targets}} for n in names]
    return sorted(rows, key=lambda r: -max(pa.layer_share(t, r["layer"]) for t in targets))


def write_profile_report(targets: Targets, out: Path, header: Mapping[str, object]) -> list[Path]:
    """Every table and plot for the targets that ran (`status` ok); failed ones are listed with the cause."""
    typed = [as_target(t) for t in targets]
    ok = [t for t in typed if t.status == "ok" and t.results]
    failed = [t for t in typed if not (t.status == "ok" and t.results)]
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    md = [f"# Profile: {header['sweep']}", ""]
    for t in failed:
        md.append(f"- **{t.label} did not run:** {t.status} — {t.reason}")
    if not ok:
        write_atomic(out / PROFILE_FILE, "\n".join([*md, _intro(header, ok)]) + "\n", durable=False)
        return [out / PROFILE_FILE]
    findings = [f for t in ok for f in pc.check_target(t)] + pc.check_across(ok)
    disturbed = pc.disturbed(findings)
    md += checks_section(ok, findings) + [_intro(header, ok), ""]
    low = [f"{t.label} ({100 * pa.summary(t).named_of_plain:.1f}%)" for t in ok
           if t.label not in disturbed and pa.summary(t).named_of_plain < NAMED_TARGET]
    if low:
        md += [f"**Below {NAMED_TARGET:.0%} of the plain step in named ops (lowest rank):** {', '.join(low)}. The "
               "rest is shown as \"other (between ops)\" in the categories table: Python and framework time, and "
               "waits that no op records (a rank waiting for its peers' gradients, inferred apart).", ""]
    sections = _sections(ok, disturbed)
    for title, name, rows, note in sections:
        md += [f"## {title}", "", note, "", md_table(rows),
               f"Data: [{name}.csv]({name}.csv), [{name}.json]({name}.json)", ""]
        if rows:
            paths += _write_rows(out, name, rows)
    for png, caption in pp.write_plots(ok, out):
        md += [f"![{caption}]({png.name})", ""]
        paths.append(png)
    md += _per_target(ok, out, paths, disturbed)
    write_atomic(out / PROFILE_FILE, "\n".join(md) + "\n", durable=False)
    return [out / PROFILE_FILE, *paths]


def _intro(header: Mapping[str, object], ok: Sequence[ProfiledTarget]) -> str:
    return (f"Workload `{header['workload']}`, {header['steps']} profiled steps per pass after {header['warmup']} "
            f"warm-up steps, on {header['machine']}; backend {header['backend']}. Command: `{header['command']}`.\n\n"
            "Each target ran as a throughput trial runs (Ray placement group, one pinned process per rank, the "
            "same launcher), in passes of the same steps: plain (timed, no profiling: the step time below), "
            "oneDNN verbose on, torch.profiler on, then plain again (the plain figures are both plain passes' "
            "steps, so a drift over the run cannot make a later pass look faster). The overheads are those "
            "passes' step times against the plain one. None of these steps is a throughput figure; `orch sweep` "
            "measures throughput. Per-rank figures are rank 0's; step times are the slowest rank's.")


def _sections(ok: Sequence[ProfiledTarget], disturbed: frozenset[str]) -> list[tuple[str, str, Rows, str]]:
    cats = [pa.categories(t) for t in ok]
    return [
        ("Summary", "summary", summary_rows(ok, disturbed),
         "`passes`: runs it took (a run whose checks fail is repeated). `cpu_share`: CPU time the rank process got "
         "during the plain steps ÷ (wall time × its threads), the lowest over ranks: well below 100% means other "
         "processes took the rank's cores, and the step times measure that contention rather than the layout. "
         "`named_of_profiled`: time inside ops the profiler recorded (ATen ops, autograd nodes, collectives; "
         "nothing inferred, no record_function range's own Python) ÷ the profiled step, the lowest over ranks. "
         "`named_of_plain`: the share of the plain step in named ops, at least: (named time − the profiler's "
         "overhead) ÷ the plain step, the lowest over ranks. The named time is measured in the profiled pass, "
         "which the profiler slows, largely inside ops (an op's range holds the recording of the ops nested in "
         "it); profiling makes nothing faster, so this bound holds whatever the overhead was spent on, and it "
         "cannot exceed 100%. The ≥ 90% check reads it. `efficiency_ratio`: "
         "Σ(fastest isolated call × calls) of the replayed convolution, matmul and reorder problems ÷ Σ(fastest "
         "call oneDNN logged for each in the model × calls) (both oneDNN's own timing, no framework time; fastest "
         "against fastest because another process's time slice only ever adds to a call); "
         "`replayed_share_of_step`: those primitives' in-model time ÷ the plain step. `peak_gflops`: the "
         "compute roof, the fastest call of any of several GEMMs and convolutions on the rank's cores; "
         "`triad_gbs`: DRAM's bandwidth; `roofs_gbs`: the bandwidth roof of each cache level and DRAM (a STREAM "
         "triad in a working set sized to the level from the CPU's cache sizes in sysfs, on the same cores)."),
        ("Attribution per rank (ms per step)", "attribution", attribution_rows(ok),
         "Every rank. `recorded_allreduce_ms`: communication ops the profiler recorded (self time), part of "
         "`named_ms`. `allreduce_wait_ms (inferred)`: DDP's wait for gradients, placed by where a gap sits "
         "between its bucket copies; no profiler range marks it, so it is never counted as named. "
         "`profiler_overhead`: the rank's profiled step ÷ its plain step − 1 (`profiler_overhead_ms`: the "
         "difference, 0 where the profiled step came out shorter). `named_of_plain`: (named_ms − "
         "profiler_overhead_ms) ÷ plain_step_ms, the share of the plain step in named ops, at least."),
        ("oneDNN primitives by kind and direction (ms per step)", "onednn_breakdown", _breakdown_rows(ok),
         f"From oneDNN's verbose log of the profiled steps (rank 0). `{pa.OUTSIDE_ONEDNN}`: the rest of the "
         "verbose pass's step — work oneDNN never saw (fp32 linear layers go to BLAS, elementwise ops and losses "
         "are ATen) and Python."),
        ("How each oneDNN kind scales (ms per step, verbose pass)", "onednn_scaling",
         pa.scaling(ok, [pa.onednn_breakdown(t) for t in ok], disturbed) if len(ok) > 1 else [],
         "The primitive breakdown above, each kind against the first layout of the same variant, with the verdicts "
         "explained below."),
        ("Layers side by side (share of the profiled step, forward + backward)", "layer_shares",
         _layer_share_rows(ok),
         "The largest layers of any target, each with its share of the profiler pass's step in every target "
         "(workload regions such as `focal_loss` included)."),
        ("Operator categories side by side (ms per step, profiler self time)", "categories",
         pa.scaling(ok, cats, disturbed),
         "Speed-up against the first layout of the same variant; the verdict compares it with the threads ratio "
         "(same local batch per rank): `scales with threads` ≥ 60% of the ideal gain, `does not scale` < 25%. "
         "With the same "
         "threads per rank (more ranks), a category that slows down is contending for shared resources."),
    ]


def _withhold(rows: list[JsonDict], bad: bool, column: str = "fraction_of_attainable") -> list[JsonDict]:
    """A disturbed target's rows keep their measurements; the verdict column says it is withheld."""
    return [{**r, column: WITHHELD} for r in rows] if bad else rows


def _per_target(ok: Sequence[ProfiledTarget], out: Path, paths: list[Path], disturbed: frozenset[str]) -> list[str]:
    md = []
    for t in ok:
        label, bad = t.label, t.label in disturbed
        typed_points = pa.roofline_points(t)
        points = [{**p.to_json(), "fraction_of_attainable": above_one(p.fraction_of_attainable, p.above_roof)}
                  for p in typed_points]
        replayed = pa.replay_rows(t)
        lost = [] if bad else [{"kind": r.kind, "direction": r.direction, "problem": r.problem, "layout": r.layout,
                                "efficiency": _efficiency_cell(r), "in_model_ms_per_step": r.in_model_ms_per_step,
                                "lost_ms_per_step": r.lost_ms_per_step} for r in replayed]
        all_ops = [o.to_json() for o in t.results[0].profiler.ops]
        md += [f"## {label}: {t.ranks} rank(s) × {t.threads} thread(s), local batch {t.local_batch}", ""]
        if bad:
            md += [f"**Disturbed** (see Checks at the top): figures as measured, verdicts {WITHHELD}.", ""]
        if t.applied:
            md += [f"Applied: `{json.dumps(t.applied)}`", ""]
        tables = (("oneDNN kernels", "onednn_kernels", plain_rows(pa.onednn_kernels(t))),
                  ("Top layers", "layers", plain_rows(pa.layers(t))),
                  ("Roofline by kind (per step)", "roofline_by_kind",
                   _withhold([{**k.to_json(), "fraction_of_attainable": above_one(k.fraction_of_attainable)}
                              for k in pa.roofline_by_kind(typed_points)], bad)),
                  ("Roofline per problem", "roofline", _withhold(points, bad)),
                  ("Operators (top 25 by self time; all in the CSV)", "ops", all_ops[:25]),
                  ("Lost time: (1 − efficiency) × in-model time, largest first", "lost_time", lost),
                  ("Replayed primitives: in the model and alone, and the kernel each ran", "replay",
                   [{**r.to_json(), "efficiency": _efficiency_cell(r)} for r in replayed]))
        for title, name, rows in tables:
            full = all_ops if name == "ops" else rows
            paths += _write_rows(out, f"{name}-{label}", full) if full else []
            shown = rows if name not in ("roofline", "replay", "lost_time") else rows[:15]
            if name == "lost_time" and bad:
                md += [f"### {title}", "", f"_{WITHHELD}: the ranking rests on in-model and isolated times that "
                                            "failed a check._", ""]
                continue
            md += [f"### {title}", "", md_table(shown), f"Data: [{name}-{label}.csv]({name}-{label}.csv)", ""]
        md += _mismatches(replayed, t.results[0].replay)
        traces = ", ".join(f"[{r.profiler.trace}]({label}/{r.profiler.trace})" for r in t.results)
        logs = ", ".join(f"[{r.onednn.log}]({label}/{r.onednn.log})" for r in t.results)
        md += [f"Chrome traces (open in chrome://tracing or https://ui.perfetto.dev): {traces}. "
               f"oneDNN verbose logs: {logs}.", ""]
    return md


def _mismatches(replayed: Sequence[pa.ReplayComparison], raw: Sequence[ReplayRow]) -> list[str]:
    """Replays that ran another kernel than the model, and replays that could not be matched or run."""
    md = []
    wrong = [r for r in replayed if r.same_implementation is False]
    if wrong:
        md += [f"**{len(wrong)} replay(s) ran another kernel than the model** (their isolated time measures that "
               "kernel): " + "; ".join(f"{r.kind} {r.direction} {r.problem}: model `{r.implementation}`, "
                                       f"replay `{r.replay_implementation}`" for r in wrong[:5]), ""]
    if any(r.implementation is None and r.isolated_ms is not None for r in raw):
        md += ["Replays recorded before the replay captured oneDNN's log carry no kernel name and time the whole "
               "torch call (dispatch, allocation, weight reorder included).", ""]
    skipped = sum(1 for r in raw if r.isolated_ms is None)
    if skipped:
        md += [f"{skipped} problem(s) not replayed (see the `note` column of the replay JSON).", ""]
    return md
