"""The default sweep's runtime on every committed folder that ran it in full: one Markdown table.

    .venv/bin/python benchmarks/runtime_table.py                       # the table
    .venv/bin/python benchmarks/runtime_table.py --phases retinanet-zen4  # one folder's time by phase

Reads only the committed results folders (pure arithmetic on their files; nothing runs, nothing is written):

- CPU: `environment.json`'s CPU model, with the vector ISA its ISA probe found (AVX2 only, AVX-512 with bf16,
  AMX), and the cores the sweep planned on (`topology.json`);
- date, precision and torch: `environment.json` (`started_at`; `precision.chosen`, else the sweep's own
  parameter; `torch`);
- trials: first trial's start to last trial's end, from `trials.jsonl` (the probe, Ray's start-up and the report
  come on top: about half a minute); "without convergence": the GEMM peaks, the all-reduce calibration and the
  throughput cells, which run one after another, summed (what `--no-convergence` leaves);
- the estimate `orch sweep` printed before its first trial (`expected time: about …`), from the folder's
  `console.log`, or for a folder committed without one, from the commit that added it (ESTIMATES_IN_COMMITS);
  its error against the trials' span.

docs/costs.md holds the output between its `runtime-table` markers; tests/test_docs_figures.py checks that it
is this script's output, so a new folder joins by being listed in FOLDERS and the page regenerated.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Every committed folder that ran `sweeps/retinanet.yaml` in full (not adaptively), oldest first.
FOLDERS = ("example-retinanet", "retinanet-zen3", "retinanet-zen3-full", "retinanet-xeon-avx512", "retinanet-zen4",
           "retinanet-xeon-amx")

# The estimate printed before the first trial, for folders committed without their console output: quoted from
# the body of the commit that added the folder (`git show COMMIT`).
ESTIMATES_IN_COMMITS = {
    "retinanet-zen3": ("36 min 59 s", "bf63544"),
    "retinanet-zen3-full": ("30 min 31 s", "07feb31"),
}

HEADER = ("| folder | CPU (cores used) | date | precision | torch | trials, first start to last end | of which "
          "without convergence | estimate before the first trial | its error |\n"
          "|---|---|---|---|---|---:|---:|---:|---:|")


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def _seconds_of(text: str) -> float:
    """'36 min 59 s' -> 2219.0"""
    minutes = re.search(r"(\d+) min", text)
    secs = re.search(r"(\d+) s", text)
    return 60.0 * int(minutes.group(1) if minutes else 0) + int(secs.group(1) if secs else 0)


def _isa(environment: dict, topology: dict) -> str:
    cpus = environment.get("cpus") or []
    features = set((cpus[0] or {}).get("features") or []) if cpus else set()
    if not features:
        for node in topology.get("nodes") or []:
            features |= set((node.get("isa") or {}).get("features") or [])
    if "amx_bf16" in features:
        return "AVX-512, bf16, AMX"
    if "avx512_bf16" in features:
        return "AVX-512 with bf16"
    if "avx512f" in features:
        return "AVX-512"
    return "AVX2 only" if "avx2" in features else "ISA not recorded"


def _cores(topology: dict) -> int:
    return sum(len(socket) for node in topology["nodes"] for socket in node["sockets"])


def _precision(environment: dict, folder: Path) -> str:
    chosen = (environment.get("precision") or {}).get("chosen")
    if chosen:
        return str(chosen)
    spec = json.loads((folder / "spec.json").read_text())
    spec = spec.get("spec", spec)
    return str(((spec.get("workload") or {}).get("params") or {}).get("precision", "?"))


def _estimate(name: str, folder: Path) -> tuple[str | None, str]:
    log = folder / "console.log"
    if log.is_file():
        match = re.search(r"expected time: about\s+(\d+ min \d+ s|\d+ s)", " ".join(log.read_text().split()))
        if match:
            return match.group(1), "console.log"
    if name in ESTIMATES_IN_COMMITS:
        text, commit = ESTIMATES_IN_COMMITS[name]
        return text, f"commit {commit}"
    return None, "not recorded"


def wall_times(name: str) -> tuple[float, float]:
    """(first trial's start to last trial's end, the timing trials' summed wall time) of one folder, in seconds."""
    spans, timing_s = [], 0.0
    for line in (REPO / "results" / name / "trials.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("status") != "ok" or not record.get("started_at"):
            continue
        start = _stamp(record["started_at"])
        spans.append((start, start + record["wall_s"]))
        if record["kind"] != "convergence":
            timing_s += record["wall_s"]
    return max(end for _, end in spans) - min(start for start, _ in spans), timing_s


def row(name: str) -> str:
    folder = REPO / "results" / name
    environment = json.loads((folder / "environment.json").read_text())
    topology = json.loads((folder / "topology.json").read_text())
    trials_s, timing_s = wall_times(name)
    estimate, source = _estimate(name, folder)
    if estimate is None:
        said, error = "not recorded", "–"
    else:
        said = f"{estimate} ({source})"
        error = f"{(_seconds_of(estimate) - trials_s) / trials_s:+.1%}".replace("-", "−")
    model = re.sub(r"\((R|TM)\)| Processor| CPU", "", str(environment.get("cpu_model", "?")))
    cpu = f"{model}, {_isa(environment, topology)} ({_cores(topology)})"
    date = environment.get("started_at", "?")[:10]
    torch = environment.get("torch", "?")
    return (f"| `{name}` | {cpu} | {date} | {_precision(environment, folder)} | {torch} | {_duration(trials_s)} | "
            f"{_duration(timing_s)} | {said} | {error} |")


def phases(name: str) -> str:
    """One folder's trials by phase: how many, their summed wall time and the span from the phase's first start
    to its last end (convergence runs by global batch: they pack side by side, so the span is less than the sum)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for line in (REPO / "results" / name / "trials.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("status") != "ok" or not record.get("started_at"):
            continue
        phase = record["kind"] if record["kind"] != "convergence" else f"convergence, global batch " \
            f"{record['global_batch']}"
        start = _stamp(record["started_at"])
        spans.setdefault(phase, []).append((start, start + record["wall_s"]))
    lines = ["| phase | trials | summed wall | first start to last end |", "|---|---:|---:|---:|"]
    for phase, runs in spans.items():
        span = max(end for _, end in runs) - min(start for start, _ in runs)
        total = sum(end - start for start, end in runs)
        lines.append(f"| {phase} | {len(runs)} | {_duration(total)} | {_duration(span)} |")
    return "\n".join(lines)


def runtime_table() -> str:
    return "\n".join([HEADER, *(row(name) for name in FOLDERS)])


def main(argv: list[str]) -> int:
    if argv[:1] == ["--phases"] and len(argv) == 2:
        print(phases(argv[1]))
    elif not argv:
        print(runtime_table())
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
