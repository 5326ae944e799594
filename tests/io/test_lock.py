"""One sweep per results folder (io.lock): a second holder is refused naming the first, a lock left by a dead
process is taken over and said, and of processes started together exactly one holds it."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from orchestrator.io.lock import LOCK_FILE, FolderInUse, FolderLock, Holder

HOLD = """
import sys, time
from pathlib import Path
from orchestrator.io.lock import FolderLock
FolderLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(60)
"""


def hold_in_a_process(folder) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_is_refused_at_once_naming_the_first(tmp_path):
    holder = hold_in_a_process(tmp_path)
    try:
        started = time.monotonic()
        with pytest.raises(FolderInUse) as err:
            FolderLock(tmp_path).acquire()
        assert time.monotonic() - started < 1.0       # refused, not waited for
        message = str(err.value)
        assert f"pid {holder.pid} on host {socket.gethostname()}, started 20" in message
        assert str(tmp_path) in message and "--results" in message
    finally:
        holder.kill()
        holder.wait()


def test_a_process_refused_before_the_holder_wrote_its_line_still_names_it(tmp_path):
    """The gap between the holder's flock and its line (CI once named "an unknown holder" for a live sweep):
    here a lock is held on an empty file and the line comes 0.3 s later; the refused process waits for it."""
    import fcntl
    import threading

    path = tmp_path / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)      # its own open file description: a second holder
    line = json.dumps({"host": "h1", "pid": 4242, "started_at": "2026-11-28T00:00:00Z"}) + "\n"
    writer = threading.Timer(0.3, lambda: os.pwrite(fd, line.encode(), 0))
    writer.start()
    try:
        with pytest.raises(FolderInUse) as err:
            FolderLock(tmp_path).acquire()
        assert "pid 4242 on host h1" in str(err.value)
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"not a holder line\n", 0)        # a line that never parses: named as it is, after the wait
        with pytest.raises(FolderInUse) as err:
            FolderLock(tmp_path).acquire()
        assert "an unknown holder (the lock file says 'not a holder line')" in str(err.value)
    finally:
        writer.join()
        os.close(fd)


def test_a_lock_left_by_a_killed_process_is_taken_over_and_said(tmp_path):
    holder = hold_in_a_process(tmp_path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert Holder.parse((tmp_path / LOCK_FILE).read_text()).pid == holder.pid   # its line is still there
    lock = FolderLock(tmp_path)
    note = lock.acquire()
    assert note is not None and f"left by pid {holder.pid}" in note and "took over" in note
    assert Holder.parse((tmp_path / LOCK_FILE).read_text()).pid == os.getpid()
    lock.release()


def test_a_released_lock_leaves_the_folder_as_it_was(tmp_path):
    existing = tmp_path / "kept"
    existing.mkdir()
    lock = FolderLock(existing)
    assert lock.acquire() is None
    lock.release()
    assert list(existing.iterdir()) == []
    new = tmp_path / "new" / "results"
    lock = FolderLock(new)
    lock.acquire()
    lock.release()
    assert not new.exists()          # made for the lock, removed with it (empty)
    assert FolderLock(existing).acquire() is None   # a clean release leaves nothing to take over


def _contend(folder: str, start, wins) -> None:
    lock = FolderLock(folder)
    start.wait()
    try:
        lock.acquire()
    except FolderInUse:
        return
    wins.put(os.getpid())
    time.sleep(1.0)    # held while the others try
    lock.release()


def test_of_processes_started_together_exactly_one_holds_the_lock(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    start, wins = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(str(tmp_path), start, wins)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    winners = []
    while not wins.empty():
        winners.append(wins.get())
    assert len(winners) == 1, winners


def test_a_lock_file_replaced_between_open_and_lock_is_not_trusted(tmp_path, monkeypatch):
    """The race a removed lock file opens: a process that opened the old file and locks it after its holder
    released (and removed) it must see that the file it holds is no longer the one at the path, and retry."""
    import fcntl

    from orchestrator.io import lock as lock_module

    first = FolderLock(tmp_path)
    first.acquire()
    real_flock, calls = fcntl.flock, []

    def flock(fd, op):
        calls.append(op)
        if len(calls) == 1:
            first.release()   # between our open and our lock: the holder goes, its file with it
        return real_flock(fd, op)

    monkeypatch.setattr(lock_module.fcntl, "flock", flock)
    second = FolderLock(tmp_path)
    second.acquire()
    assert len(calls) == 2                                  # the first lock was on a removed file: tried again
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    third = FolderLock(tmp_path)
    with pytest.raises(FolderInUse):
        third.acquire()
    second.release()


def test_the_holder_line_keeps_no_uri_and_only_its_user_reads_it(tmp_path, monkeypatch):
    """The lock file names the command that holds it, but never a tracking URI (it may carry a password), and
    other users cannot read it."""
    monkeypatch.setattr(sys, "argv", ["orch", "sweep", "s.yaml", "--mlflow-uri", "https://me:pw@mlflow.example:5000",
                                      "--address=ray://head:10001"])
    lock = FolderLock(tmp_path)
    lock.acquire()
    try:
        text = (tmp_path / LOCK_FILE).read_text()
        assert "pw@" not in text and "mlflow.example" not in text and "ray://" not in text
        assert json.loads(text)["command"] == "orch sweep s.yaml --mlflow-uri <uri> --address=<uri>"
        assert os.stat(tmp_path / LOCK_FILE).st_mode & 0o077 == 0
    finally:
        lock.release()
