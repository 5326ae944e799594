"""io.files: atomic writes that other writers and links cannot break, bounded input reads that give a one-line
reason, and the private work folder."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from orchestrator.io import files
from orchestrator.io.files import (
    UnreadableFile,
    UnsafeFolder,
    private_dirs,
    private_folder,
    read_input_text,
    read_json_input,
    read_nofollow,
    write_atomic,
)

# --- write_atomic ---------------------------------------------------------------------------------------

def test_concurrent_writers_of_one_file_never_collide_and_leave_no_temporary_file(tmp_path):
    target = tmp_path / "spec.json"
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(40):
                write_atomic(target, f"{n}:{i}\n" * 50, durable=False)
        except BaseException as err:  # noqa: BLE001 (collected for the assertion)
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []   # a shared `<path>.tmp` makes one writer's rename find the other's file gone
    lines = set(target.read_text().splitlines())
    assert len(lines) == 1   # whole: one writer's text, never a mix
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]


def test_a_link_planted_at_the_temporary_name_is_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    target = tmp_path / "out" / "spec.json"
    target.parent.mkdir()
    os.symlink(victim, f"{target}.tmp")     # the name a predictable temporary file would have
    write_atomic(target, "new")
    assert victim.read_text() == "mine"
    assert target.read_text() == "new"


def test_the_file_and_its_folder_are_fsynced_around_the_rename(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        mode = os.fstat(fd).st_mode
        synced.append("folder" if stat.S_ISDIR(mode) else "file")
        real_fsync(fd)

    def replace(src, dst) -> None:
        synced.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomic(tmp_path / "spec.json", "{}")
    assert synced == ["file", "rename", "folder"]
    synced.clear()
    write_atomic(tmp_path / "progress.json", "{}", durable=False)
    assert synced == ["rename"]


def test_the_temporary_file_is_private_and_the_result_keeps_the_files_mode(tmp_path, monkeypatch):
    seen: list[int] = []
    real_fdopen = os.fdopen

    def fdopen(fd, *args, **kwargs):
        seen.append(stat.S_IMODE(os.fstat(fd).st_mode))   # as created, before anything is written
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", fdopen)
    target = tmp_path / "spec.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    write_atomic(target, "new")
    assert seen == [0o600]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


# --- input files --------------------------------------------------------------------------------------------

def test_input_reads_refuse_what_is_not_a_small_regular_utf8_file_with_one_line(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big"
    with open(big, "wb") as fh:
        fh.truncate(2048)                     # sparse: nothing read to know its size
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\n")
    cases = {fifo: "not a regular file", big: "2,048 bytes, more than the 1,024 allowed",
             tmp_path: "is a directory", tmp_path / "none": "file not found",
             latin / "x": "a part of the path is a file", latin: "not UTF-8 text (byte 9 is 0xe9)"}
    for path, reason in cases.items():
        with pytest.raises(UnreadableFile, match="^[^\n]*$") as err:   # one line
            read_input_text(path, 1024)
        assert reason in str(err.value), (path, err.value)


def test_json_nested_deeper_than_the_parser_goes_is_a_reason_not_a_traceback(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UnreadableFile, match="nested too deeply"):
        read_json_input(deep)


def test_a_tail_is_read_from_its_end_not_whole(tmp_path):
    import tracemalloc

    log = tmp_path / "rank.log"
    with open(log, "wb") as fh:
        fh.truncate(64 << 20)                 # 64 MiB of nothing, then the end worth keeping
        fh.seek(0, os.SEEK_END)
        fh.write(b"the last line\n")
    tracemalloc.start()
    tail = read_nofollow(log, tail_bytes=1 << 10)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tail.endswith(b"the last line\n") and len(tail) == 1 << 10
    assert peak < 4 << 20
    os.symlink(log, tmp_path / "link.log")
    with pytest.raises(OSError):
        read_nofollow(tmp_path / "link.log")


# --- the private work folder --------------------------------------------------------------------------------

def test_the_work_folder_is_made_private(tmp_path):
    root = private_folder(tmp_path / "orch-work")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    rank = private_dirs(root / "sweep" / "trial-1" / "rank0", root)
    for folder in (root / "sweep", root / "sweep" / "trial-1", rank):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_work_folder_of_ours_that_others_may_read_is_made_private(tmp_path):
    root = tmp_path / "orch-work"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    private_folder(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


@pytest.mark.parametrize("setup, reason", [
    (lambda p: (p.mkdir(), os.chmod(p, 0o777)), "writable by other users (mode 777)"),
    (lambda p: (p.mkdir(), os.chmod(p, 0o730)), "writable by other users (mode 730)"),
    (lambda p: os.symlink(p.parent, p), "is not a folder (a link or a file"),
    (lambda p: (p.mkdir(), os.chown(p, 65534, 65534)), "is owned by uid 65534, not by you"),
])
def test_a_work_folder_another_user_could_change_is_refused_with_the_reason(tmp_path, setup, reason):
    root = tmp_path / "orch-work"
    if "owned" in reason and os.getuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    setup(root)
    with pytest.raises(UnsafeFolder, match=reason.replace("(", r"\(").replace(")", r"\)")):
        private_folder(root)


def test_a_link_inside_the_work_folder_is_refused(tmp_path):
    root = private_folder(tmp_path / "orch-work")
    os.symlink(tmp_path, root / "sweep")
    with pytest.raises(UnsafeFolder, match="not a folder of yours"):
        private_dirs(root / "sweep" / "rank0", root)


def test_the_work_root_is_the_users_own_folder_in_tmp():
    assert files.WORK_ROOT == Path("/tmp") / f"orch-{os.getuid()}"
