"""Network namespaces, veth pairs, a bridge and tc qdiscs, made and removed with `ip` and `tc`; the emulated
cluster's state file; sockets opened inside a namespace. The plan of what to make is pure
(`orchestrator.core.machine.emulation`); this module only runs it. Everything it makes lives inside namespaces named
by the plan (orch-NAME-*): the host's own interfaces are never touched."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil

from orchestrator.constants import CLUSTER_STATE_DIR_ENV_VAR, DEFAULT_CLUSTER_STATE_DIR
from orchestrator.core.machine.emulation import OwnerMark, is_cluster_namespace
from orchestrator.errors import RunFailed
from orchestrator.io.files import private_folder, write_atomic

NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
COMMAND_TIMEOUT_S = 30.0
TERM_GRACE_S = 10.0

T = TypeVar("T")


class NetnsError(RunFailed):
    """An `ip` or `tc` command that failed, with its words."""


def missing_requirements() -> list[str]:
    """What this machine lacks to emulate a cluster, in words; empty when nothing is missing."""
    missing = []
    if os.geteuid() != 0:
        missing.append(f"root (network namespaces and tc need CAP_NET_ADMIN; this is uid {os.geteuid()})")
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("taskset", "util-linux")):
        if shutil.which(tool) is None:
            missing.append(f"`{tool}` (package {package})")
    return missing


def run(argv: Sequence[str], *, check: bool = True, timeout_s: float = COMMAND_TIMEOUT_S) -> str:
    """Run an `ip`/`tc` command; its output, or NetnsError with the command and its stderr."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    if check and done.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def in_namespace(namespace: str, argv: Sequence[str]) -> list[str]:
    """`argv` run inside a namespace."""
    return ["ip", "netns", "exec", namespace, *argv]


def namespaces() -> list[str]:
    """Every named network namespace (`ip netns list`)."""
    return [line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line.strip()]


def cluster_namespaces(name: str | None = None) -> list[str]:
    """The namespaces an emulated cluster (`name`, or any) made that exist now."""
    return [ns for ns in namespaces() if is_cluster_namespace(ns, name)]


def add_namespace(namespace: str, mark: OwnerMark) -> None:
    """A namespace with its loopback up, marked with its owner (`OwnerMark`: the loopback's alias)."""
    run(["ip", "netns", "add", namespace])
    run(["ip", "-n", namespace, "link", "set", "lo", "up"])
    run(["ip", "-n", namespace, "link", "set", "lo", "alias", mark.words()])


def owner_mark(namespace: str) -> OwnerMark | None:
    """The owner a namespace was marked with when it was made; None when it has no mark or is gone."""
    try:
        links = json.loads(run(["ip", "-n", namespace, "-j", "link", "show", "dev", "lo"]) or "[]")
    except (NetnsError, ValueError):
        return None
    return OwnerMark.parse(links[0].get("ifalias", "")) if links else None


def process_alive(pid: int, started: float) -> bool:
    """Whether process `pid` lives and is the one created at `started` (not another that reused its pid)."""
    try:
        return bool(psutil.Process(pid).create_time() == started)
    except psutil.Error:
        return False


def namespace_pids(namespace: str) -> list[int]:
    """Processes whose network namespace is this one (`ip netns pids`): everything a node started."""
    try:
        return [int(p) for p in run(["ip", "netns", "pids", namespace]).split()]
    except NetnsError:
        return []


