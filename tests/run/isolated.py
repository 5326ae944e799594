"""Run a shell script in a PID namespace of its own, then list the processes it left behind.

`ray stop` stops every Ray process on the machine, and a cluster test must show that it (or a job script's own
shutdown) leaves nothing behind. On a shared machine another test's or user's Ray would be stopped too and
counted as a leftover. In a fresh PID namespace (`unshare --pid --fork --mount-proc`, needs root or user
namespaces) the script sees only its own processes; the network is still the machine's, so ports must be free.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

# Runs in the namespace after the script: every live process but the namespace's init (the wrapper shell) and
# this lister, polled for a few seconds because stopped processes take a moment to exit.
LEFTOVER_LISTER = """
import os, sys, time, psutil
deadline = time.monotonic() + float(sys.argv[1])
while True:
    left = [f"{p.pid} {' '.join(p.cmdline())}" for p in psutil.process_iter()
            if p.pid not in (1, os.getpid()) and p.status() != psutil.STATUS_ZOMBIE]
    if not left or time.monotonic() > deadline:
        break
    time.sleep(0.5)
print("\\n".join(left))
"""


@dataclass(frozen=True, slots=True)
class IsolatedRun:
    returncode: int        # the script's exit status
    output: str            # its stdout and stderr, interleaved
    leftover: list[str]    # "PID COMMAND LINE" of each process still alive in the namespace after it ended


@functools.cache
def two_ray_nodes_marks(what: str) -> list:
    """The marks of a test that starts two Ray nodes of one CPU each in a PID namespace of its own (`what`
    says which): a real Ray, two CPUs (a failure, not a skip, where ORCH_REQUIRE_CPUS says the runner has
    them), and a PID namespace, so that stopping its Ray cannot touch another Ray on the machine (a failure,
    not a skip, where ORCH_REQUIRE_PID_NAMESPACE=1 says the runner has one: tests/conftest.py)."""
    return [pytest.mark.ray, pytest.mark.needs_cpus(2),
            pytest.mark.needs_pid_namespace(f"needs a PID namespace (unshare --pid, as root or with user namespaces) "
                                            f"so that {what} cannot touch another Ray on the machine")]


def run_isolated(script: str, env: dict[str, str], timeout_s: float, settle_s: float = 10.0) -> IsolatedRun:
    """Run `script` (bash) in a new PID namespace; the processes left when it ends are listed, then killed
    with the namespace (the kernel ends every process of a namespace whose init exits)."""
    wrapper = (f'bash -c "$1" 2>&1; rc=$?; echo "@@leftover"; "{sys.executable}" -c "$2" {settle_s}; exit $rc')
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c", wrapper,
                           "isolated", script, LEFTOVER_LISTER],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout_s)
    output, _, leftover = proc.stdout.rpartition("@@leftover\n")
    return IsolatedRun(proc.returncode, output + proc.stderr, [line for line in leftover.splitlines() if line])
