"""oneCCL for real, in the environment `scripts/setup.sh --ipex --ccl` makes (torch 2.8 + the bindings built
from intel/torch-ccl against the registry's CPU-only oneCCL): `backend: auto` picks ccl, 2-rank training
and the all-reduce calibration run on it, and the records say what ran (version, CCL settings, worker cores).

Marked `ccl`. Where the bindings are not installed these tests skip; where they are installed but do not
import, or where ORCH_REQUIRE_CCL=1 says they must be there (CI's ccl step), they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
from conftest import CPUS, by_key, read_records, write_sweep

from orchestrator.cli import main
from orchestrator.core.execution.calibration import MESSAGE_BYTES
from orchestrator.core.planning.plan import CCL_MODULE
from orchestrator.io.backends import ccl_import_problem

REQUIRED = os.environ.get("ORCH_REQUIRE_CCL") == "1"
# Decided at collection, so that where the bindings are absent not even the module's Ray instance is started.
pytestmark = [pytest.mark.ccl, pytest.mark.ray, pytest.mark.needs_cpus(2), pytest.mark.skipif(
    importlib.util.find_spec(CCL_MODULE) is None and not REQUIRED,
    reason=f"{CCL_MODULE} is not installed (bash scripts/setup.sh --ipex --ccl builds it into .venv-ipex)")]

MEASURE = "measure: {warmup_steps: 2, timed_steps: 10, repeats: 2, peak: false}\n"


@pytest.fixture(autouse=True)
def ccl_here():
    """Fail where the bindings should work and do not (built for another torch, broken, or required and absent)."""
    problem = ccl_import_problem()
    if problem is not None:
        pytest.fail(f"oneCCL's bindings must work in this environment: {problem}")


def _ccl_sweep(tmp_path, name: str, ccl_workers: int, measure: str = MEASURE):
    """The classifier at 1 and 2 ranks of one thread, run by `orch sweep` with auto backend; the results
    folder and its records by key."""
    sweep = write_sweep(tmp_path, name, f"""
        workload: {{name: classifier, params: {{hidden: 128, train_samples: 2048}}}}
        grid: {{ranks: [1, 2], threads_per_rank: [1], local_batch: [16]}}
        constraints: {{ccl_workers: {ccl_workers}}}
        """ + measure)
    results = tmp_path / "results"
    assert main(["sweep", str(sweep), "--results", str(results), "--no-report"]) == 0
    return results, by_key(read_records(results))


def test_auto_picks_ccl_for_two_ranks_and_the_calibration(ray_local, tmp_path):
    # ccl_workers 0: two ranks of one core fit two CPUs; each rank's oneCCL worker shares its core
    results, records = _ccl_sweep(tmp_path, "ccl2", 0)
    env = json.loads((results / "environment.json").read_text())
    assert env["backend"]["chosen"] == "ccl" and env["oneccl_bindings_for_pytorch"] == "2.8.0+cpu"
    assert env["oneccl"] is not None
    two = records["r2-t1-b16"]
    assert two["status"] == "ok", two["reason"]
    assert two["backend"] == "ccl" and two["throughput"]["samples_per_s"] > 0
    comm = two["communication"]
    assert (comm["backend"], comm["version"], comm["oneccl"]) == ("ccl", "2.8.0+cpu", env["oneccl"])
    cores = [r["cpus"][0] for r in sorted(two["placement"], key=lambda r: r["local_rank"])]
    assert comm["env"]["CCL_WORKER_AFFINITY"] == ",".join(map(str, cores))   # each rank's own core, shared
    assert comm["worker_threads_on_cpu"] is None   # shared with the OpenMP thread: not told apart
    assert [comm["env"][k] for k in ("CCL_WORKER_COUNT", "CCL_ATL_TRANSPORT", "CCL_ATL_SHM", "CCL_YIELD")] == [
        "1", "ofi", "1", "sched_yield"]

    (cal,) = [r for r in records.values() if r["kind"] == "allreduce"]
    assert cal["status"] == "ok", cal["reason"]
    assert cal["backend"] == "ccl" and cal["communication"]["backend"] == "ccl"
    section = cal["allreduce"]
    assert section["algorithm"] == "ccl (auto)" and section["sizes_bytes"] == list(MESSAGE_BYTES)
    assert section["time_s"][-1] > 10 * section["time_s"][0]      # 64 MiB takes far longer than 4 KiB


def test_a_reserved_worker_core_is_pinned_apart_from_the_compute_core(ray_local, tmp_path):
    _, records = _ccl_sweep(tmp_path, "ccl1", 1, MEASURE.replace("peak: false", "peak: false, allreduce: false"))
    one = records["r1-t1-b16"]
    assert one["status"] == "ok", one["reason"]
    (placed,) = one["placement"]
    compute, worker = placed["cpus"], placed["ccl_cpus"]
    assert len(compute) == 1 and len(worker) == 1 and set(compute + worker) == set(CPUS[:2])
    assert one["communication"]["env"]["CCL_WORKER_AFFINITY"] == str(worker[0])
    assert "CCL_YIELD" not in one["communication"]["env"]
    # read back from the OS inside the rank: one thread (oneCCL's worker) bound to the worker core alone
    assert one["communication"]["worker_threads_on_cpu"] == {str(worker[0]): 1}
    # the rank's process may use both cores; its OpenMP thread is bound to the compute core only
    assert sorted(placed["observed_cpus"]) == sorted(compute + worker)
    # two ranks of one core would need 2 × (1 + 1) cores
    two = records["r2-t1-b16"]
    assert two["status"] == "infeasible" and "2 ranks × 2 cores = 4 > 2" in two["reason"]
