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

import functools
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.app import session
from orchestrator.cli import main
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


@functools.cache
def _saved_prediction() -> bytes:
    """A prediction saved from RESULTS without its two largest local batches, which the folder measured: what
    `orch score` reads, made once."""
    base = Path(tempfile.mkdtemp(prefix="battery-score-"))
    kept = _results(base)
    lines = [line for line in (kept / "trials.jsonl").read_text().splitlines()
             if not (json.loads(line).get("kind") == "throughput" and json.loads(line).get("local_batch") in (128, 256))]
    (kept / "trials.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["predict", str(kept), "--local-batch", "64,128,256", "--out", str(base / "plan")]) == 0
    data = (base / "plan" / "prediction.json").read_bytes()
    shutil.rmtree(base)
    return data


def _score(target: str):
    def setup(case: Path):
        c, results = _inputs_folder(case), _results(case)
        (c / "prediction.json").write_bytes(_saved_prediction())
        argv = ["score", str(c / "prediction.json"), str(results)]
        return argv, (results / target if target == "spec.json" else c / target), results
    return setup


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
    Input("score", "saved prediction", "json", _score("prediction.json")),
    Input("score", "spec.json of the later folder", "json", _score("spec.json")),
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
    monkeypatch.setattr(session, "ray_session", reached)   # the sweep and the profile (app) start Ray through it


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


# --- a results folder is data: reading, reporting, predicting or tracking it runs nothing, deletes nothing and
# sends no secret (docs/trust.md). Each case is a real command on a copy of a committed folder made hostile in one
# way; each names what it guards and is counted in the battery.

PAYLOAD = """from pathlib import Path
Path(__file__).with_name("PAYLOAD-RAN").write_text("the folder's code ran")
W = None
"""
SECRET = "s3cr3t-token-of-the-user"


def hostile(tally, name: str):
    """A context that counts one hostile-folder case, clean when its block ends without an error."""
    class Case:
        def __enter__(self):
            tally["tried"] += 1

        def __exit__(self, kind, value, tb):
            if kind is None:
                tally["clean"] += 1
            else:
                tally["dirty"].append(name)
            return False
    return Case()


def edit(folder: Path, change) -> None:
    import json

    data = json.loads((folder / "spec.json").read_text())
    change(data)
    (folder / "spec.json").write_text(json.dumps(data))


def orch_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300):
    """The real command in its own process (an import path resolves against its working folder, as a user's)."""
    import subprocess
    import sys

    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**clean, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **(env or {})})


def append_record_with_key(folder: Path, key: str) -> None:
    import json

    line = next(x for x in (folder / "trials.jsonl").read_text().splitlines() if '"status":"ok"' in x)
    record = json.loads(line)
    record["key"] = key
    with open(folder / "trials.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")


