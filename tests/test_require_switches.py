"""The suite's ORCH_REQUIRE_* switches turn a skip into a failure: a runner that ought to have what a test needs
cannot pass CI by skipping it. Run as a separate pytest on a tiny test file, with what the test needs taken away."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

NEEDS_NAMESPACE = """
import pytest

@pytest.mark.needs_pid_namespace("needs a PID namespace for this test")
def test_in_a_namespace():
    pass
"""


def run_pytest(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    test = tmp_path / "test_needs.py"
    test.write_text(NEEDS_NAMESPACE)
    no_unshare = tmp_path / "bin"            # a PATH with python but without unshare: no PID namespace here
    no_unshare.mkdir(exist_ok=True)
    (no_unshare / "python").unlink(missing_ok=True)
    (no_unshare / "python").symlink_to(sys.executable)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-c", str(REPO / "pyproject.toml"),
                           "--rootdir", str(REPO), "-p", "no:cacheprovider", str(test)],
                          env={**os.environ, "PATH": str(no_unshare), "PYTHONPATH": str(REPO / "tests"), **env},
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_a_missing_pid_namespace_skips_the_test_and_says_how_to_make_it_a_failure(tmp_path):
    done = run_pytest(tmp_path, {"ORCH_REQUIRE_PID_NAMESPACE": "0"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout and "set ORCH_REQUIRE_PID_NAMESPACE=1 to make this a failure" in done.stdout


def test_orch_require_pid_namespace_makes_it_a_failure(tmp_path):
    done = run_pytest(tmp_path, {"ORCH_REQUIRE_PID_NAMESPACE": "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout and "skipped" not in done.stdout     # failed in its set-up, as needs_cpus does
    assert "ORCH_REQUIRE_PID_NAMESPACE=1 says this runner can make one" in done.stdout


NEEDS_NETNS = """
import pytest

@pytest.mark.needs_netns("an emulated cluster")
def test_in_network_namespaces():
    pass
"""


def run_netns_pytest(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The same, with a PATH that has python but neither `ip` nor `tc`: no emulated cluster can be made."""
    test = tmp_path / "test_needs_netns.py"
    test.write_text(NEEDS_NETNS)
    bare = tmp_path / "bin"
    bare.mkdir(exist_ok=True)
    (bare / "python").unlink(missing_ok=True)
    (bare / "python").symlink_to(sys.executable)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-c", str(REPO / "pyproject.toml"),
                           "--rootdir", str(REPO), "-p", "no:cacheprovider", str(test)],
                          env={**os.environ, "PATH": str(bare), "PYTHONPATH": str(REPO / "tests"), **env},
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_without_ip_and_tc_a_netns_test_skips_and_orch_require_netns_makes_it_a_failure(tmp_path):
    skipped = run_netns_pytest(tmp_path, {"ORCH_REQUIRE_NETNS": "0"})
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "1 skipped" in skipped.stdout and "set ORCH_REQUIRE_NETNS=1 to make this a failure" in skipped.stdout
    assert "`ip` (package iproute2)" in skipped.stdout
    failed = run_netns_pytest(tmp_path, {"ORCH_REQUIRE_NETNS": "1"})
    assert failed.returncode == 1 and "1 error" in failed.stdout, failed.stdout
    assert "ORCH_REQUIRE_NETNS=1 says this runner can make them" in failed.stdout
