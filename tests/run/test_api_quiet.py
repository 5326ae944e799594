"""`orch.sweep` in a Python session without a terminal prints nothing it was not asked for: no live display, no
notes, no Ray chatter, on stdout or stderr. What the sweep says as it goes (each trial as it ends too) is the
caller's to ask for: notices through `notify`, by default logged at INFO, shown once logging is configured.

A real sweep in a process of its own (its output piped, so not a terminal), with its own embedded Ray, run twice:
first as a notebook would call it, then again with `logging.basicConfig(level=logging.INFO)`."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import EMULATED_2S1C, read_records, write_sweep

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]

SWEEP = """
workload: {name: classifier, params: {hidden: 32, train_samples: 512}}
grid: {ranks: [1], threads_per_rank: [1], local_batch: [8, 16]}
measure: {warmup_steps: 1, timed_steps: 5, repeats: 1, peak: false, allreduce: false}
"""
SEPARATOR = "=== the caller configures logging ==="
SESSION = f"""
import logging, sys
import orch

sweep, topology, results = sys.argv[1:4]
first = orch.sweep(sweep, topology=topology, results=results, report=False)
print({SEPARATOR!r}, file=sys.stderr, flush=True)
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
again = orch.sweep(sweep, topology=topology, results=results, report=False, rerun=True)
assert first.summary.ran == again.summary.ran == 2, (first.summary, again.summary)
"""


def test_a_sweep_from_python_prints_nothing_until_asked(tmp_path):
    sweep = write_sweep(tmp_path, "quiet", SWEEP)
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-c", SESSION, str(sweep), str(EMULATED_2S1C), str(results)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    quiet, _, asked = done.stderr.partition(SEPARATOR)
    assert done.stdout == "" and quiet == "", (done.stdout[-2000:], quiet[-2000:])
    assert {r["status"] for r in read_records(results)} == {"ok"}
    # Asked for: the notices, as log records of the API's logger, each trial as it ended among them.
    assert "orch.api: sweep quiet: 2 of 2 grid points feasible" in asked
    assert "orch.api: [1/2] r1-t1-b8: ok: " in asked and "orch.api: [2/2] r1-t1-b16: ok: " in asked
