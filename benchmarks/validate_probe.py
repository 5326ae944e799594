"""The probe's memory prediction against what a sweep's own throughput records measured (issue 30, item 3).

For every ok throughput record of a results folder: the peak unique memory its largest rank reached
(`memory.peak_uss_mib`, the launcher's watch), against the probe's prediction at that local batch, without its
margin (the fit and DDP's buckets, which are counted at every layout: a one-rank record has none, and is marked)
and with it. The error is (predicted without margin − measured) ÷ measured; the margin used is measured ÷
predicted without margin − 1, so a record above the prediction with margin is an under-prediction the planner
would have let through. Batches above the probe's (2 and 8) are extrapolations, and the table says how far.

The probe's figure is a rank alone on its node's: the libraries it loads (torch's, a few hundred MiB) count as
its own. Ranks that share a node share those pages, so their USS is lower by about that much: the column
"sharing" is the prediction less the libraries for records of two ranks or more, the error it would have.

Which probe: the folder's own `probe.json` (the one the sweep planned with); `--probe-file FILE`, any other (a
cached one); or, with `--probe`, a new one of the folder's workload, parameters and precision, on this machine
(one rank, no Ray: `orchestrator.run.probe`), written to `OUT/probe.json`. A sweep of a built-in workload plans
with its formula and keeps no probe: `--probe` validates the probe there. The probe and the sweep should have
run on the same machine.

    .venv/bin/python benchmarks/validate_probe.py results/my-sweep                    # the sweep's own probe
    .venv/bin/python benchmarks/validate_probe.py results/example-classifier --probe --out /tmp/validate
    .venv/bin/python benchmarks/validate_probe.py results/example-classifier --probe-file /tmp/validate/probe.json

Writes OUT/validation.md and OUT/validation.json (OUT defaults to RESULTS/probe-validation). Exit status: 0
compared, 1 no probe or no ok throughput record to compare, 2 not a results folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core import records as rec  # noqa: E402
from orchestrator.core.probe import MemoryModel, ProbeResult  # noqa: E402
from orchestrator.io.probe_cache import PROBE_FILE  # noqa: E402
from orchestrator.io.store import NotAResultsFolder, Results, load_results  # noqa: E402


@dataclass(frozen=True, slots=True)
class Row:
    layout: str
    ranks: int
    local_batch: int
    measured_mib: float            # the largest rank's peak USS
    predicted_mib: float           # the fit and DDP's buckets, no margin
    with_margin_mib: float         # what the planner used
    sharing_mib: float             # predicted, less the libraries the ranks of a node share (2 ranks or more)
    error: float                   # (predicted − measured) ÷ measured
    error_sharing: float           # (sharing − measured) ÷ measured
    margin_used: float             # measured ÷ predicted − 1
    within: bool                   # measured ≤ with margin
    extrapolation: float           # local batch ÷ the probe's largest batch


def compare(memory: MemoryModel, records: rec.Records) -> list[Row]:
    """One row per ok throughput record with a measured peak, by local batch then layout."""
    rows = []
    for record in sorted(records.ok(rec.THROUGHPUT), key=lambda r: (r.local_batch or 0, r.ranks or 0,
                                                                     r.threads_per_rank or 0)):
        peaks = [p for p in (record.memory.peak_uss_mib if record.memory else None) or [] if p]
        if not peaks or not record.local_batch:
            continue
        measured, batch = max(peaks), record.local_batch
        predicted = memory.mib(batch) / (1 + memory.margin)
        sharing = predicted - memory.library_mib if (record.ranks or 0) > 1 else predicted
        rows.append(Row(layout=f"{record.ranks}×{record.threads_per_rank}×{batch}", ranks=record.ranks or 0,
                        local_batch=batch, measured_mib=measured, predicted_mib=predicted,
                        with_margin_mib=memory.mib(batch), sharing_mib=sharing,
                        error=(predicted - measured) / measured, error_sharing=(sharing - measured) / measured,
                        margin_used=measured / predicted - 1, within=measured <= memory.mib(batch),
                        extrapolation=batch / max(memory.batches)))
    return rows


def summary(rows: list[Row]) -> dict[str, float | int | bool]:
    errors = [abs(r.error) for r in rows]
    sharing = [abs(r.error_sharing) for r in rows]
    return {"records": len(rows), "max_abs_error": max(errors), "mean_abs_error": sum(errors) / len(errors),
            "max_abs_error_sharing": max(sharing), "mean_abs_error_sharing": sum(sharing) / len(sharing),
            "max_margin_used": max(r.margin_used for r in rows), "all_within": all(r.within for r in rows),
            "largest_extrapolation": max(r.extrapolation for r in rows)}


def markdown(probe: ProbeResult, rows: list[Row], source: str) -> str:
    s = summary(rows)
    lines = [f"# Probe against measured peak USS: {probe.workload}", "",
             f"Probe ({source}): {probe.memory.text()}; {probe.precision}, torch {probe.torch}, measured "
             f"{probe.measured_at} on {probe.threads} thread(s).", "",
             "| layout | measured MiB | predicted MiB (no margin) | error | with margin | margin used | within | "
             "sharing MiB | its error | batch ÷ probe's largest |", "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        one = " (1 rank: DDP's buckets counted, none held)" if r.ranks == 1 and probe.memory.ddp_mib else ""
        lines.append(f"| {r.layout}{one} | {r.measured_mib:,.0f} | {r.predicted_mib:,.0f} | {r.error:+.1%} | "
                     f"{r.with_margin_mib:,.0f} | {r.margin_used:+.1%} | {'yes' if r.within else '**no**'} | "
                     f"{r.sharing_mib:,.0f} | {r.error_sharing:+.1%} | {r.extrapolation:g}× |")
    lines += ["", f"{s['records']} record(s): mean |error| {s['mean_abs_error']:.1%}, max |error| "
                  f"{s['max_abs_error']:.1%}, largest margin used {s['max_margin_used']:+.1%} of the "
                  f"{probe.memory.margin:.0%} allowed; sharing the libraries: mean |error| "
                  f"{s['mean_abs_error_sharing']:.1%}, max {s['max_abs_error_sharing']:.1%}; "
                  + ("every record within the prediction with its margin." if s["all_within"]
                     else "**some record exceeded the prediction with its margin**.")]
    return "\n".join(lines) + "\n"


def _probe(results: Results, args: argparse.Namespace, out: Path) -> tuple[ProbeResult | None, str]:
    kept = results.path / PROBE_FILE
    if args.probe_file:
        return ProbeResult.from_json(json.loads(Path(args.probe_file).read_text())), f"from {args.probe_file}"
    if not args.probe:
        if not kept.is_file():
            return None, f"{kept} does not exist: the sweep planned without a probe; give --probe to run one"
        return ProbeResult.from_json(json.loads(kept.read_text())), f"the sweep's own, {kept}"
    from orchestrator.io.detect import detect_local
    from orchestrator.io.sweepfile import sweep_from_frozen
    from orchestrator.run.probe import ProbeSetup, run_probe

    sweep = sweep_from_frozen(results.sweep_spec, results.path / "spec.json")   # its precision as it ran
    backend = (results.environment.get("backend") or {}).get("chosen", "gloo")
    result = run_probe(sweep, backend, ProbeSetup.here(detect_local(), sweep.spec.constraints))
    (out / PROBE_FILE).write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return result, f"measured now on this machine, {out / PROBE_FILE}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a sweep's results folder")
    parser.add_argument("--probe", action="store_true", help="probe the folder's workload now, on this machine")
    parser.add_argument("--probe-file", metavar="FILE", help="a probe result to compare instead (a cached one, "
                                                             "an earlier OUT/probe.json)")
    parser.add_argument("--out", help="where to write validation.md and .json (default RESULTS/probe-validation)")
    args = parser.parse_args(argv)
    try:
        results = load_results(args.results)
    except NotAResultsFolder as err:
        print(f"validate_probe: {err}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else results.path / "probe-validation"
    out.mkdir(parents=True, exist_ok=True)
    probe, source = _probe(results, args, out)
    rows = compare(probe.memory, results.records) if probe is not None else []
    if probe is None or not rows:
        print(f"validate_probe: {source if probe is None else 'no ok throughput record with a measured peak'}",
              file=sys.stderr)
        return 1
    text = markdown(probe, rows, source)
    (out / "validation.md").write_text(text)
    (out / "validation.json").write_text(json.dumps({"probe": probe.to_json(), "source": source,
                                                     "rows": [asdict(r) for r in rows], "summary": summary(rows)},
                                                    indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
