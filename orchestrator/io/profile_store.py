"""A profile folder (`orch profile --out DIR`, default RESULTS/<sweep>/profile), beside io.store's results folder:

    profile-header.json         what profile.md says of the run (sweep, workload, steps, machine, backend, the
                                command that reproduces it) and the targets' labels, kept for --report-only
    <label>/profile-result.json a target's result (core.profile.result.ProfiledTarget), one folder per target
    <label>/...                 its ranks' oneDNN logs and torch.profiler tables, the report's tables and plots

Everything read from it is input: a label names a folder, so it is checked as a name, never a path (a header that
says `../../x` would read and write outside the folder).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

from orchestrator.core.json.values import JsonDict
from orchestrator.core.planning.names import name_problem
from orchestrator.core.profile import onednn_verbose as ov
from orchestrator.core.profile.result import ProfiledTarget
from orchestrator.errors import InputError
from orchestrator.io.files import UnreadableFile, read_json_input, write_atomic

RESULT_FILE = "profile-result.json"
HEADER_FILE = "profile-header.json"   # what profile.md says about the run, kept for --report-only
HEADER_KEYS = ("sweep", "workload", "steps", "warmup", "machine", "backend", "command")   # what profile.md reads


def write_header(out: Path, header: Mapping[str, object], labels: list[str]) -> None:
    """profile-header.json: what profile.md says of the run, and the targets' labels (their folders)."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / HEADER_FILE, json.dumps({**header, "targets": labels}, indent=1) + "\n")


def has_header(out: Path) -> bool:
    return (out / HEADER_FILE).is_file()


def read_saved(out: Path) -> tuple[JsonDict, list[ProfiledTarget]]:
    """The header and the targets' results an earlier `orch profile` saved in `out`; InputError when they cannot
    be used. Each target's label names its folder, so a label read back is checked as a name, never a path
    (a header that says `../../x` would read and write outside `out`)."""
    where = f"{out} holds no complete `orch profile` output to report from"
    try:
        header = read_json_input(out / HEADER_FILE)
    except UnreadableFile as exc:
        raise InputError(f"{where} ({out / HEADER_FILE}: {exc})") from None
    labels = header.get("targets") if isinstance(header, dict) else None
    if not isinstance(header, dict) or not isinstance(labels, list) or not labels:
        raise InputError(f"{where} ({out / HEADER_FILE}: no list of targets)")
    problem = next((p for label in labels if (p := name_problem(label, f"{HEADER_FILE} target")) is not None), None)
    if problem is not None:
        raise InputError(f"{where} ({problem})")
    names = [label for label in labels if isinstance(label, str)]   # every label: name_problem refuses the rest
    missing = [key for key in HEADER_KEYS if key not in header]
    if missing:
        raise InputError(f"{where} ({out / HEADER_FILE}: no {', '.join(missing)})")
    try:
        results = [load_result(out / label / RESULT_FILE) for label in names]
    except (ValueError, TypeError, KeyError) as exc:   # UnreadableFile, or not the shape orch writes
        raise InputError(f"{where} ({exc})") from None
    for label, result in zip(names, results):   # a result's own label and variant name files too (layers-<label>)
        file = out / label / RESULT_FILE
        named = [p for p in (name_problem(result.label, f"{file}: label"),
                             name_problem(result.variant, f"{file}: variant") if result.variant else None)
                 if p is not None]
        if result.label != label:
            named.append(f"{file}: label {str(result.label)[:40]!r} is not its folder's, {label!r}")
        if named:
            raise InputError(f"{where} ({named[0]})")
    return header, results


def save_result(result: ProfiledTarget, out_dir: Path) -> None:
    (out_dir / result.label / RESULT_FILE).write_text(json.dumps(result.to_json(), indent=1))


def load_result(path: Path) -> ProfiledTarget:
    """A saved profile-result.json, typed (written back, it gives the same bytes). A file that cannot be read
    as JSON is io.files.UnreadableFile (a ValueError) naming it."""
    try:
        data = read_json_input(path)
    except UnreadableFile as err:
        raise UnreadableFile(f"{path}: {err}") from None
    if not isinstance(data, dict):   # what from_json says of a value that is no JSON object
        raise TypeError(f"ProfiledTarget: expected a JSON object, got {type(data).__name__}")
    return ProfiledTarget.from_json(data)


def refresh_shapes(result: ProfiledTarget, out_dir: Path) -> ProfiledTarget:
    """Results written before the per-problem table kept destination formats, kernels and each problem's
    fastest call: rebuild that table from the rank's own oneDNN log, kept beside the result, so a re-rendered
    report keys reorders by both formats, prices a cast by its destination type and compares a replay with
    the model's fastest call. Nothing else is touched."""
    import gzip

    ranks = []
    for rank in result.results:
        onednn = rank.onednn
        log = out_dir / result.label / onednn.log
        if not onednn.shapes or onednn.shapes[0].has("min_ms") or not onednn.log or not log.is_file():
            ranks.append(rank)
            continue
        text = gzip.decompress(log.read_bytes()).decode(errors="replace") if log.suffix == ".gz" else log.read_text()
        executions, _ = ov.parse_lines(text.splitlines())
        shapes = tuple(ov.by_shape(executions))
        ranks.append(dataclasses.replace(rank, onednn=dataclasses.replace(onednn, shapes=shapes)))
    return dataclasses.replace(result, results=tuple(ranks))
