"""A watchdog that ends an embedded Ray session, and the ranks it started, when the driver dies.

`orch sweep` without an address starts its own Ray. A driver killed with SIGKILL gets no chance to run
`ray.shutdown()`. Ray copes with part of that, but not all of it (Ray 2.60, seen by SIGKILLing a sweep's
driver mid-trial and listing what was left):

- gcs_server, raylet, the monitor, dashboard and log monitor die at once: Ray starts them with
  PR_SET_PDEATHSIG (its "kernel fate sharing"). Ray's own reaper (ray_process_reaper.py) is used only
  where that is unavailable, and it kills its whole process group, which here is the driver's.
- Workers (the rank launchers) exit about 2 s later, when they lose the raylet; each rank process exits
  within half a second of its launcher (run.rank.process watches it).
- `ray::DashboardAgent` and `ray::RuntimeEnvAgent` see the raylet's death at once, but before exiting they
  report it to the GCS, which is dead too, with a 60 s timeout (`publish_error_to_driver`): they held their
  memory, threads and log files for about 62 s. Ray has no option to skip that.

So when orch starts an embedded Ray it also starts this watchdog (`python -m orchestrator.run.driver.reaper`) in
its own session, so that whatever takes the driver down does not take the watchdog first. The driver holds
the write end of a pipe that is the watchdog's stdin: end of file means the driver is gone. The watchdog
then stops every process of the session: SIGTERM, a short grace, SIGKILL.

Which processes are the session's (`Session.owns`): a token, new for each embedded Ray, is put in the
driver's environment before `ray.init`, and everything the session starts inherits it: gcs_server and
raylet from the driver, agents and workers from the raylet, ranks from the driver's environment passed
through their launcher. Ray's agents and workers write their title over the start of their environment,
which may take the token with it, but each of them holds log files in Ray's session directory
(/tmp/ray/session_<time>_<driver pid>), unique to this session. So a process is the session's when its
environment carries the token, or it is one of Ray's programs (its command line says so: a `ray::` title,
raylet, gcs_server, or a script in Ray's package) and its command line or open files name the session
directory, or it descends from one that is. Command lines alone would not do (the agents' read
`ray::DashboardAgent`), nor pids recorded at start (workers and ranks come later; pids are reused), nor
files alone: the user's own `tail -f` of a Ray log holds one too, and it is not ours to stop. Other users'
processes are never looked at; other Ray instances and other sweeps, even the same user's, have another
token and directory.

A normal end stops the watchdog too: when the processes the session started first (the driver's children
when the watchdog starts: gcs_server, raylet, ...) are all gone while the driver lives, `ray.shutdown()`
has run, and the watchdog exits without touching anything.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import psutil

from orchestrator.constants import RAY_SESSION_TOKEN_ENV_VAR

log = logging.getLogger(__name__)

POLL_S = 1.0            # how often the watchdog looks whether the session has ended normally
GRACE_S = 2.0           # between SIGTERM and SIGKILL
PASSES = 3              # a launcher may start a rank while we stop the others: look again

_lifeline: int | None = None   # the driver's end of the pipe: open for as long as the driver lives


@dataclass(frozen=True, slots=True)
class Session:
    """How the watchdog recognises one embedded Ray session's processes."""

    token: str          # the value of RAY_SESSION_TOKEN_ENV_VAR in their environment
    directory: str      # Ray's session directory (/tmp/ray/session_<time>_<driver pid>): its logs are held open

    def owns(self, environ: bytes, cmdline: list[str], open_paths: Iterable[str]) -> bool:
        """Whether a process is the session's, from its raw /proc environ, its command line's words and the
        paths of its open files.

        >>> s = Session("42-ab", "/tmp/ray/session_1")
        >>> s.owns(b"\\0\\0HOME=/root\\0ORCH_RAY_SESSION_TOKEN=42-ab\\0", ["python"], [])
        True
        >>> s.owns(b"ORCH_RAY_SESSION_TOKEN=42-abc\\0", ["raylet"], ["/tmp/ray/session_10/logs/raylet.out"])
        False
        >>> s.owns(b"", ["ray::DashboardAgent", ""], ["/tmp/ray/session_1/logs/dashboard_agent.log"])
        True
        >>> s.owns(b"", ["tail", "-f", "/tmp/ray/session_1/logs/raylet.out"], [])
        False
        """
        if f"{RAY_SESSION_TOKEN_ENV_VAR}={self.token}".encode() in environ.split(b"\0"):
            return True
        if not is_ray_program(cmdline):
            return False
        directory = self.directory.rstrip("/")
        return any(directory + "/" in path or path == directory or path.endswith("=" + directory)
                   for path in [*cmdline, *open_paths])


