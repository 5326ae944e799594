"""The fault battery: real `orch sweep` processes on a tiny classifier sweep, each hit by one fault, each
ending with nothing lost that the sweep had reported done and a clear message (exit 1 or 2, no traceback):

- two sweeps started together on one folder: one runs, the other exits 2 at once naming it; one set of ok
  records;
- SIGKILL of the driver while it writes a record (its line torn at a random byte), then a rerun: the torn line
  is skipped, every trial reported before the kill keeps its record, no key is recorded twice as ok;
- the disk full (a small tmpfs) after the first record: exit 1 saying which file could not be written (a
  file system that turns read-only under a sweep fails the same write the same way; a test cannot remount
  one read-only under a writer, which the kernel refuses);
- a sweep or a report started on a read-only folder: exit 2, before Ray, the folder unchanged.

docs/execution.md#faults says what orch promises under each. The sweeps join one Ray that this module starts
(`--address`), so the battery pays for one Ray start, not one per sweep. The tmpfs cases need mount rights
(root here); without them they skip, saying why, unless ORCH_REQUIRE_TMPFS=1 (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EMULATED_2S1C, REPO, write_sweep

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]

BATTERY = "fault battery"
REQUIRE_TMPFS_ENV_VAR = "ORCH_REQUIRE_TMPFS"
SWEEP = """
workload: {name: classifier, params: {hidden: 32, train_samples: 1024}}
grid: {ranks: [1], threads_per_rank: [1], local_batch: [16, 32]}
measure: {warmup_steps: 1, timed_steps: 5, repeats: 2, peak: false, allreduce: false}
"""
KEYS = {"r1-t1-b16", "r1-t1-b32"}

# A driver that writes its Nth record only up to a random byte, says so in a file and stops itself (SIGSTOP) to be
# killed: the SIGKILL lands while the record is being written, as a crash or `kill -9` can. Stopped, not asleep:
# a sleeping driver's other threads went on and could append a record after the torn bytes before the kill came.
TEARING_DRIVER = """
import os, random, signal, sys
from orchestrator.io import store
from orchestrator.run.driver import sweep as sweep_module

real, written = sweep_module.append_record, []

def append_record(folder, record):
    written.append(record.key)
    if len(written) == int(os.environ["TEAR_AT"]):
        line = (store.rec.dumps(record) + "\\n").encode()
        cut = random.Random(int(os.environ["TEAR_SEED"])).randrange(1, len(line))
        with open(folder / store.TRIALS_FILE, "ab") as fh:
            fh.write(line[:cut])
            fh.flush()
            os.fsync(fh.fileno())
        with open(os.environ["TEAR_MARK"], "w") as fh:
            fh.write(f"{cut} of {len(line)}")
        os.kill(os.getpid(), signal.SIGSTOP)
    real(folder, record)

