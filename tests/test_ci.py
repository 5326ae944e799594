""".ci/run's handling of what did not run: a oneCCL build without its source skips the ccl tests, loudly (a banner
at once and a summary as CI's last lines), and fails CI where ORCH_REQUIRE_CCL_BUILD=1 says it must build."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CI = REPO / ".ci" / "run"


def ccl_step(rc: int, **env: str) -> subprocess.CompletedProcess:
    """.ci/run's ccl step and its summary, on a build that exited with `rc`."""
    script = (f"source .ci/lib.sh; ccl=0; ci_ccl_outcome {rc} || ccl=$?; echo \"step=$ccl\"; "
              "if [ \"$ccl\" != 2 ]; then ci_summary; fi")
    return subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "ORCH_REQUIRE_CCL_BUILD": "0", **env})


def test_a_ccl_build_without_source_is_skipped_loudly_and_summed_up_last():
    done = ccl_step(3)
    assert "step=1" in done.stdout
    assert "# ci: SKIPPED: the ccl tests" in done.stderr and "no torch-ccl source here" in done.stderr
    assert "#" * 100 in done.stderr                                             # a banner, not a line
    last = done.stdout.strip().splitlines()[-2:]
    assert last[0] == "ci: PASSED WITH 1 PART(S) SKIPPED: NOT EVERYTHING WAS TESTED"
    assert last[1].startswith("ci: SKIPPED: the ccl tests")


def test_a_runner_that_must_build_ccl_fails_without_its_source():
    done = ccl_step(3, ORCH_REQUIRE_CCL_BUILD="1")
    assert "step=2" in done.stdout and "ci: FAILED" in done.stderr and "ci: PASSED" not in done.stdout


def test_a_built_ccl_runs_its_tests_and_a_broken_build_fails():
    built = ccl_step(0)
    assert "step=0" in built.stdout and built.stdout.strip().endswith("ci: PASSED: every part ran")
    broken = ccl_step(1)
    assert "step=2" in broken.stdout and "exited with status 1" in broken.stderr


def test_ci_ends_with_its_summary_and_requires_what_its_runner_has():
    text = CI.read_text()
    assert text.rstrip().splitlines()[-1] == "ci_summary"
    assert "ci_ccl_outcome \"$ccl_rc\"" in text and "ORCH_REQUIRE_CCL=1 .venv-ipex/bin/python -m pytest -m ccl" in text
    for switch in ("ORCH_REQUIRE_CPUS=2", "ORCH_REQUIRE_PID_NAMESPACE=1", "ORCH_REQUIRE_TMPFS=1", "ORCH_REQUIRE_NETNS=1"):
        assert switch in text


def test_test_modules_have_unique_names():
    """Test folders are not packages, so two modules with one name stop the whole run at collection ('import file
    mismatch'): it happened twice when branches each added a module of a name the other had."""
    names: dict[str, list[str]] = {}
    for path in (REPO / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