RAY_BINARIES = ("raylet", "gcs_server")


def is_ray_program(cmdline: list[str]) -> bool:
    """Whether a command line is one of Ray's own processes: a worker or agent under its `ray::` title, one of
    Ray's binaries, or Python running a script or module of Ray's package.

    >>> is_ray_program(["ray::RuntimeEnvAgent", ""]), is_ray_program(["/venv/lib/ray/core/src/ray/raylet/raylet"])
    (True, True)
    >>> is_ray_program(["/venv/bin/python", "-u", "/venv/lib/python3.11/site-packages/ray/_private/log_monitor.py"])
    True
    >>> is_ray_program(["less", "/tmp/ray/session_1/logs/raylet.out"]), is_ray_program([])
    (False, False)
    """
    if not cmdline:
        return False
    if cmdline[0].startswith("ray::") or os.path.basename(cmdline[0]) in RAY_BINARIES:
        return True
    ray_package = f"site-packages{os.sep}ray{os.sep}"
    return any(ray_package in word for word in cmdline[1:3])


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    pid: int
    ppid: int
    owned: bool         # the session's by its environment or its files (Session.owns)


def select_victims(processes: Iterable[ProcessInfo], keep: Iterable[int] = ()) -> list[int]:
    """The pids to stop: every owned process and every descendant of one, except the pids in `keep` (and
    what descends only through them).

    >>> select_victims([ProcessInfo(10, 1, True), ProcessInfo(11, 10, False), ProcessInfo(12, 1, False),
    ...                 ProcessInfo(13, 11, False), ProcessInfo(14, 1, True)], keep=[14])
    [10, 11, 13]
    """
    processes = list(processes)
    children: dict[int, list[int]] = {}
    for p in processes:
        children.setdefault(p.ppid, []).append(p.pid)
    kept = set(keep)
    chosen: set[int] = set()
    stack = [p.pid for p in processes if p.owned]
    while stack:
        pid = stack.pop()
        if pid in chosen or pid in kept:
            continue
        chosen.add(pid)
        stack.extend(children.get(pid, []))
    return sorted(chosen)


def _read_proc(pid: int) -> tuple[bytes, list[str], list[str]]:
    """(environ, command line, open paths) of a process, from /proc. Not psutil's environ(): Ray's agents and
    workers write their title (`ray::DashboardAgent`) over the start of their environment's memory, and
    psutil's parser stops at the first empty entry; the entries after it are intact, when the title spared
    them."""
    environ = b""
    cmdline: list[str] = []
    paths: list[str] = []
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().decode(errors="replace").split("\0")
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                paths.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return environ, cmdline, paths


def _owned(pid: int, session: Session) -> bool:
    return session.owns(*_read_proc(pid))


def _processes(session: Session) -> dict[int, tuple[psutil.Process, ProcessInfo]]:
    """This user's processes, each marked whether it is the session's (other users' are never touched)."""
    uid = os.getuid()
    found = {}
    for proc in psutil.process_iter(["ppid", "uids"]):
        if proc.info["uids"] is not None and proc.info["uids"].real == uid:
            found[proc.pid] = (proc, ProcessInfo(proc.pid, proc.info["ppid"] or 0, _owned(proc.pid, session)))
    return found