@pytest.mark.parametrize("reference", ["{case}/payload.py:W", "payload:W"], ids=["file", "import-path"])
def test_predict_report_load_and_track_run_none_of_the_folders_code(reference, tmp_path, tally):
    """Deliverable 1: spec.json's workload.name is a label. A file path and an import path (resolved against the
    command's working folder) that would run a payload if imported; every reader runs neither."""
    with hostile(tally, f"the folder's workload code is never run ({reference.split(':')[0].split('/')[-1]})"):
        import orch

        results = _results(tmp_path)
        (tmp_path / "payload.py").write_text(PAYLOAD)
        edit(results, lambda d: d["spec"]["workload"].update(name=reference.replace("{case}", str(tmp_path))))
        done = orch_cli("predict", str(results), "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert '"layouts"' in done.stdout
        done = orch_cli("report", str(results), "--tensorboard", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        loaded = orch.load(results)
        assert loaded.records and orch.track(results, tensorboard=True)
        assert not (tmp_path / "PAYLOAD-RAN").exists()


@pytest.mark.parametrize("key", ["{victim}", "../../victim"], ids=["absolute", "relative"])
def test_a_record_key_that_is_a_path_deletes_and_writes_nothing(key, tmp_path, tally):
    """Deliverable 2: a record key is a name. `orch report --tensorboard` removed and rewrote any folder a key
    named (/tmp/victim, or ../.. out of the results folder)."""
    with hostile(tally, f"a record key that is a path ({key.strip('{}')})"):
        results = _results(tmp_path)
        victim = tmp_path / "victim" if key.startswith("{") else results.parent.parent / "victim"
        victim.mkdir(exist_ok=True)
        (victim / "mine.txt").write_text("the user's")
        append_record_with_key(results, key.replace("{victim}", str(victim)))
        before = snapshot(victim)
        done = orch_cli("report", str(results), "--format", "md", "--tensorboard", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "is not a name orch gives a trial" in done.stderr and "Traceback" not in done.stderr
        assert snapshot(victim) == before


@pytest.mark.parametrize("planted", ["link", "not-ours"])
def test_a_tensorboard_run_folder_orch_did_not_make_is_left_alone(planted, tmp_path, tally):
    """Deliverable 2: only a run folder that orch's manifest lists is ever removed, and never through a link."""
    import json

    with hostile(tally, f"a TensorBoard run folder that is {'a link' if planted == 'link' else 'not orch’s'}"):
        results = _results(tmp_path)
        victim = tmp_path / "victim"
        victim.mkdir()
        (victim / "mine.txt").write_text("the user's")
        logdir = results / "tensorboard"
        logdir.mkdir()
        if planted == "link":   # listed in a manifest, with a stale fingerprint: orch would rewrite it
            (logdir / "r1-t1-b16").symlink_to(victim, target_is_directory=True)
            (logdir / "orch-logged.json").write_text(json.dumps({"r1-t1-b16": "stale"}))
            before = snapshot(victim)
        else:                   # a folder of the user's under the key's name, no manifest
            victim = logdir / "r1-t1-b16"
            victim.mkdir()
            (victim / "notes.txt").write_text("the user's")
            before = snapshot(victim)
        done = orch_cli("report", str(results), "--format", "md", "--tensorboard", cwd=tmp_path)
        assert done.returncode == 1, done.stderr[-2000:]   # the tracker stopped, saying why
        assert "is there but is not a run folder orch wrote" in done.stderr and "Traceback" not in done.stderr
        assert snapshot(victim) == before


def test_report_mlflow_logs_where_the_user_says_never_where_the_folder_says(tmp_path, tally):
    """Deliverable 3: a bare --mlflow logs to $MLFLOW_TRACKING_URI, not the folder's stored URI (a sqlite: or
    file: URI would let the folder choose where MLflow writes), which is printed as a hint."""
    with hostile(tally, "the folder's stored MLflow URI is never used"):
        results = _results(tmp_path)
        victim, mine = tmp_path / "victim.db", tmp_path / "mine.db"
        edit(results, lambda d: d["spec"].update(tracking={"mlflow": f"sqlite:///{victim}"}))
        done = orch_cli("report", str(results), "--format", "md", "--mlflow", cwd=tmp_path,
                        env={"MLFLOW_TRACKING_URI": f"sqlite:///{mine}"})
        assert done.returncode == 0, done.stderr[-2000:]
        assert not victim.exists() and mine.is_file()
        assert f"the folder's spec.json names the tracking URI 'sqlite:///{victim}'" in done.stderr


def test_report_mlflow_sends_no_secret_to_a_server_the_folder_names(tmp_path, tally):
    """Deliverable 3: MLflow sends the user's MLFLOW_TRACKING_TOKEN to the server it logs to; a server that a
    folder names must get no request at all."""
    from hostile_servers import RecordingServer

    with hostile(tally, "no request (and no token) to a server the folder names"), RecordingServer() as server:
        results = _results(tmp_path)
        edit(results, lambda d: d["spec"].update(tracking={"mlflow": server.uri}))
        done = orch_cli("report", str(results), "--format", "md", "--mlflow", cwd=tmp_path,
                        env={"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mine.db'}",
                             "MLFLOW_TRACKING_TOKEN": SECRET})
        assert done.returncode == 0, done.stderr[-2000:]
        assert server.requests == []


def _uploaded(root: Path, where: str) -> dict[str, bytes]:
    """The artifacts MLflow stored under `where/` of any run (a sqlite store's artifacts are files under root)."""
    return {p.name: p.read_bytes() for p in root.rglob(f"artifacts/{where}/*") if p.is_file()}


def test_report_out_mlflow_uploads_the_reports_files_only(tmp_path, tally):
    """Deliverable 3: `--out DIR --mlflow` uploaded everything under DIR (`--out .` uploads .venv, .git, .env)."""
    with hostile(tally, "--out DIR --mlflow uploads the report's files only"):
        results = _results(tmp_path)
        out = tmp_path / "out"
        (out / "sub").mkdir(parents=True)
        (out / ".env").write_text(f"TOKEN={SECRET}\n")
        (out / "sub" / "notes.txt").write_text(SECRET)
        (out / "linked.md").symlink_to(out / ".env")
        done = orch_cli("report", str(results), "--format", "all", "--out", str(out), "--mlflow-uri",
                        f"sqlite:///{tmp_path / 'mine.db'}", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        written = {p.name for p in out.iterdir()} - {".env", "sub", "linked.md"}
        uploaded = _uploaded(tmp_path / "mlruns", "report")
        assert set(uploaded) == written and "report.md" in written
        assert not any(SECRET.encode() in data for data in uploaded.values())


def test_a_folder_file_that_is_a_link_is_refused_and_never_uploaded(tmp_path, tally):
    """Deliverable 3: a results folder's own files are never links: environment.json linked to a JSON file of the
    user's would be read, reported and uploaded as the sweep's environment."""
    import json

    with hostile(tally, "a folder file that is a link"):
        results = _results(tmp_path)
        secret = tmp_path / "credentials.json"
        secret.write_text(json.dumps({"cpu_model": SECRET, "token": SECRET}))
        (results / "environment.json").unlink()
        (results / "environment.json").symlink_to(secret)
        done = orch_cli("report", str(results), "--format", "md", "--mlflow-uri", f"sqlite:///{tmp_path / 'mine.db'}",
                        cwd=tmp_path)
        assert done.returncode == 2 and "environment.json: is a link" in done.stderr, done.stderr[-2000:]
        assert SECRET not in done.stdout + done.stderr
        assert not any(SECRET.encode() in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()
                       and p != secret and not p.is_symlink())


def test_a_report_file_that_is_a_link_is_replaced_not_written_through(tmp_path, tally):
    """Deliverable 4: report/report.md linked to a file of the user's overwrote that file."""
    with hostile(tally, "report/report.md is a link"):
        results = _results(tmp_path)
        victim = tmp_path / "victim.md"
        victim.write_text("the user's")
        (results / "report").mkdir()
        (results / "report" / "report.md").symlink_to(victim)
        done = orch_cli("report", str(results), "--format", "md", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert victim.read_text() == "the user's"
        assert not (results / "report" / "report.md").is_symlink()
        assert (results / "report" / "report.md").read_text().startswith("# ")


def test_a_report_folder_that_is_a_link_is_refused_unless_named(tmp_path, tally):
    """Deliverable 4: RESULTS/report linked to a folder of the user's: refused (exit 2, nothing written there);
    the same link given as --out by the user is theirs to use."""
    with hostile(tally, "report/ is a link"):
        results = _results(tmp_path)
        victim = tmp_path / "victim"
        victim.mkdir()
        (victim / "report.md").write_text("the user's")
        (results / "report").symlink_to(victim, target_is_directory=True)
        before = snapshot(victim)
        done = orch_cli("report", str(results), "--format", "md", cwd=tmp_path)
        assert done.returncode == 2 and "is a link" in done.stderr and "give --out DIR" in done.stderr, done.stderr
        assert snapshot(victim) == before
        done = orch_cli("report", str(results), "--format", "md", "--out", str(results / "report"), cwd=tmp_path)
        assert done.returncode == 0 and (victim / "report.md").read_text().startswith("# "), done.stderr[-2000:]


@pytest.mark.parametrize("name", ["report", "logs"])
def test_a_sweep_into_a_folder_whose_report_or_logs_is_a_link_is_refused_before_ray(name, tmp_path, capsys, no_ray,
                                                                                     tally):
    """Deliverable 4: a resumed folder's logs/ or report/ that is a link would be written through by the sweep."""
    with hostile(tally, f"a sweep into a folder whose {name}/ is a link"):
        c, results = _inputs_folder(tmp_path), _results(tmp_path)
        victim = tmp_path / "victim"
        victim.mkdir()
        (results / name).symlink_to(victim, target_is_directory=True)
        rc, out, err = run(capsys, ["sweep", str(c / "sweep.yaml"), "--topology", str(c / "topo.yaml"), "--results",
                                    str(results)])
        assert rc == 2 and f"{results / name} is a link" in err, (rc, err[-2000:])
        assert list(victim.iterdir()) == []


def test_a_tracking_server_that_pages_for_ever_is_given_up_on(tmp_path, tally):
    """Deliverable 9: MLflow's run search paged for as long as the server handed out page tokens."""
    import time

    from hostile_servers import EndlessPagesServer

    with hostile(tally, "an MLflow server that pages for ever"), EndlessPagesServer(tmp_path / "art") as server:
        results = _results(tmp_path)
        started = time.monotonic()
        done = orch_cli("report", str(results), "--format", "md", "--mlflow-uri", server.uri, cwd=tmp_path, timeout=280)
        assert done.returncode == 1, done.stderr[-2000:]
        assert "the search for this sweep's runs" in done.stderr and "did not end" in done.stderr
        assert server.pages <= 100 and time.monotonic() - started < 280


def test_a_tracking_server_that_never_finishes_answering_is_waited_for_a_bounded_time(tmp_path, tally):
    """Deliverable 9: a server that answers one header line at a time never trips a socket timeout; orch's own
    bound ($ORCH_TRACKING_WAIT_S) ends the wait, says so, and the report is written."""
    from hostile_servers import DripServer

    with hostile(tally, "an MLflow server that never finishes answering"), DripServer() as server:
        results = _results(tmp_path)
        done = orch_cli("report", str(results), "--format", "md", "--mlflow-uri", server.uri, cwd=tmp_path, timeout=120,
                        env={"ORCH_TRACKING_WAIT_S": "3"})
        assert done.returncode == 1, done.stderr[-2000:]
        assert "still not done after 3 s" in done.stderr and (results / "report" / "report.md").is_file()


def test_a_profile_result_whose_label_is_a_path_is_refused(tmp_path, capsys, tally):
    """Deliverable 2: a profile folder's result names files by its own label and variant (layers-<label>.png):
    they must be its folder's name, never a path."""
    import json

    with hostile(tally, "a profile result whose label is a path"):
        c, out = _inputs_folder(tmp_path), _profile(tmp_path)
        result = json.loads(FAILED_TARGET)
        result.update(label="x/../../../escaped", variant="../v")
        (out / "1x1x8" / "profile-result.json").write_text(json.dumps(result))
        before = snapshot(tmp_path)
        rc, _out, err = run(capsys, ["profile", str(c / "sweep.yaml"), "--report-only", "--out", str(out)])
        assert rc == 2 and "must be letters, digits" in err and "Traceback" not in err, (rc, err[-2000:])
        assert snapshot(tmp_path) == before


def test_a_profile_report_file_that_is_a_link_is_replaced_not_written_through(tmp_path, capsys, tally):
    """Deliverable 4: a profile folder is data too; its profile.md linked to a file of the user's was overwritten
    by `orch profile --report-only`."""
    with hostile(tally, "a profile folder's profile.md is a link"):
        c, out = _inputs_folder(tmp_path), _profile(tmp_path)
        victim = tmp_path / "victim.md"
        victim.write_text("the user's")
        (out / "profile.md").symlink_to(victim)
        rc, _out, err = run(capsys, ["profile", str(c / "sweep.yaml"), "--report-only", "--out", str(out)])
        assert rc == 1 and "Traceback" not in err, (rc, err[-2000:])   # its one target failed: exit 1, said
        assert victim.read_text() == "the user's" and not (out / "profile.md").is_symlink()
