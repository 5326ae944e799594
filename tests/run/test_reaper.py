"""The watchdog's choice of processes (pure), and its reaping of real processes: what is the session's is
stopped, SIGTERM-deaf ones with SIGKILL; another session's process is left alone. No Ray needed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from orchestrator.constants import RAY_SESSION_TOKEN_ENV_VAR
from orchestrator.run.driver.reaper import ProcessInfo, Session, reap, select_victims

pytestmark = pytest.mark.slow   # real processes, seconds each: the second tier

SESSION = Session("4242-ab", "/tmp/ray/session_2026-01-01_00-00-00_000001_4242")


def test_selects_owned_processes_and_their_descendants_only():
    procs = [ProcessInfo(100, 1, True),     # raylet-like: owned
             ProcessInfo(101, 100, False),  # its worker, environment overwritten: a descendant
             ProcessInfo(102, 101, False),  # a rank under that worker
             ProcessInfo(200, 1, False),    # another user's or session's process
             ProcessInfo(201, 200, False),
             ProcessInfo(300, 1, True),     # an orphaned agent: owned
             ProcessInfo(400, 1, True)]     # the watchdog itself
    assert select_victims(procs, keep=[400]) == [100, 101, 102, 300]
    assert select_victims(procs[3:5]) == []


def test_kept_process_shields_its_descendants_not_owned_ones():
    procs = [ProcessInfo(10, 1, True), ProcessInfo(11, 10, False), ProcessInfo(12, 11, True)]
    assert select_victims(procs, keep=[11]) == [10, 12]


AGENT = ["ray::DashboardAgent", ""]   # Ray's title, written over the agent's command line


@pytest.mark.parametrize(("environ", "cmdline", "files", "owned"), [
    (b"\0\0\0RAY_NODE_ID=x\0ORCH_RAY_SESSION_TOKEN=4242-ab\0", AGENT, [], True),  # title over the start
    (b"ORCH_RAY_SESSION_TOKEN=4242-ab\0", ["python", "rank_main.py"], [], True),   # a rank: the token is enough
    (b"ORCH_RAY_SESSION_TOKEN=4242-abc\0", AGENT, [], False),                    # another session's token
    (b"X=ORCH_RAY_SESSION_TOKEN=4242-ab\0", AGENT, [], False),                   # not an entry of its own
    (b"", AGENT, [SESSION.directory + "/logs/dashboard_agent.log"], True),       # holds one of its log files
    (b"", ["/venv/ray/core/src/ray/raylet/raylet", "--session-dir=" + SESSION.directory], [], True),
    (b"", AGENT, [SESSION.directory + "1/logs/raylet.out"], False),              # a directory with a longer name
    (b"", AGENT, ["/tmp/ray/session_latest/logs/raylet.out"], False),
    # The user's own processes reading the session's logs are not Ray's: never stopped.
    (b"", ["tail", "-f", SESSION.directory + "/logs/raylet.out"], [SESSION.directory + "/logs/raylet.out"], False),
    (b"", ["/usr/bin/python3", "-c", "pass"], [SESSION.directory + "/logs/raylet.out"], False),
])
def test_owned_by_environment_token_or_a_ray_program_holding_session_files(environ, cmdline, files, owned):
    assert SESSION.owns(environ, cmdline, files) is owned


def _start(code: str, token: str | None, title: str = sys.executable) -> subprocess.Popen:
    """A Python process; `title` is its argv[0], as Ray's agents show `ray::DashboardAgent` there (its own
    sys.executable then is not ours: such a process must not start Python children)."""
    env = {k: v for k, v in os.environ.items() if k != RAY_SESSION_TOKEN_ENV_VAR}
    if token:
        env[RAY_SESSION_TOKEN_ENV_VAR] = token
    return subprocess.Popen([title, "-c", code], executable=sys.executable, env=env, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)


def test_reap_stops_the_session_and_spares_others(tmp_path):
    directory = tmp_path / "session_2026-01-01_00-00-00_000001_4242"
    (directory / "logs").mkdir(parents=True)
    session = Session(f"{os.getpid()}-reap-test", str(directory))
    parent = _start(  # a tagged process whose child's environment has no token: found as a descendant
        "import os, subprocess, sys, time\n"
        f"env = {{k: v for k, v in os.environ.items() if k != {RAY_SESSION_TOKEN_ENV_VAR!r}}}\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], env=env)\n"
        "print(child.pid, flush=True); time.sleep(60)", session.token)
    deaf = _start("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); "
                  "time.sleep(60)", session.token)
    hold_log = (f"import time; f = open({str(directory / 'logs' / 'agent.log')!r}, 'a'); print(1, flush=True); "
                "time.sleep(60)")
    holder = _start(hold_log, None, title="ray::DashboardAgent")   # an orphaned agent, its token overwritten
    reader = _start(hold_log, None)   # the user's own process reading the same log: not the session's
    other = _start("import time; print(1, flush=True); time.sleep(60)", "4242-another-session")
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        for p in (deaf, holder, reader, other):
            p.stdout.readline()   # started, and its signal handler or file in place
        start = time.monotonic()
        stopped = reap(session, keep=[os.getpid()], grace_s=1.0)
        took_s = time.monotonic() - start
        assert {int(line.split()[0]) for line in stopped} == {parent.pid, child.pid, deaf.pid, holder.pid}, stopped
        assert 1.0 <= took_s < 8   # the SIGTERM-deaf one waited out the grace, then got SIGKILL
        for p in (parent, deaf, holder):   # (their exit status went to reap's wait, as they are our children)
            p.wait(timeout=5)
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
        assert other.poll() is None and reader.poll() is None
    finally:
        for p in (parent, deaf, holder, reader, other):
            if p.poll() is None:
                p.kill()
            p.wait()


SHUTDOWN_SCRIPT = """
import os, sys, time, psutil, ray
from orchestrator.run.driver import cluster
assert cluster.connect(None)
def watchdogs():
    found = []
    for p in psutil.Process().children():
        try:
            if "orchestrator.run.driver.reaper" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.Error:
            pass
    return found
start = time.monotonic()
while not watchdogs() and time.monotonic() - start < 5:
    time.sleep(0.1)
watchdogs = watchdogs()
assert len(watchdogs) == 1, [(p.pid, p.status(), p.cmdline()) for p in psutil.Process().children()]
log = os.path.join(ray._private.worker.global_worker.node.get_session_dir_path(), "logs", "orch_reaper.log")
ray.shutdown()
start = time.monotonic()
while watchdogs[0].is_running() and watchdogs[0].status() != psutil.STATUS_ZOMBIE:
    assert time.monotonic() - start < 10, "the watchdog outlived ray.shutdown()"
    time.sleep(0.1)
print(open(log).read(), flush=True)
"""


@pytest.mark.ray
def test_ray_shutdown_stops_the_watchdog_while_the_driver_lives():
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    out = subprocess.run([sys.executable, "-c", SHUTDOWN_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "session ended" in out.stdout and "stopped" not in out.stdout
