"""clusters/slurm/orch-sweep.sbatch end to end under a local stand-in for SLURM (tests/run/slurm_standin): two
"nodes" on this machine with a CPU each, a Ray head and a worker started by the script, a tiny sweep through
`orch sweep --address`, and nothing of Ray left when the job ends. The scheduler is the only thing absent."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import CPUS, REPO, read_records, write_sweep
from isolated import run_isolated, two_ray_nodes_marks

pytestmark = two_ray_nodes_marks("stopping this job's Ray")

SCRIPT = REPO / "clusters" / "slurm" / "orch-sweep.sbatch"
STANDIN = Path(__file__).parent / "slurm_standin"
# A rank per CPU, so two ranks need both stand-in nodes; allreduce and peak off: the smallest real trial.
TINY_SWEEP = """
workload: {name: classifier, params: {hidden: 32, train_samples: 512}}
grid: {ranks: [1, 2], threads_per_rank: [1], local_batch: [16]}
measure: {warmup_steps: 2, timed_steps: 10, repeats: 1, peak: false, allreduce: false}
"""


def orch_command(folder: Path) -> Path:
    """`orch` as a command on PATH would be, running this checkout's code with the test's interpreter."""
    path = folder / "orch"
    path.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m orchestrator.cli "$@"\n')
    path.chmod(0o755)
    return path


def standin_env(tmp_path: Path, ray_tmp: str) -> dict[str, str]:
    return {
        "PATH": f"{STANDIN}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "ORCH": str(orch_command(tmp_path)),
        "RAY": str(Path(sys.executable).parent / "ray"),
        "ORCH_STANDIN_NODE_CPUS": f"{CPUS[0]};{CPUS[1]}",
        # Both "nodes" share this host: each its own port range (stride) and loopback address. Ports away from
        # Ray's defaults and from other tests' instances.
        "ORCH_RAY_PORT_BASE": "24000", "ORCH_RAY_PORT_STRIDE": "1000",
        "ORCH_RAY_HEAD_IP": "127.0.0.1", "ORCH_RAY_NODE_IP": "127.0.0.1",
        "ORCH_RAY_TMP": ray_tmp,
    }


def test_sbatch_script_runs_a_sweep_on_two_nodes_and_stops_ray_everywhere(tmp_path):
    sweep = write_sweep(tmp_path, "slurm-standin", TINY_SWEEP)
    results = tmp_path / "shared" / "results"
    # Short: Ray's socket paths live under it and must stay under 108 bytes.
    with tempfile.TemporaryDirectory(prefix="orch-slurm-", dir="/tmp") as ray_tmp:
        run = run_isolated(f"sbatch --nodes=2 --job-id=4242 '{SCRIPT}' '{sweep}' '{results}' --no-report --json",
                           standin_env(tmp_path, ray_tmp), timeout_s=400)
        logs = sorted(p.name for p in Path(ray_tmp).glob("n*"))
    assert run.returncode == 0, run.output
    assert run.leftover == [], f"processes left after the job:\n{run.leftover}\n{run.output}"
    assert logs == ["n0", "n1"]                      # a temp dir per node, under the job's own folder
    assert "job 4242, 2 node(s): standin0 standin1; Ray head at 127.0.0.1:24000" in run.output
    assert "Ray stopped on 2 node(s)" in run.output

    records = {r["key"]: r for r in read_records(results)}
    assert set(records) == {"r1-t1-b16", "r2-t1-b16"}, run.output
    assert all(r["status"] == "ok" for r in records.values()), records
    spread = records["r2-t1-b16"]["placement"]
    assert [r["node"] for r in spread] == [0, 1]       # one rank per stand-in node, as planned
    assert len({r["ray_node_id"] for r in spread}) == 2
    assert sorted(cpu for r in spread for cpu in r["observed_cpus"]) == CPUS[:2]
    topology = json.loads((results / "topology.json").read_text())
    assert len(topology["nodes"]) == 2               # planned on both nodes, each detected on itself


@pytest.mark.parametrize("signalled", ["job", "script"])
def test_a_cancelled_job_keeps_finished_trials_and_stops_ray_everywhere(tmp_path, signalled):
    """job: `scancel` signals every process of the job with SIGTERM at once (the script, orch, each node's Ray),
    here `kill -TERM -1` from the namespace's init, which reaches every process in it but the caller. Ray dies
    under orch, so the running trial is lost; the finished ones are on disk already.
    script: `--signal=B:TERM@120` before the time limit signals the script alone; it stops orch first (which
    stops its trials and says what it kept, as after Ctrl-C), then Ray on each node."""
    sweep = write_sweep(tmp_path, "slurm-cancel", """
        workload: {name: classifier, params: {hidden: 32, train_samples: 512}}
        grid: {ranks: [1, 2], threads_per_rank: [1], local_batch: [8, 16, 32]}
        measure: {warmup_steps: 2, timed_steps: 300, repeats: 2, peak: false, allreduce: false}
        """)
    results = tmp_path / "results"
    records = results / "trials.jsonl"
    kill = "kill -TERM -1" if signalled == "job" else "kill -TERM $job"
    script = f"""
        sbatch --nodes=2 --job-id=4343 '{SCRIPT}' '{sweep}' '{results}' --no-report --json &
        job=$!                       # the stand-in's sbatch execs the job script: this is its shell
        for _ in $(seq 600); do [ -s '{records}' ] && break; sleep 0.5; done
        sleep 2                      # into the next trial, its ranks running
        trap '' TERM                 # this shell is the scheduler here, not part of the job
        {kill}
        wait $job
    """
    with tempfile.TemporaryDirectory(prefix="orch-slurm-", dir="/tmp") as ray_tmp:
        run = run_isolated(script, standin_env(tmp_path, ray_tmp), timeout_s=400)
    assert run.returncode == 143, run.output              # the job script's own status for SIGTERM
    assert run.leftover == [], f"processes left after the signal:\n{run.leftover}\n{run.output}"
    assert "SIGTERM: stopping the sweep, keeping its finished trials" in run.output
    assert "Ray stopped on 2 node(s)" in run.output
    if signalled == "script":
        assert "interrupted:" in run.output, run.output    # orch's own Ctrl-C path, with Ray still up
    finished = read_records(results)
    assert 1 <= len(finished) < 6, run.output                # stopped mid-sweep, what finished kept
    assert all(r["status"] == "ok" for r in finished), finished
