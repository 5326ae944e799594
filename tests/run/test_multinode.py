"""Several Ray nodes on one machine (ray.cluster_utils.Cluster): topology detected on each node, bundles
placed on the nodes the placement chose."""

from __future__ import annotations

import os

import pytest
from conftest import CPUS, by_key, read_records, write_sweep

from orchestrator.cli import main

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]


@pytest.fixture(scope="module")
def two_nodes():
    import ray
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": len(CPUS), "include_dashboard": False})
    cluster.add_node(num_cpus=len(CPUS))
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    cluster.wait_for_nodes()
    node_ids = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    yield node_ids
    ray.shutdown()
    cluster.shutdown()


def test_ranks_too_big_to_share_a_node_run_one_per_node(two_nodes, tmp_path):
    threads = len(CPUS)  # a rank that fills a node's cores: two of them need two nodes
    sweep = write_sweep(tmp_path, "two-nodes", f"""
        workload: {{name: classifier, params: {{hidden: 64, train_samples: 2048}}}}
        grid: {{ranks: [1, 2], threads_per_rank: [1, {threads}], local_batch: [16]}}
        measure: {{warmup_steps: 2, timed_steps: 10, repeats: 1, peak: false}}
        """)
    results = tmp_path / "results"
    assert main(["sweep", str(sweep), "--results", str(results), "--no-report"]) == 0
    records = by_key(read_records(results))

    spread = records[f"r2-t{threads}-b16"]
    assert spread["status"] == "ok", spread["reason"]
    assert sorted(r["ray_node_id"] for r in spread["placement"]) == two_nodes  # really one rank per node
    assert [r["node"] for r in spread["placement"]] == [0, 1]
    for rank in spread["placement"]:
        assert set(rank["observed_cpus"]) == set(CPUS[:threads])

    across = records["allreduce-nodes-n2-fp32"]   # the calibration of the network: one rank per Ray node
    assert across["status"] == "ok", across["reason"]
    assert sorted(r["ray_node_id"] for r in across["placement"]) == two_nodes
    assert across["allreduce"]["link"] == "nodes" and len(across["allreduce"]["time_s"]) == 8

    packed = records["r2-t1-b16"]
    assert packed["status"] == "ok", packed["reason"]
    assert len({r["ray_node_id"] for r in packed["placement"]}) == 1  # fewest nodes: both ranks on one
    assert sorted(r["observed_cpus"][0] for r in packed["placement"]) == CPUS[:2]


def test_topology_file_naming_cpus_a_node_lacks_is_refused(two_nodes, tmp_path, capsys):
    topology = tmp_path / "too-big.yaml"
    topology.write_text("nodes: 2\nsockets: 2\ncores_per_socket: 28\nmemory_gib: 192\n")
    sweep = write_sweep(tmp_path, "small-sweep", """
        workload: {name: classifier}
        grid: {ranks: [1], threads_per_rank: [1], local_batch: [16]}
        """)
    code = main(["sweep", str(sweep), "--topology", str(topology), "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot use" in err and "Traceback" not in err


def test_node_sized_trials_run_concurrently_one_per_node(two_nodes, tmp_path):
    """measure.isolation: node (the default): each throughput trial has a node to itself, and trials planned on
    the same node move to the other, alike one, so the two run at the same time."""
    from datetime import datetime

    threads = len(CPUS)
    sweep = write_sweep(tmp_path, "concurrent", f"""
        workload: {{name: classifier, params: {{hidden: 64, train_samples: 2048}}}}
        grid: {{ranks: [1], threads_per_rank: [{threads}], local_batch: [16, 32]}}
        measure: {{warmup_steps: 2, timed_steps: 200, repeats: 2, peak: false, allreduce: false}}
        """)
    results = tmp_path / "results"
    assert main(["sweep", str(sweep), "--results", str(results), "--no-report"]) == 0
    trials = [r for r in read_records(results) if r["kind"] == "throughput"]
    assert len(trials) == 2 and all(t["status"] == "ok" for t in trials), trials
    assert sorted(t["placement"][0]["ray_node_id"] for t in trials) == two_nodes
    assert sorted(t["placement"][0]["node"] for t in trials) == [0, 1]
    spans = [(start, start + t["wall_s"]) for t in trials
             for start in (datetime.fromisoformat(t["started_at"].replace("Z", "+00:00")).timestamp(),)]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], f"not concurrent: {spans}"
