"""`orch cluster`'s refusals, before it makes anything: exit 2 with what is missing or wrong, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator.cli import main


def test_without_ip_and_tc_it_names_what_is_missing(tmp_path):
    """A PATH without iproute2 (and, when not root, root itself): exit 2 listing every missing part at once."""
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "cluster", "up", "--nodes", "2",
                           "--cores-per-node", "1"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": str(tmp_path)})
    assert done.returncode == 2, done.stderr
    assert "orch cluster needs" in done.stderr and "`ip` (package iproute2)" in done.stderr
    assert "`tc` (package iproute2)" in done.stderr and "Traceback" not in done.stderr
    if os.geteuid() != 0:
        assert "root (network namespaces and tc need CAP_NET_ADMIN" in done.stderr


@pytest.mark.parametrize("argv, message", [
    (["--rate", "1gbps"], "rate '1gbps': a positive number and one of bit, kbit"),
    (["--latency", "soon"], "'soon' is not a duration"),
    (["--name", "Bad_Name"], "name 'Bad_Name': 1 to 8 lowercase letters"),
    (["--subnet", "8.8.8.0/24"], "not a private range"),
])
def test_bad_options_exit_2_with_the_reason(capsys, argv, message):
    code = main(["cluster", "up", "--nodes", "2", "--cores-per-node", "1", *argv])
    err = capsys.readouterr().err
    if code == 2 and "orch cluster needs" in err:
        pytest.skip(f"refused earlier for what this machine lacks: {err.strip()}")
    assert code == 2 and message in err, err


def test_more_cores_than_this_process_has_are_refused_before_anything_is_made(capsys):
    from orchestrator.run.driver.emulated import usable_cores

    cores = len(usable_cores())
    code = main(["cluster", "up", "--nodes", str(cores + 1), "--cores-per-node", "1"])
    err = capsys.readouterr().err
    if "orch cluster needs" in err:
        pytest.skip(f"refused earlier for what this machine lacks: {err.strip()}")
    assert code == 2 and f"= {cores + 1} > {cores} physical core(s)" in err and "--share-cores" in err, err
