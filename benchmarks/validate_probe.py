"""The probe's memory prediction against what a sweep's own throughput records measured.

For every ok throughput record of a results folder: the peak private memory its largest rank reached
(`memory.peak_private_mib`: resident less file-backed pages, orchestrator.run.procmem, the launcher's watch),
against the probe's prediction of one rank's private memory at that local batch, without its margin (the fit
and DDP's buckets, which are counted at every layout: a one-rank record has none, and is marked) and with it.
The error is (predicted without margin − measured) ÷ measured; the margin used is measured ÷ predicted without
margin − 1, so a record above the prediction with margin is an under-prediction the planner would have let
through. Each record must be within ±`--tolerance` (10%) of the prediction, whatever else ran beside it: private
memory does not move with other processes, which share only the libraries' pages. Those, the probe's figure
once per node, are compared too: the largest rank's file-backed pages (`memory.shared_mib`). Batches above the
probe's (2 and 8) are extrapolations, and the table says how far.

Older folders still read: a record of before private memory has unique memory (`memory.peak_uss_mib`), which
fell by the libraries' size whenever another torch process ran, and a probe of format 1 counts the libraries in
every rank; each is marked, and `--probe` measures a probe of the current format.

Which probe: the folder's own `probe.json` (the one the sweep planned with); `--probe-file FILE`, any other (a
cached one); or, with `--probe`, a new one of the folder's workload, parameters and precision, on this machine
(one rank, no Ray: `orchestrator.run.driver.probe`), written to `OUT/probe.json`. A sweep of a built-in workload plans
with its formula and keeps no probe: `--probe` validates the probe there. The probe and the sweep should have
run on the same machine.

    .venv/bin/python benchmarks/validate_probe.py results/my-sweep                    # the sweep's own probe
    .venv/bin/python benchmarks/validate_probe.py results/example-classifier --probe --out /tmp/validate
    .venv/bin/python benchmarks/validate_probe.py results/example-classifier --probe-file /tmp/validate/probe.json

Writes OUT/validation.md and OUT/validation.json (OUT defaults to RESULTS/probe-validation). Exit status: 0
compared (the last line says whether every record was within the tolerance), 1 no probe or no ok throughput
record to compare, 2 not a results folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core.measured import records as rec  # noqa: E402
from orchestrator.core.planning.probe import MemoryModel, ProbeResult  # noqa: E402
from orchestrator.io.probe_cache import PROBE_FILE  # noqa: E402
from orchestrator.io.store import NotAResultsFolder, Results, load_results  # noqa: E402

TOLERANCE = 0.10


@dataclass(frozen=True, slots=True)
class Row:
    layout: str
    ranks: int
    local_batch: int
    measured_mib: float            # the largest rank's peak private memory (an older record: unique)
    private: bool                  # measured as private memory (False: an older record's unique memory)
    predicted_mib: float           # the fit and DDP's buckets, no margin
    with_margin_mib: float         # what the planner used
    error: float                   # (predicted − measured) ÷ measured
    margin_used: float             # measured ÷ predicted − 1
    within: bool                   # measured ≤ with margin
    within_tolerance: bool         # |error| ≤ the tolerance
    extrapolation: float           # local batch ÷ the probe's largest batch
    shared_mib: float | None       # the largest rank's file-backed pages (libraries); None in an older record


def compare(memory: MemoryModel, records: rec.Records, tolerance: float = TOLERANCE) -> list[Row]:
    """One row per ok throughput record with a measured peak, by local batch then layout."""
    rows = []
    for record in sorted(records.ok(rec.Kind.THROUGHPUT), key=lambda r: (r.local_batch or 0, r.ranks or 0,
                                                                     r.threads_per_rank or 0)):
        peaks = [p for p in (record.memory.peak_mib if record.memory else []) if p]
        if not peaks or not record.local_batch or record.memory is None:
            continue
        measured, batch = max(peaks), record.local_batch
        predicted = memory.mib(batch) / (1 + memory.margin)
        shared = [s for s in record.memory.shared_mib or [] if s]
        error = (predicted - measured) / measured
        rows.append(Row(layout=f"{record.ranks}×{record.threads_per_rank}×{batch}", ranks=record.ranks or 0,
                        local_batch=batch, measured_mib=measured, private=record.memory.peak_private_mib is not None,
                        predicted_mib=predicted, with_margin_mib=memory.mib(batch), error=error,
                        margin_used=measured / predicted - 1, within=measured <= memory.mib(batch),
                        within_tolerance=abs(error) <= tolerance, extrapolation=batch / max(memory.batches),
                        shared_mib=max(shared) if shared else None))
    return rows


def summary(rows: list[Row], tolerance: float = TOLERANCE) -> dict[str, float | int | bool]:
    errors = [abs(r.error) for r in rows]
    return {"records": len(rows), "max_abs_error": max(errors), "mean_abs_error": sum(errors) / len(errors),
            "max_margin_used": max(r.margin_used for r in rows), "all_within": all(r.within for r in rows),
            "tolerance": tolerance, "all_within_tolerance": all(r.within_tolerance for r in rows),
            "largest_extrapolation": max(r.extrapolation for r in rows)}


def _notes(probe: ProbeResult, rows: list[Row]) -> list[str]:
    """What makes a comparison of another kind: an older probe or older records."""
    notes = []
    if probe.memory.node_library_mib is None:
        notes.append(f"The probe is of format {probe.format}: the libraries ({probe.memory.library_mib:,.0f} MiB) "
                     "are counted in every rank's figure; `--probe` measures one that keeps them apart.")
    if not all(r.private for r in rows):
        notes.append("Rows marked (unique) are older records: unique memory, lower by the libraries' size whenever "
                     "another torch process shared them.")
    return notes


def markdown(probe: ProbeResult, rows: list[Row], source: str, tolerance: float = TOLERANCE) -> str:
    s = summary(rows, tolerance)
    lines = [f"# Probe against measured peak private memory: {probe.workload}", "",
             f"Probe ({source}): {probe.memory.text()}; {probe.precision}, torch {probe.torch}, measured "
             f"{probe.measured_at} on {probe.threads} thread(s).", "",
             *(line for note in _notes(probe, rows) for line in (note, "")),
             "| layout | measured MiB | predicted MiB (no margin) | error | with margin | margin used | within | "
             "libraries MiB | batch ÷ probe's largest |", "|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        one = " (1 rank: DDP's buckets counted, none held)" if r.ranks == 1 and probe.memory.ddp_mib else ""
        what = "" if r.private else " (unique)"
        shared = f"{r.shared_mib:,.0f}" if r.shared_mib is not None else "–"
        lines.append(f"| {r.layout}{one} | {r.measured_mib:,.0f}{what} | {r.predicted_mib:,.0f} | {r.error:+.1%} | "
                     f"{r.with_margin_mib:,.0f} | {r.margin_used:+.1%} | {'yes' if r.within else '**no**'} | "
                     f"{shared} | {r.extrapolation:g}× |")
    lines += ["", f"{s['records']} record(s): mean |error| {s['mean_abs_error']:.1%}, max |error| "
                  f"{s['max_abs_error']:.1%}, largest margin used {s['max_margin_used']:+.1%} of the "
                  f"{probe.memory.margin:.0%} allowed; the probe's libraries once per node: "
                  f"{probe.memory.libraries_mib:,.0f} MiB; "
                  + ("every record within the prediction with its margin; " if s["all_within"]
                     else "**some record exceeded the prediction with its margin**; ")
                  + (f"every record within ±{tolerance:.0%} of the prediction." if s["all_within_tolerance"]
                     else f"**some record off the prediction by more than ±{tolerance:.0%}**.")]
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
    from orchestrator.run.driver.probe import ProbeSetup, run_probe

    sweep = sweep_from_frozen(results.stored_spec, results.path / "spec.json")   # its precision as it ran
    backend = results.environment.backend_chosen
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
    parser.add_argument("--tolerance", type=float, default=TOLERANCE,
                        help=f"the largest |error| a record may have (default {TOLERANCE:g}: ±{TOLERANCE:.0%})")
    args = parser.parse_args(argv)
    try:
        results = load_results(args.results)
    except NotAResultsFolder as err:
        print(f"validate_probe: {err}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else results.path / "probe-validation"
    out.mkdir(parents=True, exist_ok=True)
    probe, source = _probe(results, args, out)
    rows = compare(probe.memory, results.records, args.tolerance) if probe is not None else []
    if probe is None or not rows:
        print(f"validate_probe: {source if probe is None else 'no ok throughput record with a measured peak'}",
              file=sys.stderr)
        return 1
    text = markdown(probe, rows, source, args.tolerance)
    (out / "validation.md").write_text(text)
    (out / "validation.json").write_text(json.dumps({"probe": probe.to_json(), "source": source,
                                                     "rows": [asdict(r) for r in rows],
                                                     "summary": summary(rows, args.tolerance)},
                                                    indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
