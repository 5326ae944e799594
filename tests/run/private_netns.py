"""A test's own view of the machine's named network namespaces, for the tests of a bare `orch cluster down`.

`ip netns` keeps a namespace's name as a file under /run/netns, which every process on the machine sees: a test
that runs `orch cluster down` without a name, or with `--all`, there could remove a colleague's live emulated
cluster, or a benchmark's beside the suite. Here /run/netns is an empty tmpfs in a private mount namespace held
by one `sleep` (`unshare --mount --propagation private`), and every command that must see it is run through
`nsenter --mount` into it: `ip netns list` there lists only what the test made. The namespaces, veths, qdiscs and
processes are the kernel's own, as in any other emulated cluster; only their names are private.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

HOLDER = "mkdir -p /run/netns && mount -t tmpfs orch-test-netns /run/netns && echo ready && exec sleep 3600"


class PrivateNetns:
    """The mount namespace (held by `holder`) whose /run/netns only this test's namespaces are in."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", HOLDER],
                                       stdout=subprocess.PIPE, text=True)
        ready = self.holder.stdout.readline() if self.holder.stdout else ""
        if ready.strip() != "ready":
            self.holder.kill()
            raise RuntimeError(f"no private /run/netns: {ready!r}, exit {self.holder.wait()}")

    def argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` run where /run/netns is this test's own (in `cwd`: nsenter would start it in /)."""
        return ["nsenter", f"--target={self.holder.pid}", "--mount", f"--wd={self.cwd}", "--", *argv]

    def run(self, argv: Sequence[str], env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(argv), capture_output=True, text=True, timeout=timeout, env=env)

    def namespaces(self) -> list[str]:
        """`ip netns list` as this test sees it."""
        done = self.run(["ip", "netns", "list"])
        assert done.returncode == 0, done.stderr
        return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]

    def inode(self, namespace: str) -> int:
        """The namespace's inode: the same in every mount namespace, as /proc/PID/ns/net shows it."""
        return int(self.run(["stat", "-L", "-c", "%i", f"/run/netns/{namespace}"]).stdout)

    def close(self) -> None:
        """Every process in this test's namespaces killed, the namespaces deleted, the holder ended (only what the
        test made: nothing else is in this /run/netns)."""
        for namespace in self.namespaces():
            pids = self.run(["ip", "netns", "pids", namespace]).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.run(["ip", "netns", "delete", namespace])
        self.holder.kill()
        self.holder.wait()


def processes_in(inodes: set[int]) -> list[int]:
    """Every live process whose network namespace is one of these (by the namespace's inode), from /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino in inodes and not _zombie(pid):
                found.append(int(pid))
        except OSError:
            continue
    return found


def _zombie(pid: str) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_until_gone(inodes: set[int], timeout_s: float = 20) -> list[int]:
    """The processes still in these namespaces after up to `timeout_s` (stopped ones take a moment to exit)."""
    deadline = time.monotonic() + timeout_s
    while (left := processes_in(inodes)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
