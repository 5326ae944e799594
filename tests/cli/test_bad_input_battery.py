"""The bad-input battery: every command × every input it reads × every way a file can be bad, generated.

Each input starts from a valid file (its baseline case shows the command accepts it: exit 0, or for `orch sweep`
and `orch profile` it reaches Ray), then one defect is put in its place:

    missing, a directory, unreadable (a FIFO when the tests run as root, who reads any mode: without a writer
    a read would block; chmod 000 otherwise), not UTF-8, truncated, nested deeper than a parser goes, huge (a
    sparse file just over orch's limit for that kind of file), the wrong JSON/YAML type, a link to elsewhere
    (/dev/zero: a file that never ends)

and each case must exit 2 with its reason on one line, no traceback, before Ray starts, and leave the folder it
names (the results folder, the profile folder, the inputs' folder) byte for byte as it was. trials.jsonl is the
one input whose reader tolerates some defects by design (a torn last line, a line that is not a record, no file
yet: docs/reports.md): there the case must do exactly that, with a warning, and nothing else.

Driven in-process through orchestrator.cli.main(argv). The module prints its counts at the end:
"bad-input battery: N cases tried, N clean" (the valid baselines are not counted).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.cli import common, main, profile_cmd
from orchestrator.io.files import MAX_JSON_BYTES, MAX_TRIALS_BYTES, MAX_YAML_BYTES

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results" / "example-predict"
SWEEP_TEXT = (REPO / "sweeps" / "classifier.yaml").read_bytes()
TOPOLOGY_TEXT = (REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml").read_bytes()
RCP_TEXT = (RESULTS / "report" / "rcps_classifier.json").read_bytes()
HEADER_TEXT = (b'{"sweep": "classifier", "workload": "classifier", "steps": 3, "warmup": 3, "machine": "m", '
               b'"backend": "gloo", "command": "orch profile", "targets": ["1x1x8"]}\n')
FAILED_TARGET = b'{"label": "1x1x8", "ranks": 1, "threads": 1, "local_batch": 8, "status": "failed", "reason": "x"}'
AS_ROOT = os.geteuid() == 0
LIMIT = {"yaml": MAX_YAML_BYTES, "json": MAX_JSON_BYTES, "jsonl": MAX_TRIALS_BYTES}
DEFECTS = ("missing", "directory", "unreadable", "not-utf8", "truncated", "nested", "huge", "wrong-type",
           "link-elsewhere")


class RayReached(Exception):
    """Raised where Ray would start: a baseline of `orch sweep`/`orch profile` gets this far, no bad input may."""


@dataclass(frozen=True)
class Input:
    command: str
    name: str
    kind: str                                       # yaml | json | jsonl: what a defect looks like
    setup: Callable[[Path], tuple[list[str], Path, Path]]   # case folder -> (argv, the file, the folder watched)
    baseline: str = "ok"                            # ok | ray | failed (exit 1: a failed target reported)
    tolerated: tuple[str, ...] = ()                 # defects its reader tolerates by design (trials.jsonl)


def _inputs_folder(case: Path) -> Path:
    (case / "sweep.yaml").write_bytes(SWEEP_TEXT)
    (case / "topo.yaml").write_bytes(TOPOLOGY_TEXT)
    (case / "rcp.json").write_bytes(RCP_TEXT)
    return case


def _results(case: Path) -> Path:
    folder = case / "results"
    shutil.copytree(RESULTS, folder, ignore=shutil.ignore_patterns("report"))
    return folder


def _profile(case: Path) -> Path:
    out = case / "profile"
    (out / "1x1x8").mkdir(parents=True)
    (out / "profile-header.json").write_bytes(HEADER_TEXT)
    (out / "1x1x8" / "profile-result.json").write_bytes(FAILED_TARGET)
    return out


def _plan(target: str):
    def setup(case: Path):
        c = _inputs_folder(case)
        return ["plan", str(c / "sweep.yaml"), "--topology", str(c / "topo.yaml")], c / target, c
    return setup


def _sweep(target: str):
    def setup(case: Path):
        c, results = _inputs_folder(case), _results(case)
        argv = ["sweep", str(c / "sweep.yaml"), "--topology", str(c / "topo.yaml"), "--results", str(results)]
        return argv, (results / target if target.endswith("json") or target.endswith("jsonl") else c / target), results
    return setup


def _results_command(command: str, target: str, *extra: str):
    def setup(case: Path):
        c, results = _inputs_folder(case), _results(case)
        argv = [command, str(results), *[e.replace("{case}", str(c)) for e in extra]]
        return argv, (results / target if target in ("spec.json", "trials.jsonl") else c / target), results
    return setup


def _profile_sweep(case: Path):
    c = _inputs_folder(case)
    out = case / "profile"
    return ["profile", str(c / "sweep.yaml"), "--layout", "1x1x8", "--topology", str(c / "topo.yaml"), "--out",
            str(out)], c / "sweep.yaml", c


def _profile_header(case: Path):
    c, out = _inputs_folder(case), _profile(case)
    return ["profile", str(c / "sweep.yaml"), "--report-only", "--out", str(out)], out / "profile-header.json", out


def _topology(case: Path):
    c = _inputs_folder(case)
    return ["topology", "--topology", str(c / "topo.yaml")], c / "topo.yaml", c


TRIALS_TOLERATES = ("missing", "truncated", "nested", "wrong-type")   # no records yet, a torn or foreign line
INPUTS = [
    Input("plan", "sweep file", "yaml", _plan("sweep.yaml")),
    Input("plan", "topology file", "yaml", _plan("topo.yaml")),
    Input("sweep", "sweep file", "yaml", _sweep("sweep.yaml"), baseline="ray"),
    Input("sweep", "topology file", "yaml", _sweep("topo.yaml"), baseline="ray"),
    Input("sweep", "spec.json to resume", "json", _sweep("spec.json"), baseline="ray"),
    Input("sweep", "trials.jsonl to resume", "jsonl", _sweep("trials.jsonl"), baseline="ray",
          tolerated=TRIALS_TOLERATES),
    Input("report", "spec.json", "json", _results_command("report", "spec.json", "--format", "terminal")),
    Input("report", "trials.jsonl", "jsonl", _results_command("report", "trials.jsonl", "--format", "terminal"),
          tolerated=TRIALS_TOLERATES),
    Input("predict", "spec.json", "json", _results_command("predict", "spec.json")),
    Input("predict", "RCP file", "json", _results_command("predict", "rcp.json", "--rcp", "{case}/rcp.json")),
    Input("predict", "topology file", "yaml", _results_command("predict", "topo.yaml", "--topology",
                                                               "{case}/topo.yaml")),
    Input("profile", "sweep file", "yaml", _profile_sweep, baseline="ray"),
    Input("profile", "profile-header.json", "json", _profile_header, baseline="failed"),
    Input("topology", "topology file", "yaml", _topology),
]


def _nested(kind: str) -> bytes:
    depth = 100_000
    return b"a: " + b"[" * depth + b"]" * depth + b"\n" if kind == "yaml" else b"[" * depth + b"]" * depth + b"\n"


def put_defect(path: Path, defect: str, kind: str, valid: bytes) -> str:
    """Replace the valid file at `path` by `defect`; what was done, for the case's id and the report."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    if defect == "missing":
        return "no such file"
    if defect == "directory":
        path.mkdir()
        return "a folder in its place"
    if defect == "unreadable":
        if AS_ROOT:   # root reads any mode, so a mode cannot make it unreadable; a FIFO with no writer can
            os.mkfifo(path)
            return "a FIFO (tests run as root, who reads a chmod-000 file)"
        path.write_bytes(valid)
        path.chmod(0)
        return "chmod 000"
    if defect == "not-utf8":
        first, _, rest = valid.partition(b"\n")
        path.write_bytes(first + b"\n\xff\xfe\xc3(" + rest)
        return "bytes that are not UTF-8 after its first line"
    if defect == "truncated":
        path.write_bytes(valid[: len(valid) // 2])
        return "its first half"
    if defect == "nested":
        path.write_bytes(_nested(kind))
        return "100,000 levels of nesting"
    if defect == "huge":
        with open(path, "wb") as fh:
            fh.truncate(LIMIT[kind] + 1)   # sparse: costs no disk
        return f"{LIMIT[kind] + 1:,} bytes"
    if defect == "wrong-type":
        path.write_bytes(b"- 1\n- 2\n" if kind == "yaml" else b"[1, 2]\n")
        return "a list where a mapping is expected"
    if defect == "link-elsewhere":
        path.symlink_to("/dev/zero")
        return "a link to /dev/zero"
    raise ValueError(defect)


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under `folder`, by what it is: files by content (big sparse ones by size and mtime), links
    by target, FIFOs and folders by kind. Links are not followed."""
    seen: dict[str, tuple] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            info = os.lstat(path)
            rel = str(path.relative_to(folder))
            if stat.S_ISLNK(info.st_mode):
                seen[rel] = ("link", os.readlink(path))
            elif stat.S_ISFIFO(info.st_mode):
                seen[rel] = ("fifo",)
            elif stat.S_ISDIR(info.st_mode):
                seen[rel] = ("folder", stat.S_IMODE(info.st_mode))
            elif info.st_size > 16 << 20 or not os.access(path, os.R_OK):
                seen[rel] = ("file", info.st_size, info.st_mtime_ns)
            else:
                seen[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return seen


BATTERY = "bad-input battery"


@pytest.fixture(scope="module")
def tally(battery_counts):
    return battery_counts


@pytest.fixture
def no_ray(monkeypatch):
    def reached(*args, **kwargs):
        raise RayReached
    monkeypatch.setattr(common, "ray_session", reached)   # orch.sweep, under `orch sweep`, starts Ray through it
    monkeypatch.setattr(profile_cmd, "ray_session", reached)


def run(capsys, argv: list[str]) -> tuple[int | str, str, str]:
    try:
        rc: int | str = main(argv)
    except RayReached:
        rc = "ray"
    out, err = capsys.readouterr()
    return rc, out, err


def _case_id(value) -> str:
    return f"{value.command}-{value.name.split()[0]}" if isinstance(value, Input) else str(value)


@pytest.mark.parametrize("item", INPUTS, ids=_case_id)
def test_the_valid_input_is_accepted(item, tmp_path, capsys, no_ray, tally):
    """The control: the same command on the valid file, so that each defect below is what makes it exit 2."""
    argv, _path, _ = item.setup(tmp_path)
    rc, out, err = run(capsys, argv)
    expected = {"ok": 0, "ray": "ray", "failed": 1}[item.baseline]
    assert rc == expected, (argv, out[-2000:], err[-2000:])


@pytest.mark.parametrize("defect", DEFECTS)
@pytest.mark.parametrize("item", INPUTS, ids=_case_id)
def test_a_bad_input_is_exit_2_with_one_line_and_changes_nothing(item, defect, tmp_path, capsys, no_ray, tally):
    tally["tried"] += 1
    case_id = f"{item.command} {item.name}: {defect}"
    argv, path, watched = item.setup(tmp_path)
    valid = path.read_bytes()
    did = put_defect(path, defect, item.kind, valid)
    before = snapshot(watched)
    try:
        rc, out, err = run(capsys, argv)
        assert "Traceback" not in out + err and '  File "' not in err, (case_id, err[-3000:])
        assert snapshot(watched) == before, f"{case_id}: the folder changed"
        if defect in item.tolerated:   # what the reader promises for this defect: no error, at most a warning
            assert rc == (0 if item.baseline == "ok" else item.baseline), (case_id, did, err[-2000:])
            if defect != "missing":
                assert "warning:" in err or item.baseline == "ray", (case_id, err)
        else:
            assert rc == 2, (case_id, did, rc, out[-1000:], err[-2000:])
            assert_one_line_reason(err, path, case_id)
    except BaseException:
        tally["dirty"].append(case_id)
        raise
    finally:
        if defect == "unreadable" and path.exists() and not path.is_symlink():
            path.chmod(0o644)
    tally["clean"] += 1


def assert_one_line_reason(err: str, path: Path, case_id: str) -> None:
    """The message: 'orch: error: <what>: <why>' on one line, or a file's problems one per line after it (a
    truncated sweep file may lack several fields: each is a line), and it names the file."""
    lines = err.strip().splitlines()
    first = next(i for i, line in enumerate(lines) if "error:" in line)
    assert lines[first].startswith("orch: error: "), (case_id, err)
    assert all(line.startswith("  - ") for line in lines[first + 1:]), (case_id, err)
    assert len(lines) <= 12, (case_id, err)
    assert path.name in err, (case_id, err)


# --- `orch workloads` reads a name, not a file ----------------------------------------------------------------

@pytest.mark.parametrize("name, said", [
    ("no-such-workload", "no-such-workload"),
    ("../../etc/passwd", "../../etc/passwd"),
    ("x" * 10_000, "xxxxxxxx"),
    ("caf\udce9", "caf"),          # a name that is not UTF-8 on the command line (Python's surrogate escape)
], ids=["unknown", "a-path", "huge", "not-utf8"])
def test_a_bad_workload_name_is_exit_2_with_one_line(name, said, capsys, tally):
    tally["tried"] += 1
    try:
        rc, out, err = run(capsys, ["workloads", name])
        assert rc == 2 and "Traceback" not in out + err, (rc, err[-2000:])
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("orch: error: ") and said in lines[0], err[:500]
    except BaseException:
        tally["dirty"].append(f"workloads: {name[:20]!r}")
        raise
    tally["clean"] += 1
