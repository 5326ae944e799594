"""The results folder's refusal to mix incomparable trials (orchestrator.io.store), on real files."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from orchestrator.core.measured.environment import Environment
from orchestrator.io.store import SpecChanged, load_results, prepare_folder, spec_changes

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "results" / "example-retinanet"   # written before measure.isolation existed


def _spec(**measure) -> dict:
    return {"name": "x", "workload": {"name": "w", "params": {}}, "measure": {"repeats": 3, **measure}}


def test_a_setting_added_later_compares_as_the_value_older_results_were_measured_under():
    old = _spec()                                   # no isolation key: every trial ran alone
    assert spec_changes(old, _spec(isolation="node"), {}, {}) == []
    assert spec_changes(old, _spec(isolation="none"), {}, {}) == ["measure.isolation: 'node' → 'none'"]


def test_results_from_before_the_ddp_switches_compare_as_ddps_defaults():
    def spec(**params) -> dict:
        return {**_spec(isolation="node"), "workload": {"name": "w", "params": params}}

    defaults = {"ddp_comm_hook": "none", "ddp_bucket_mb": 25.0, "ddp_grad_as_bucket_view": False}
    assert spec_changes(spec(), spec(**defaults), {}, {}) == []
    assert spec_changes(spec(), spec(**{**defaults, "ddp_comm_hook": "bf16"}), {}, {}) == [
        "workload.params.ddp_comm_hook: 'none' → 'bf16'"]


def test_the_calibration_switches_may_change_but_a_measurement_setting_may_not():
    assert spec_changes(_spec(peak=True), _spec(peak=False), {}, {}) == []
    # when the workload is probed: what the time estimate rests on, not what a trial measures (older: no key)
    assert spec_changes(_spec(), _spec(probe="always"), {}, {}) == []
    assert spec_changes(_spec(probe="auto"), _spec(probe="always"), {}, {}) == []
    assert spec_changes(_spec(), _spec(repeats=5), {}, {}) == ["measure.repeats: 3 → 5"]


def test_a_results_folder_from_before_concurrency_resumes_with_the_default_isolation(tmp_path):
    folder = tmp_path / "example"
    shutil.copytree(EXAMPLE, folder)
    before = (folder / "trials.jsonl").read_text()
    old = load_results(folder)
    stored = json.loads((folder / "spec.json").read_text())
    assert "isolation" not in stored["spec"]["measure"] and old.spec.measure.isolation == "node"   # the default
    spec = json.loads(json.dumps(stored["spec"]))
    spec["measure"]["isolation"] = "node"
    topology = json.loads((folder / "topology.json").read_text())
    records = prepare_folder(folder, spec, stored["derived"], topology, Environment())
    assert len(records) == len(old.records) and (folder / "trials.jsonl").read_text() == before
    spec["measure"]["isolation"] = "socket"
    with pytest.raises(SpecChanged, match="measure.isolation: 'node' → 'socket'"):
        prepare_folder(folder, spec, stored["derived"], topology, Environment())


def test_a_large_trials_file_is_read_a_line_at_a_time_with_the_same_records(tmp_path):
    """trials.jsonl is read a chunk (1 MiB) at a time, never whole: a record across a chunk's end, a character of
    several bytes cut by one, and a torn last line read as from the whole text; bytes that are not UTF-8 are named
    by their place in the file."""
    from orchestrator.core.measured import records as rec
    from orchestrator.io.files import UnreadableFile, read_input_lines

    folder = tmp_path / "big"
    shutil.copytree(REPO / "results" / "example-predict", folder, ignore=shutil.ignore_patterns("report"))
    lines = (folder / "trials.jsonl").read_text().splitlines()
    line = json.loads(lines[-1])
    line["reason"] = "é" * 3000   # two bytes each: chunk ends fall inside some
    body = "\n".join([*lines, *[json.dumps({**line, "key": f"k{i}"}, ensure_ascii=False) for i in range(400)]])
    (folder / "trials.jsonl").write_text(body + "\n" + lines[0][:50])
    assert (folder / "trials.jsonl").stat().st_size > 2 << 20
    whole = rec.parse_lines((folder / "trials.jsonl").read_text().splitlines())
    results = load_results(folder)
    assert [r.key for r in results.records] == [r.key for r in whole[0]] and len(results.records) > 400
    assert list(results.errors) == [f"{folder / 'trials.jsonl'}: {e}" for e in whole[1]] and "torn last line" in whole[1][0]
    data = (folder / "trials.jsonl").read_bytes()
    at = (1 << 20) + 7
    (folder / "trials.jsonl").write_bytes(data[:at] + b"\xff" + data[at:])
    with pytest.raises(UnreadableFile, match=f"is not UTF-8 text \\(byte {at:,} is 0xff\\)"):
        list(read_input_lines(folder / "trials.jsonl", 1 << 30))


def test_the_trials_files_name_is_made_durable_with_its_first_record(tmp_path):
    """A new trials.jsonl's folder is fsynced after its first record (a power cut then keeps the file), seen with
    strace: an fsync of the folder's descriptor after the file's."""
    import subprocess
    import sys

    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    code = ("import sys; from pathlib import Path\n"
            "from orchestrator.core.measured import records as rec\n"
            "from orchestrator.io.store import append_record\n"
            "append_record(Path(sys.argv[1]), rec.Record(kind=rec.Kind.THROUGHPUT, key='r1-t1-b8', status=rec.Status.OK))\n")
    folder = tmp_path / "new"
    folder.mkdir()
    done = subprocess.run(["strace", "-f", "-e", "trace=openat,fsync", sys.executable, "-c", code, str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    trace = [line for line in done.stderr.splitlines() if str(folder) in line or "fsync(" in line]
    fds, synced = {}, []   # in order: a descriptor's number is reused once it is closed
    for line in trace:
        if m := re.search(r'openat\(AT_FDCWD, "([^"]+)", ([A-Z_|]+)[^=]*= (\d+)', line):
            fds[m.group(3)] = (m.group(1), "O_DIRECTORY" in m.group(2))
        elif m := re.search(r"fsync\((\d+)\)", line):
            synced.append(fds.get(m.group(1)))
    assert (str(folder / "trials.jsonl"), False) in synced and (str(folder), True) in synced, trace