def reap(session: Session, keep: Iterable[int] = (), grace_s: float = GRACE_S) -> list[str]:
    """Stop every process of the session (see `select_victims`): SIGTERM, then SIGKILL after `grace_s`.
    A line per process stopped."""
    stopped = []
    for _ in range(PASSES):
        found = _processes(session)
        victims = [found[pid][0] for pid in select_victims((info for _, info in found.values()), keep)]
        if not victims:
            break
        for proc in victims:
            with contextlib.suppress(psutil.Error):   # psutil checks the pid was not reused before it signals
                stopped.append(f"{proc.pid} {proc.name()}")
                proc.terminate()
        _, alive = psutil.wait_procs(victims, timeout=grace_s)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(alive, timeout=grace_s)
    return stopped


def _alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (a SIGKILLed driver stays a zombie until its parent reaps it)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def watch(driver_pid: int, session: Session, lifeline: int, poll_s: float = POLL_S) -> str:
    """Wait until the driver dies (end of file on `lifeline`: seen at once) or the session ends normally
    (seen within `poll_s`); return which: "driver gone" (killed, or exited before the end of its session was
    seen: either way whatever is left of the session is stopped) or "session ended"."""
    try:
        driver = psutil.Process(driver_pid)
    except psutil.NoSuchProcess:   # the driver died before we looked
        return "driver gone"
    try:
        started = [child for child in driver.children()   # gcs_server, raylet, ...: not this watchdog
                   if child.pid != os.getpid() and _owned(child.pid, session)]
    except psutil.Error:   # then only the driver's end tells
        started = []
    waiting_on = [lifeline]
    while True:
        ready, _, _ = select.select(waiting_on, [], [], poll_s)
        if ready and not os.read(lifeline, 4096):
            waiting_on = []   # end of file: the driver died, or a newer embedded Ray replaced its end
            deadline = time.monotonic() + poll_s   # a dying process closes its files before it is a zombie
            while _alive(driver) and time.monotonic() < deadline:
                time.sleep(0.02)
        if not _alive(driver):
            return "driver gone"
        if started and not any(_alive(p) for p in started):
            return "session ended"


@contextlib.contextmanager
def reaped_on_driver_death() -> Iterator[None]:
    """Around `ray.init` of an embedded Ray: mark what it will start, then start the watchdog over it. Nothing
    is watched when `ray.init` started no process (it joined an instance that is not ours)."""
    global _lifeline
    import ray

    token = f"{os.getpid()}-{uuid.uuid4().hex}"
    os.environ[RAY_SESSION_TOKEN_ENV_VAR] = token   # kept: the ranks get the driver's environment later
    yield
    node = ray._private.worker.global_worker.node   # Ray has no public call for the session directory
    if node is None:
        return
    session = Session(token, node.get_session_dir_path())
    if not any(_owned(child.pid, session) for child in psutil.Process().children()):
        return
    read_end, write_end = os.pipe()   # both close-on-exec: no other child of the driver holds the write end
    env = {k: v for k, v in os.environ.items() if k != RAY_SESSION_TOKEN_ENV_VAR}
    with open(os.path.join(session.directory, "logs", "orch_reaper.log"), "ab") as log:
        subprocess.Popen([sys.executable, "-m", "orchestrator.run.driver.reaper", str(os.getpid()), token,
                          session.directory], stdin=read_end, stdout=log, stderr=log, env=env, start_new_session=True)
    os.close(read_end)
    if _lifeline is not None:
        os.close(_lifeline)
    _lifeline = write_end


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Stop an embedded Ray session's processes when its driver dies.")
    parser.add_argument("driver_pid", type=int)
    parser.add_argument("token")
    parser.add_argument("session_dir")
    args = parser.parse_args(argv)
    # Its own process, its stdout a log file in Ray's session folder: a timestamp on every line.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%Y-%m-%d %H:%M:%S",
                        stream=sys.stdout)
    session = Session(args.token, args.session_dir)
    outcome = watch(args.driver_pid, session, sys.stdin.fileno())
    log.info("%s (driver pid %d)", outcome, args.driver_pid)
    if outcome == "driver gone":
        for line in reap(session, keep=[os.getpid()]):
            log.info("stopped %s", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
