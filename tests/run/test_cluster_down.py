"""`orch cluster down` removes what a killed owner left and leaves a live owner's cluster (saying so, with the
owner's pid) unless asked by name or with `--all`; `orch cluster exec -- CMD` and `up -- CMD` report a command
killed by a signal, naming it, and exit 128 + N.

Real namespaces, veths, owner marks and processes: each cluster is made by a real owner process with the
functions `orch cluster up` uses (tests/run/cluster_owner.py, without Ray: seconds, not minutes), and is killed
with a signal the test sends. The truths are the OS's: `ip netns list` read back, the processes in a namespace
found by its inode in /proc, a pid's exit. A bare `down` and `--all` run in a private /run/netns
(tests/run/private_netns.py), so that they can only ever see the namespaces this test made.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from private_netns import PrivateNetns, processes_in, wait_until_gone

pytestmark = [pytest.mark.slow, pytest.mark.needs_netns("an emulated cluster needs network namespaces")]

ORCH = [sys.executable, "-m", "orchestrator.cli"]
OWNER = [sys.executable, str(Path(__file__).with_name("cluster_owner.py"))]


class Machine:
    """A private /run/netns, the owners started on it, and orch run there with a state folder of choice."""

    def __init__(self, tmp_path: Path) -> None:
        self.netns = PrivateNetns(REPO)
        self.tmp_path = tmp_path
        self.owners: list[subprocess.Popen[str]] = []

    def env(self, folder: str = "state") -> dict[str, str]:
        return {**os.environ, "ORCH_CLUSTER_STATE_DIR": str(self.tmp_path / folder)}

    def owner(self, name: str, folder: str = "state", detach: bool = False) -> subprocess.Popen[str]:
        """A cluster `name` made by a real owner process, once every namespace is made and marked."""
        proc = subprocess.Popen(self.netns.argv([*OWNER, name, *(["--detach"] if detach else [])]),
                                env=self.env(folder), stdout=subprocess.PIPE, text=True)
        self.owners.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.wait()
        return proc

    def kill(self, proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL

    def orch(self, *argv: str, folder: str = "state") -> subprocess.CompletedProcess[str]:
        return self.netns.run([*ORCH, *argv], env=self.env(folder))

    def of(self, name: str) -> list[str]:
        """Cluster `name`'s namespaces in `ip netns list`."""
        return sorted(ns for ns in self.netns.namespaces() if ns.startswith(f"orch-{name}-"))

    def inodes(self, name: str) -> set[int]:
        return {self.netns.inode(ns) for ns in self.of(name)}

    def close(self) -> None:
        for proc in self.owners:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.netns.close()


@pytest.fixture
def machine(tmp_path):
    made = Machine(tmp_path)
    yield made
    made.close()


def test_bare_down_removes_a_killed_owners_cluster_and_keeps_a_live_and_a_detached_one(machine, tmp_path):
    live, dead = machine.owner("live"), machine.owner("dead")
    detached = machine.owner("det", detach=True)
    assert detached.wait() == 0                  # `up --detach` returned; its cluster stays
    for name in ("live", "dead", "det"):
        assert machine.of(name) == [f"orch-{name}-n0", f"orch-{name}-n1", f"orch-{name}-sw"]
    inodes = {name: machine.inodes(name) for name in ("live", "dead", "det")}
    assert all(len(processes_in(inodes[name])) == 2 for name in inodes)   # a sleep in each node
    machine.kill(dead)

    down = machine.orch("cluster", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert machine.of("dead") == [] and wait_until_gone(inodes["dead"]) == []
    assert "1 process(es) in orch-dead-n0" in down.stdout and "namespace orch-dead-n0" in down.stdout
    assert f"kept cluster live: its owner, pid {live.pid}, is alive; `orch cluster down --name live`" in down.stdout
    assert f"kept cluster det: detached (made by `orch cluster up --detach`, pid {detached.pid}" in down.stdout
    assert len(machine.of("live")) == 3 and len(processes_in(inodes["live"])) == 2 and live.poll() is None
    assert len(machine.of("det")) == 3 and len(processes_in(inodes["det"])) == 2
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["det.json", "live.json"]

    named = machine.orch("cluster", "down", "--name", "live")     # by name: whatever its owner
    assert named.returncode == 0 and "namespace orch-live-sw" in named.stdout, named.stdout + named.stderr
    assert machine.of("live") == [] and wait_until_gone(inodes["live"]) == [] and len(machine.of("det")) == 3
    every = machine.orch("cluster", "down", "--all")
    assert every.returncode == 0 and "namespace orch-det-n1" in every.stdout, every.stdout + every.stderr
    assert machine.netns.namespaces() == [] and wait_until_gone(inodes["det"]) == []
    assert list((tmp_path / "state").iterdir()) == []
    again = machine.orch("cluster", "down")
    assert again.returncode == 0 and again.stdout.strip() == "nothing to remove: no emulated cluster"


def test_namespaces_no_state_file_here_lists_are_judged_by_their_owner_mark(machine):
    """Clusters made with another state folder (a colleague's, a benchmark's): `down` here finds only their
    namespaces, and their marks say whose they are. Without a mark (an older orch) the owner is unknown: kept."""
    other = machine.owner("other", folder="elsewhere")
    gone = machine.owner("gone", folder="elsewhere")
    machine.kill(gone)
    assert machine.netns.run(["ip", "netns", "add", "orch-old-n0"]).returncode == 0
    other_inodes, gone_inodes = machine.inodes("other"), machine.inodes("gone")

    down = machine.orch("cluster", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "namespace orch-gone-n0 (listed in no state file)" in down.stdout
    assert machine.of("gone") == [] and wait_until_gone(gone_inodes) == []
    assert f"kept cluster other: its owner, pid {other.pid}, is alive" in down.stdout
    assert "kept cluster old: its owner is unknown" in down.stdout
    assert machine.of("old") == ["orch-old-n0"] and machine.inodes("other") == other_inodes

    # `up` of the same name refuses before it makes anything: the live cluster keeps its namespaces
    up = machine.orch("cluster", "up", "--nodes", "1", "--cores-per-node", "1", "--name", "other")
    assert up.returncode == 1 and f"is up already (its owner, pid {other.pid}, is alive)" in up.stderr, up.stderr
    assert machine.inodes("other") == other_inodes and len(processes_in(other_inodes)) == 2

    for name in ("other", "old"):
        assert machine.orch("cluster", "down", "--name", name).returncode == 0
    assert machine.netns.namespaces() == [] and wait_until_gone(other_inodes) == []
    both = machine.orch("cluster", "down", "--name", "x", "--all")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_exec_reports_a_command_killed_by_a_signal_and_exits_128_plus_n(machine, tmp_path):
    machine.owner("sig")
    pid_file = tmp_path / "pid"
    command = subprocess.Popen(machine.netns.argv([*ORCH, "cluster", "exec", "--name", "sig", "--", "sh", "-c",
                                                   f"echo $$ > {pid_file}; exec sleep 600"]),
                               env=machine.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = int(pid_file.read_text())
    assert os.stat(f"/proc/{pid}/ns/net").st_ino == machine.netns.inode("orch-sig-n0")   # in the head's namespace
    os.kill(pid, signal.SIGTERM)
    _, err = command.communicate(timeout=60)
    assert command.returncode == 128 + signal.SIGTERM == 143, err
    assert "the command was killed by SIGTERM (signal 15): exit status 143" in err and "passed on" not in err

    plain = machine.orch("cluster", "exec", "--name", "sig", "--", "sh", "-c", "exit 3")
    assert plain.returncode == 3 and "killed" not in plain.stderr, plain.stderr
