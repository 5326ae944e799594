"""One sweep per results folder: an exclusive lock on a file in the folder, held by the driver for the whole
sweep, taken before Ray starts so that a refused second sweep costs nothing.

Two sweeps on one folder would both run every trial, pin their ranks to the same cores (each disturbing the
other's figures) and append duplicate ok records. The second one is refused at once (exit 2), naming the holder
(host, pid, start time), which the holder writes into the lock file.

The lock is `fcntl.flock`, hand-written here rather than taken from a package such as `filelock` (which makes
the same call on Unix): the lock is not optional, so it may not depend on an optional package, and what orch
needs around the call is its own either way: the holder's line in the file, the takeover of a lock left by a
dead process said in one line, and the check that the file locked is still the one at the path. The kernel
releases a flock when its holder dies, however it dies (SIGKILL included), so a lock left by a dead process is
only its line left in the file, never a held lock: the next sweep takes it over at once and says so. On NFS,
Linux carries flock over as a POSIX lock on the server, so the lock also holds between the nodes of a cluster
that share the results folder. Released, the lock file is removed (while still locked, so that a process that
opened it meanwhile sees that the file it locked is no longer the one at the path, and tries again).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from orchestrator.errors import InputError

LOCK_FILE = "sweep.lock"
_HOLDER_MAX_BYTES = 4096
HOLDER_WAIT_S = 2.0     # how long a refused process waits for the holder's line (the holder writes it at once)


class FolderInUse(InputError):
    """Another live process holds the folder's lock (bad input: exit 2)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds (or held) a lock: written as one JSON line into the lock file."""

    host: str
    pid: int
    started_at: str         # UTC, ISO 8601
    command: str = ""

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host}, started {self.started_at}" + (
            f" ({self.command})" if self.command else "")

    @staticmethod
    def now() -> Holder:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return Holder(socket.gethostname(), os.getpid(), started, " ".join(["orch", *redacted(sys.argv[1:])])[:200])

    @staticmethod
    def parse(text: str) -> Holder | None:
        try:
            data = json.loads(text)
            return Holder(str(data["host"]), int(data["pid"]), str(data["started_at"]), str(data.get("command", "")))
        except (ValueError, TypeError, KeyError, RecursionError):
            return None


def redacted(argv: list[str]) -> list[str]:
    """The command line as the lock file keeps it: every URI (a tracking server's may carry a user and a
    password, `--mlflow-uri https://me:pw@host`) and the value of --mlflow-uri left out (a path to a store too).

    >>> redacted(["sweep", "s.yaml", "--mlflow-uri", "http://u:pw@h:5000", "--address=ray://h:10001"])
    ['sweep', 's.yaml', '--mlflow-uri', '<uri>', '--address=<uri>']
    """
    out: list[str] = []
    for i, arg in enumerate(argv):
        if "://" in arg or (i > 0 and argv[i - 1] == "--mlflow-uri" and not arg.startswith("-")):
            arg = f"{arg.partition('=')[0]}=<uri>" if arg.startswith("--") and "=" in arg else "<uri>"
        out.append(arg)
    return out


def _describe(text: str) -> str:
    holder = Holder.parse(text)
    if holder is not None:
        return holder.describe()
    return "an unknown holder" + (f" (the lock file says {text.strip()[:80]!r})" if text.strip() else "")


class FolderLock:
    """The lock of one results folder. `acquire` takes it or raises FolderInUse; `release` gives it back.
    `created_folder`: the folder did not exist before the lock made it (release removes it again if empty)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.created_folder = False
        self._fd: int | None = None

    def acquire(self) -> str | None:
        """Take the lock; return the line to say when it took over one left by a process that is gone."""
        if not self.folder.exists():
            self.folder.mkdir(parents=True)
            self.created_folder = True
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)   # only its user's
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise
                text = _holder_line(fd)
                os.close(fd)
                raise FolderInUse(f"results folder {self.folder} is in use by another orch sweep: {_describe(text)}; "
                                  "wait for it to end, or give this sweep another --results folder") from None
            if _same_file(fd, self.path):
                break
            os.close(fd)   # the holder released (and removed) it between our open and our lock: again
        self._fd = fd
        left = _read(fd)
        line = (json.dumps(asdict(Holder.now())) + "\n").encode()
        os.pwrite(fd, line, 0)           # written, then cut to length: the file is never empty between
        os.ftruncate(fd, len(line))
        os.fsync(fd)
        if not left.strip():
            return None
        return (f"took over the lock of results folder {self.folder} left by {_describe(left)}, which ended "
                "without releasing it")

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None
        if self.created_folder:
            with contextlib.suppress(OSError):   # only if empty: a sweep that wrote nothing leaves nothing
                self.folder.rmdir()


def _holder_line(fd: int, wait_s: float = HOLDER_WAIT_S) -> str:
    """The holder's line, read by a refused process. The holder writes it just after taking the lock, so a
    process refused in that gap finds the file still empty (a new lock file) or unreadable: it looks again for a
    moment rather than name "an unknown holder" for a live sweep."""
    deadline = time.monotonic() + wait_s
    text = _read(fd)
    while Holder.parse(text) is None and time.monotonic() < deadline:
        time.sleep(0.02)
        text = _read(fd)
    return text


def _read(fd: int) -> str:
    return os.pread(fd, _HOLDER_MAX_BYTES, 0).decode("utf-8", "replace")


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)