def stop_processes(namespace: str, grace_s: float = TERM_GRACE_S) -> int:
    """SIGTERM every process in the namespace, SIGKILL what is left after `grace_s`; how many there were. Only
    processes inside it are signalled: another user's Ray on the host is in another namespace."""
    pids = namespace_pids(namespace)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while (left := namespace_pids(namespace)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while namespace_pids(namespace) and time.monotonic() < deadline:
        time.sleep(0.1)
    return len(pids)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def delete_namespace(namespace: str) -> None:
    """Remove a namespace: its links (a veth pair goes with either end), addresses and qdiscs go with it."""
    if namespace in namespaces():
        run(["ip", "netns", "delete", namespace])


def add_bridge(namespace: str, bridge: str) -> None:
    run(["ip", "-n", namespace, "link", "add", bridge, "type", "bridge"])
    run(["ip", "-n", namespace, "link", "set", bridge, "up"])


def add_node_link(switch_ns: str, bridge: str, switch_if: str, node_ns: str, node_if: str, address: str,
                  prefix_len: int) -> None:
    """A veth pair: one end on the bridge in the switch namespace, the other in the node's, with its address."""
    run(["ip", "-n", switch_ns, "link", "add", switch_if, "type", "veth", "peer", "name", node_if, "netns", node_ns])
    run(["ip", "-n", switch_ns, "link", "set", switch_if, "master", bridge])
    run(["ip", "-n", switch_ns, "link", "set", switch_if, "up"])
    run(["ip", "-n", node_ns, "addr", "add", f"{address}/{prefix_len}", "dev", node_if])
    run(["ip", "-n", node_ns, "link", "set", node_if, "up"])


def add_qdisc(namespace: str, device: str, qdisc: Sequence[str]) -> None:
    run(in_namespace(namespace, ["tc", "qdisc", "add", "dev", device, *qdisc]))


def qdiscs(namespace: str, device: str) -> str:
    """The qdiscs of a device as `tc qdisc show` says them."""
    return run(in_namespace(namespace, ["tc", "qdisc", "show", "dev", device]), check=False).strip()


def netem_available(namespace: str, device: str) -> bool:
    """Whether this kernel has netem: tried on the device, then removed (CONFIG_NET_SCH_NETEM is often off)."""
    tried = subprocess.run(in_namespace(namespace, ["tc", "qdisc", "add", "dev", device, "root", "netem", "delay",
                                                    "1us"]), capture_output=True, timeout=COMMAND_TIMEOUT_S)
    if tried.returncode != 0:
        return False
    run(in_namespace(namespace, ["tc", "qdisc", "del", "dev", device, "root"]), check=False)
    return True


# --- sockets inside a namespace ---------------------------------------------------------------------------

def within(namespace: str, make: Callable[[], T]) -> T:
    """`make()` called with this thread's network namespace switched to `namespace` (a thread of its own, so no
    other thread of this process changes namespace): a socket it creates stays in that namespace's stack."""
    libc = ctypes.CDLL(None, use_errno=True)
    values: list[T] = []                 # what make() returned, or
    errors: list[BaseException] = []     # what it raised, handed to the caller's thread

    def target() -> None:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        there = os.open(NETNS_DIR / namespace, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(there, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns into {namespace}: {os.strerror(err)}")
            try:
                values.append(make())
            finally:
                libc.setns(own, CLONE_NEWNET)
        except BaseException as err:  # handed to the caller's thread
            errors.append(err)
        finally:
            os.close(own)
            os.close(there)

    worker = threading.Thread(target=target, name=f"netns-{namespace}")
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return values[0]


def bulk_transfer(sender_ns: str, receiver_ns: str, receiver_address: str, nbytes: int,
                  timeout_s: float = 60.0) -> float:
    """Seconds to move `nbytes` over one TCP stream from one namespace to another (from the sender's first byte to
    the receiver's last)."""

    def listen() -> socket.socket:
        server = socket.create_server((receiver_address, 0))
        server.settimeout(timeout_s)
        return server

    server = within(receiver_ns, listen)
    port = server.getsockname()[1]
    done: dict[str, float] = {}

    def receive() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(timeout_s)
            buffer, got = bytearray(1 << 20), 0
            while (n := conn.recv_into(buffer)) > 0:
                got += n
            done["at"], done["bytes"] = time.perf_counter(), got

    receiver = threading.Thread(target=receive, name="bulk-receiver")
    receiver.start()
    try:
        client = within(sender_ns, lambda: socket.create_connection((receiver_address, port), timeout=timeout_s))
        chunk = memoryview(bytes(1 << 20))
        started = time.perf_counter()
        with client:
            left = nbytes
            while left > 0:
                client.sendall(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))
            client.shutdown(socket.SHUT_WR)
            receiver.join(timeout_s)
    finally:
        server.close()
    if done.get("bytes") != nbytes:
        raise NetnsError(f"bulk transfer {sender_ns} → {receiver_ns}: {done.get('bytes', 0)} of {nbytes} bytes arrived")
    return done["at"] - started


# --- the state file ---------------------------------------------------------------------------------------

def state_dir() -> Path:
    return Path(os.environ.get(CLUSTER_STATE_DIR_ENV_VAR, DEFAULT_CLUSTER_STATE_DIR))


@dataclass(slots=True)
class ClusterState:
    """Everything an emulated cluster made, written before each thing is made (so a SIGKILL between the two leaves
    a record of it): what `orch cluster down` removes, and what `orch cluster exec` joins."""

    name: str
    owner_pid: int
    owner_started: float                 # the owner's process creation time: a reused pid is not the owner
    head_address: str = ""
    token: str = ""                      # the Ray cluster's auth token (the file is private to root)
    temp_dir: str = ""
    link: str = ""                       # the link in words
    nodes: list[dict[str, Any]] = field(default_factory=list)   # index, namespace, address, cpus
    namespaces: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)              # "namespace:device"
    qdiscs: list[str] = field(default_factory=list)             # "namespace:device: qdisc args"
    processes: list[int] = field(default_factory=list)          # the `ray start` processes
    measured: list[dict[str, Any]] = field(default_factory=list)   # LinkMeasure fields
    detached: bool = False

    @property
    def path(self) -> Path:
        return state_dir() / f"{self.name}.json"

    def save(self) -> None:
        private_folder(state_dir())
        write_atomic(self.path, json.dumps(asdict(self), indent=1) + "\n")
        os.chmod(self.path, 0o600)

    def owner_alive(self) -> bool:
        return process_alive(self.owner_pid, self.owner_started)

    def mark(self) -> OwnerMark:
        """What each of its namespaces is marked with."""
        return OwnerMark(self.owner_pid, self.owner_started, self.detached)

    @staticmethod
    def load(path: Path) -> ClusterState:
        return ClusterState(**json.loads(path.read_text()))


def saved_states() -> list[ClusterState]:
    """Every cluster with a state file, by name (an unreadable file is skipped: `down` still finds its
    namespaces by name)."""
    folder = state_dir()
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out.append(ClusterState.load(path))
        except (OSError, ValueError, TypeError):
            continue
    return out


def owner_identity() -> tuple[int, float]:
    me = psutil.Process()
    return me.pid, me.create_time()
