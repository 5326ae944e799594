"""Files, read and written carefully: atomic writes that survive a crash, input files read with a bound and a
one-line reason for anything that is not what it claims to be, and files in a folder other users must not
touch (the work folder) made without following links."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from orchestrator.core.json.values import JsonValue
from orchestrator.errors import InputError

# What an input file may weigh before orch refuses to read it (a YAML parser reads ~1 MB/s, so a sweep or
# topology file of this size is already a minute's parse; the largest real one, a detailed topology of a
# 256-node cluster, is about 2 MB). JSON that orch wrote itself may be larger: a results folder's files.
MAX_YAML_BYTES = 16 << 20
MAX_JSON_BYTES = 64 << 20
MAX_TRIALS_BYTES = 1 << 30     # trials.jsonl: a few KB per record, so hundreds of thousands of records

# Each rank's files (job, log, progress, result) live under this folder on its node, one per user: private
# (0700) and checked before use, as /tmp is shared by every user of the machine (`private_folder`).
WORK_ROOT = Path("/tmp") / f"orch-{os.getuid()}"


class UnreadableFile(InputError):
    """An input file that cannot be used, with the one-line reason (the caller names the file)."""


class UnsafeFolder(InputError):
    """A folder that another user could change under orch (its owner or mode), with the reason."""


def write_atomic(path: str | Path, text: str | bytes, *, durable: bool = True) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`: a crash, or a reader
    polling the file (the launcher reading a rank's status), sees the old content or the new, never a
    torn one. The rename is atomic on POSIX when both names are on one file system, as they are here.

    The temporary file has a name of its own (two writers of one path never share it) and is private while
    it is written (mkstemp's 0600, then the mode a plain new file would get). With `durable` (the default), the
    file is fsynced before the rename and its folder after it, so a power cut leaves the old file or the new
    one, never an empty one; a rank's progress file, rewritten while it steps, is not worth a disk flush.

    The rename replaces whatever is at `path`, a link included, and never writes through it: a link planted
    in a folder someone else handed over (a results folder's report/report.md pointing at the user's files)
    is replaced by the file, its target left as it was. Two writers of one path leave one whole file."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), _mode_for(target))
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_folder(target.parent)


def _mode_for(target: Path) -> int:
    """The mode the file keeps (an existing regular file's, never a link's target's), or the one the umask gives
    a new file."""
    try:
        info = os.lstat(target)
    except OSError:
        info = None
    if info is None or not stat.S_ISREG(info.st_mode):
        return 0o666 & ~_umask()
    return stat.S_IMODE(info.st_mode) & 0o777


def _umask() -> int:
    """This process's umask, read without changing it (os.umask sets it, racing other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def fsync_folder(folder: str | Path) -> None:
    """Make a rename or a new file in `folder` durable (some file systems cannot sync a folder: skipped)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


# --- input files ----------------------------------------------------------------------------------------

def read_input_text(path: str | Path, max_bytes: int, *, follow_links: bool = True) -> str:
    """The text of an input file, or UnreadableFile with a one-line reason: not there, a folder, not a regular
    file (a FIFO would block the read until someone writes it, /dev/zero never ends), more than `max_bytes`, or
    not UTF-8. Links are followed (a sweep file may be a link to a shared one) unless `follow_links` is False:
    a results folder's own files are never links (one could point at any file of the user's, which a report or
    a tracker would then show or upload)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:  # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer
        fd = os.open(path, flags)
    except OSError as err:
        if not follow_links and err.errno == errno.ELOOP:
            raise UnreadableFile("is a link, not a file of the folder's own") from None
        raise UnreadableFile(_open_reason(err)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UnreadableFile("is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile("is not a regular file (a FIFO, a device or a socket)")
        if info.st_size > max_bytes:
            raise UnreadableFile(f"is {info.st_size:,} bytes, more than the {max_bytes:,} allowed")
        data = _read_up_to(fd, max_bytes + 1)
    except OSError as err:
        raise UnreadableFile(f"cannot be read: {err.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:   # it grew while read
        raise UnreadableFile(f"is more than the {max_bytes:,} bytes allowed")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UnreadableFile(f"is not UTF-8 text (byte {err.start:,} is {data[err.start]:#04x})") from None


def read_input_lines(path: str | Path, max_bytes: int, *, follow_links: bool = True) -> Iterator[str]:
    """The lines of an input file (without their ends), read a chunk at a time: a large file (a trials.jsonl of
    hundreds of thousands of records) is never held whole. Refused as `read_input_text` refuses (UnreadableFile,
    raised before the first line or where the bytes stop being UTF-8, naming the byte)."""
    import codecs

    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if not follow_links and err.errno == errno.ELOOP:
            raise UnreadableFile("is a link, not a file of the folder's own") from None
        raise UnreadableFile(_open_reason(err)) from None
    info = os.fstat(fd)
    problem = ("is a directory, not a file" if stat.S_ISDIR(info.st_mode) else
               "is not a regular file (a FIFO, a device or a socket)" if not stat.S_ISREG(info.st_mode) else
               f"is {info.st_size:,} bytes, more than the {max_bytes:,} allowed" if info.st_size > max_bytes else None)
    if problem is not None:
        os.close(fd)
        raise UnreadableFile(problem)
    with os.fdopen(fd, "rb", buffering=0) as fh:
        decoder, pending, read = codecs.getincrementaldecoder("utf-8")(), "", 0
        while True:
            try:
                chunk = fh.read(1 << 20)
            except OSError as err:
                raise UnreadableFile(f"cannot be read: {err.strerror}") from None
            if read + len(chunk or b"") > max_bytes:   # it grew while read
                raise UnreadableFile(f"is more than the {max_bytes:,} bytes allowed")
            buffered = len(decoder.getstate()[0])   # the bytes of a character cut by the last chunk's end
            try:
                text = pending + decoder.decode(chunk or b"", final=not chunk)
            except UnicodeDecodeError as err:
                at = read - buffered + err.start
                raise UnreadableFile(f"is not UTF-8 text (byte {at:,} is {err.object[err.start]:#04x})") from None
            read += len(chunk or b"")
            lines = text.split("\n")
            pending = lines.pop()
            yield from lines
            if not chunk:
                if pending:
                    yield pending
                return


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _open_reason(err: OSError) -> str:
    return {errno.ENOENT: "file not found", errno.ENOTDIR: "a part of the path is a file, not a folder",
            errno.EACCES: "permission denied", errno.ELOOP: "too many levels of symbolic links",
            errno.ENAMETOOLONG: "the path is too long"}.get(err.errno or 0, f"cannot be opened: {err.strerror}")


def read_json_input(path: str | Path, max_bytes: int = MAX_JSON_BYTES, *, follow_links: bool = True) -> JsonValue:
    """A JSON input file, parsed; UnreadableFile (one line) for anything read_input_text refuses, text that
    is not JSON, or JSON nested too deeply for the parser (a RecursionError is not a traceback for the user)."""
    text = read_input_text(path, max_bytes, follow_links=follow_links)
    try:
        data: JsonValue = json.loads(text)
    except json.JSONDecodeError as err:
        raise UnreadableFile(f"not valid JSON ({err.msg} at line {err.lineno})") from None
    except RecursionError:
        raise UnreadableFile("JSON nested too deeply to read") from None
    return data


# --- the private work folder ----------------------------------------------------------------------------

def private_folder(path: str | Path) -> Path:
    """`path` as a folder only this user can enter, created (0700) if missing; UnsafeFolder when it exists
    and another user could change it: not a folder (a link to elsewhere), owned by someone else, or writable by
    the group or the world. Another user may create it first in /tmp, to read the ranks' files or plant links
    that the ranks would write through; a folder of ours that others may read is made private (0700)."""
    folder = Path(path)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as err:
        raise UnsafeFolder(f"work folder {folder}: cannot be created ({err.strerror})") from None
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFolder(f"work folder {folder} is not a folder (a link or a file another user may have put "
                           "there): remove it")
    if info.st_uid != os.getuid():
        raise UnsafeFolder(f"work folder {folder} is owned by uid {info.st_uid}, not by you (uid {os.getuid()}): "
                           "another user may read or change what orch writes there; remove it")
    if info.st_mode & 0o022:
        raise UnsafeFolder(f"work folder {folder} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}): "
                           "they may have put links in it; remove it")
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder


def private_dirs(folder: str | Path, root: Path) -> Path:
    """`folder` and every folder between it and `root` (a `private_folder`, checked) made 0700, creating
    what is missing; a part that exists already must be a folder of ours, not a link."""
    target = Path(folder)
    private_folder(root)
    relative = target.relative_to(root)
    current = root
    for part in relative.parts:
        current = current / part
        try:
            os.mkdir(current, 0o700)
        except FileExistsError:
            info = os.lstat(current)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                raise UnsafeFolder(f"{current} is not a folder of yours (a link or another user's)") from None
    return target


def create_private(path: str | Path) -> int:
    """A new file for writing, only this user's (0600): refused if anything is already there, a link included
    (O_EXCL; O_NOFOLLOW as well, for the link's own sake). The caller closes the descriptor."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def read_nofollow(path: str | Path, tail_bytes: int | None = None) -> bytes:
    """A file's bytes, or its last `tail_bytes` (a seek, not a read of the whole), never through a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file")
        if tail_bytes is not None:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - tail_bytes), os.SEEK_SET)
            return _read_up_to(fd, tail_bytes)
        return _read_up_to(fd, os.fstat(fd).st_size + (1 << 20))
    finally:
        os.close(fd)


# --- a script's folder ----------------------------------------------------------------------------------

# The Python files beside a training script that its fingerprint covers (what it may import from its folder):
# every *.py under the script's folder, but not in folders that hold no code of its own (hidden ones, caches,
# virtual environments), and at most this many files and bytes (a script at the root of a large repository).
SOURCES_SKIPPED = frozenset({"__pycache__", "venv", ".venv", "site-packages", "node_modules", "build", "dist"})
MAX_SOURCE_FILES = 2000
MAX_SOURCE_BYTES = 64 << 20


def python_sources_sha256(script: str | Path) -> str:
    """A SHA-256 over the Python files under the folder of `script`, the script itself left out (its own hash
    is apart): relative path and bytes of each, in sorted order; links are not followed, SOURCES_SKIPPED and
    hidden folders are left out; past MAX_SOURCE_FILES files or MAX_SOURCE_BYTES bytes, the rest is left out
    and the value says how many it covered ("<hash>:N files")."""
    import hashlib

    root = Path(script).parent
    found: list[str] = []
    for here, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SOURCES_SKIPPED)
        found += [os.path.relpath(os.path.join(here, f), root) for f in files if f.endswith(".py")]
        if len(found) > MAX_SOURCE_FILES:
            break
    digest, size, count = hashlib.sha256(), 0, 0
    for rel in sorted(f for f in found if f != Path(script).name)[:MAX_SOURCE_FILES]:
        try:
            data = read_nofollow(root / rel)
        except OSError:   # a link, a file gone meanwhile: not part of the folder's code
            continue
        size += len(data)
        if size > MAX_SOURCE_BYTES:
            break
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0" + hashlib.sha256(data).digest())
        count += 1
    return f"{digest.hexdigest()}:{count} files"
