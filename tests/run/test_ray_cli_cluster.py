"""Two Ray nodes started with Ray's own CLI, as on a real cluster: `ray start --head` and `ray start --address`,
separate raylets on this machine with a CPU and a label each. `orch topology --address` and `orch sweep
--address` run against them; then `ray stop` must leave nothing behind. All in a PID namespace of its own, so
that `ray stop` (which stops every Ray process it can see) cannot touch another test's Ray."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import CPUS, REPO, read_records, write_sweep
from isolated import run_isolated, two_ray_nodes_marks

pytestmark = two_ray_nodes_marks("`ray stop`")

BIN = Path(sys.executable).parent
# Ports apart from Ray's defaults and from the SLURM stand-in's; both raylets on loopback.
SCRIPT = """
set -u
export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token RAY_AUTH_TOKEN=orch-test-$$-$RANDOM
common="--num-cpus=1 --node-ip-address=127.0.0.1 --disable-usage-stats"
taskset -c {cpu0} {ray} start --head --port=26000 --include-dashboard=false --temp-dir={tmp}/n0 $common \\
  --labels=orch-test-node=head --node-manager-port=26001 --object-manager-port=26002 \\
  --min-worker-port=26100 --max-worker-port=26199 || exit 10
taskset -c {cpu1} {ray} start --address=127.0.0.1:26000 --temp-dir={tmp}/n1 $common \\
  --labels=orch-test-node=second --node-manager-port=27001 --object-manager-port=27002 \\
  --min-worker-port=27100 --max-worker-port=27199 || exit 11
export PYTHONPATH={repo}
orch="{python} -m orchestrator.cli"
$orch topology --address 127.0.0.1:26000 --min-nodes 2 --json > {out}/topology.json || exit 12
$orch sweep {sweep} --address 127.0.0.1:26000 --min-nodes 2 --results {out}/results --no-report --json \\
  > {out}/sweep.out; status=$?
{python} -c "import json, ray; ray.init(address='127.0.0.1:26000', logging_level='ERROR'); \\
print(json.dumps({{n['NodeID']: n.get('Labels', {{}}).get('orch-test-node') for n in ray.nodes()}}))" \\
  > {out}/labels.json
{ray} stop > {out}/stop.out 2>&1
exit $status
"""


def test_sweep_on_two_cli_started_nodes_spreads_ranks_and_ray_stop_leaves_nothing(tmp_path):
    import tempfile

    sweep = write_sweep(tmp_path, "ray-cli", """
        workload: {name: classifier, params: {hidden: 32, train_samples: 512}}
        grid: {ranks: [2], threads_per_rank: [1], local_batch: [16]}
        measure: {warmup_steps: 2, timed_steps: 10, repeats: 1, peak: false, allreduce: false}
        """)
    with tempfile.TemporaryDirectory(prefix="orch-ray2-", dir="/tmp") as ray_tmp:   # short: socket paths
        run = run_isolated(SCRIPT.format(cpu0=CPUS[0], cpu1=CPUS[1], ray=BIN / "ray", python=sys.executable,
                                         repo=REPO, tmp=ray_tmp, out=tmp_path, sweep=sweep), {}, timeout_s=400)
    assert run.returncode == 0, run.output
    assert run.leftover == [], f"`ray stop` left processes behind:\n{run.leftover}"

    topology = json.loads((tmp_path / "topology.json").read_text())
    assert [[cpu for socket in n["sockets"] for core in socket for cpu in core] for n in topology["nodes"]] \
        == [[CPUS[0]], [CPUS[1]]]                   # each node planned on the CPU its raylet may use

    (trial,) = read_records(tmp_path / "results")
    assert trial["key"] == "r2-t1-b16" and trial["status"] == "ok", trial
    labels = json.loads((tmp_path / "labels.json").read_text())
    placement = trial["placement"]
    assert [r["node"] for r in placement] == [0, 1]                                   # as the plan says
    assert sorted(labels[r["ray_node_id"]] for r in placement) == ["head", "second"]  # really one per raylet
    assert [r["observed_cpus"] for r in placement] == [[CPUS[0]], [CPUS[1]]]