sweep_module.append_record = append_record
from orchestrator.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def ray_address():
    """One local Ray (on loopback, as orch's embedded one) that every sweep of the battery joins."""
    import ray

    saved = {k: os.environ.get(k) for k in ("RAY_USAGE_STATS_ENABLED", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    os.environ.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def tally(battery_counts):
    return battery_counts


def orch(ray_address: str, sweep: Path, results: Path, *extra: str, driver: str | None = None,
         env: dict[str, str] | None = None) -> subprocess.Popen:
    args = ["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results), "--address",
            ray_address, "--json", "--no-report", *extra]
    command = [sys.executable, "-c", driver, *args] if driver else [sys.executable, "-m", "orchestrator.cli", *args]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def reported(stdout: str) -> list[dict]:
    """The records a --json sweep reported done, one per line on stdout, as it wrote them."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def lines(results: Path) -> list[str]:
    path = results / "trials.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def assert_kept(done: list[dict], results: Path) -> None:
    """Every record reported done is in trials.jsonl, whole, and no key is recorded twice as ok."""
    on_disk = lines(results)
    for record in done:
        assert json.dumps(record, separators=(",", ":")) in on_disk, record["key"]
    ok = [json.loads(line)["key"] for line in on_disk if line.startswith("{") and line.endswith("}")
          and json.loads(line)["status"] == "ok"]
    assert len(ok) == len(set(ok)), ok


def assert_clear(err: str) -> None:
    assert "Traceback" not in err and 'File "' not in err, err[-3000:]
    assert "orch: error: " in err, err[-3000:]


def counted(tally, name: str):
    """A context that counts one case, clean when its block ends without an error."""
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


# --- two sweeps at once -------------------------------------------------------------------------------------

def test_two_sweeps_started_together_leave_one_set_of_ok_records(ray_address, tmp_path, tally):
    with counted(tally, "two sweeps at once"):
        sweep = write_sweep(tmp_path, "together", SWEEP)
        results = tmp_path / "results"
        started = time.monotonic()
        procs = [orch(ray_address, sweep, results) for _ in range(2)]
        while all(p.poll() is None for p in procs):
            assert time.monotonic() - started < 60, "neither sweep was refused at once"
            time.sleep(0.1)
        ends = [p.communicate(timeout=400) for p in procs]
        codes = sorted(p.returncode for p in procs)
        assert codes == [0, 2], (codes, [e[1][-2000:] for e in ends])
        loser = next(err for p, (_, err) in zip(procs, ends) if p.returncode == 2)
        winner = next(p for p in procs if p.returncode == 0)
        assert f"is in use by another orch sweep: pid {winner.pid} on host " in loser
        assert_clear(loser)
        records = [json.loads(line) for line in lines(results)]
        assert sorted(r["key"] for r in records) == sorted(KEYS) and {r["status"] for r in records} == {"ok"}


# --- SIGKILL while a record is written ----------------------------------------------------------------------

def test_a_driver_killed_while_writing_a_record_loses_nothing_reported(ray_address, tmp_path, tally):
    with counted(tally, "SIGKILL during a record's write"):
        seed = random.randrange(1 << 30)
        sweep = write_sweep(tmp_path, "torn", SWEEP)
        results, mark = tmp_path / "results", tmp_path / "torn.mark"
        proc = orch(ray_address, sweep, results, driver=TEARING_DRIVER,
                    env={"TEAR_AT": "2", "TEAR_SEED": str(seed), "TEAR_MARK": str(mark)})
        deadline = time.monotonic() + 300
        while not mark.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the second record was never written"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        done = reported(out)
        assert [r["key"] for r in done] == ["r1-t1-b16"], (seed, out)   # reported before the kill
        torn = lines(results)[-1]
        assert len(lines(results)) == 2 and not torn.endswith("}"), (seed, mark.read_text())

        rerun = orch(ray_address, sweep, results)
        out, err = rerun.communicate(timeout=400)
        assert rerun.returncode == 0, (seed, err[-3000:])
        assert f"took over the lock of results folder {results} left by pid {proc.pid} on host " in err, err[-2000:]
        assert_kept(done, results)
        keys = [json.loads(line)["key"] for line in lines(results) if line.endswith("}")]
        assert sorted(keys) == sorted(KEYS), (seed, lines(results))
        assert lines(results)[1] == torn                                  # left as it was, skipped by readers


# --- a full disk and a read-only file system ----------------------------------------------------------------

@pytest.fixture
def small_fs(tmp_path):
    """A small file system of its own (a tmpfs; a loop-mounted ext2 image where tmpfs cannot be mounted):
    filled or made read-only under a sweep without touching the machine's disks."""
    mount = tmp_path / "fs"
    mount.mkdir()
    tried = []
    for command in (["mount", "-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", str(mount)], None):
        if command is None:   # the loop device fallback
            image = tmp_path / "fs.img"
            with open(image, "wb") as fh:
                fh.truncate(8 << 20)
            made = subprocess.run(["mke2fs", "-q", "-F", str(image)], capture_output=True, text=True)
            command = ["mount", "-o", "loop", str(image), str(mount)]
            if made.returncode:
                tried.append(f"mke2fs: {made.stderr.strip()}")
                continue
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode == 0:
            break
        tried.append(f"{' '.join(command[:3])}: {done.stderr.strip()}")
    else:
        reason = f"cannot mount a small file system here ({'; '.join(tried)})"
        if os.environ.get(REQUIRE_TMPFS_ENV_VAR) == "1":
            pytest.fail(f"{reason}, and {REQUIRE_TMPFS_ENV_VAR}=1 says this runner can", pytrace=False)
        pytest.skip(f"{reason} (set {REQUIRE_TMPFS_ENV_VAR}=1 to make this a failure)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(mount: Path) -> None:
    """Fill the file system to its last byte (unbuffered: nothing left to flush when it is full)."""
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    assert os.statvfs(mount).f_bavail == 0


def run_until_first_record(ray_address: str, sweep: Path, results: Path) -> subprocess.Popen:
    proc = orch(ray_address, sweep, results)
    deadline = time.monotonic() + 300
    while len(lines(results)) < 1:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no record"
        time.sleep(0.1)
    return proc


def test_a_full_disk_ends_the_sweep_with_what_it_kept(ray_address, tmp_path, small_fs, tally):
    """Filled after the first record: tmpfs counts whole pages and a record is ~1.7 KB, so the next record or
    the one after it needs a page there is no room for."""
    with counted(tally, "full disk"):
        sweep = write_sweep(tmp_path, "full", SWEEP.replace("[16, 32]", "[16, 32, 64]"))
        results = small_fs / "results"
        proc = run_until_first_record(ray_address, sweep, results)
        fill(small_fs)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, ([len(x) for x in lines(results)], err[-3000:])
        assert_clear(err)
        failed = re.search(r"trials\.jsonl: the record of (r1-t1-b\d+) cannot be written \(No space left on device\)",
                           err)
        assert failed is not None and "every trial recorded before it is kept" in err, err[-3000:]
        done = reported(out)
        assert done and failed[1] not in {r["key"] for r in done}
        assert_kept(done, results)


def test_a_sweep_or_report_on_a_read_only_folder_is_refused_before_anything(ray_address, tmp_path, small_fs,
                                                                             tally):
    with counted(tally, "read-only folder at start"):
        results = small_fs / "results"
        shutil.copytree(REPO / "results" / "example-classifier", results, ignore=shutil.ignore_patterns("report"))
        subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
        before = {p.name: p.read_bytes() for p in results.iterdir()}
        sweep = write_sweep(tmp_path, "classifier", SWEEP)
        started = time.monotonic()
        proc = orch(ray_address, sweep, results)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and time.monotonic() - started < 60, err[-3000:]
        assert_clear(err)
        assert f"results folder {results}: cannot be written (Read-only file system)" in err
        report = subprocess.run([sys.executable, "-m", "orchestrator.cli", "report", str(results), "--format", "md"],
                                cwd=REPO, capture_output=True, text=True, timeout=120)
        assert report.returncode == 2 and "cannot write the report there (Read-only file system)" in report.stderr
        assert_clear(report.stderr)
        assert {p.name: p.read_bytes() for p in results.iterdir()} == before


# --- a trial's processes, a rank that cannot start, a tracking server that never answers ---------------------

CHILD_SCRIPT = """
import os, subprocess
import torch
import torch.distributed as dist
import orch.script

dist.init_process_group()
child = subprocess.Popen(["sleep", "600"])   # a helper of the script's own, never waited for
with open(os.environ["CHILD_PIDS"], "a") as fh:
    fh.write(f"{child.pid}\\n")
for _ in range(6):
    torch.ones(4).sum()
    orch.script.step(samples=4)
"""
CHILD_SWEEP = """
workload: {script: train.py, samples_per_epoch: 64}
grid: {ranks: [1, 2], threads_per_rank: [1], local_batch: [4]}
measure: {warmup_steps: 1, timed_steps: 2, repeats: 2, peak: false, allreduce: false}
constraints: {rank_memory_mib: 1500}
"""


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_scripts_child_processes_end_with_each_trial(ray_address, tmp_path, tally):
    """Every trial of a script that starts `sleep 600` and ends normally: no sleep outlives its trial."""
    with counted(tally, "a script's child processes outlive its trial"):
        (tmp_path / "train.py").write_text(CHILD_SCRIPT)
        sweep = write_sweep(tmp_path, "children", CHILD_SWEEP)
        pids = tmp_path / "children.pids"
        proc = orch(ray_address, sweep, tmp_path / "results", env={"CHILD_PIDS": str(pids)})
        out, err = proc.communicate(timeout=400)
        started = [int(p) for p in pids.read_text().split()] if pids.exists() else []
        left = [p for p in started if _alive(p)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert proc.returncode == 0, err[-3000:]
        assert {r["key"] for r in reported(out) if r["status"] == "ok"} == {"r1-t1-b4", "r2-t1-b4"}
        assert len(started) == 3 and not left, (started, left)   # one per rank of each trial


def test_a_rank_that_cannot_start_fails_its_trial_not_the_sweep(ray_address, tmp_path, tally):
    """The rank's work folder on its node is planted as a link (another user's trick, or a stale one): the rank
    cannot start. Each trial is a failed record naming the rank, the node and the cause; the sweep ends with
    exit 1, no traceback."""
    from orchestrator.io.files import WORK_ROOT

    with counted(tally, "a rank that cannot start"):
        name = f"unstartable-{os.getpid()}-{random.randrange(1 << 30)}"
        sweep = write_sweep(tmp_path, name, SWEEP)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        planted = WORK_ROOT / name
        planted.symlink_to(elsewhere, target_is_directory=True)
        try:
            proc = orch(ray_address, sweep, tmp_path / "results")
            out, err = proc.communicate(timeout=300)
        finally:
            planted.unlink()
        assert proc.returncode == 1, err[-3000:]
        assert_clear(err)
        records = reported(out)
        assert {r["key"] for r in records} == KEYS and {r["status"] for r in records} == {"failed"}
        for r in records:
            assert re.match(r"rank 0 could not start on node \S+ \(\S+\): UnsafeFolder: ", r["reason"]), r["reason"]
            assert f"{planted} is not a folder of yours" in r["reason"]
        assert list(elsewhere.iterdir()) == []


def test_a_tracking_server_that_never_answers_never_holds_the_sweep(ray_address, tmp_path, tally):
    """An MLflow server that answers one header line every 2 s, for ever: no socket timeout fires. The trials run
    and are recorded as if it were not there; the sweep's end waits $ORCH_TRACKING_WAIT_S for it, then says so."""
    from hostile_servers import DripServer

    with counted(tally, "a tracking server that never answers"), DripServer() as server:
        sweep = write_sweep(tmp_path, "drip", SWEEP)
        proc = orch(ray_address, sweep, tmp_path / "results", "--mlflow-uri", server.uri,
                    env={"ORCH_TRACKING_WAIT_S": "5"})
        try:
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err[-3000:]
        assert {r["key"] for r in reported(out) if r["status"] == "ok"} == KEYS
        assert "MLflow: still not done after 5 s" in err and server.requests
