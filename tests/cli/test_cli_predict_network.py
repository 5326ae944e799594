"""`orch predict` with the target's network stated in its topology file: the node axis costed from the statement
on every row that crosses nodes, and a time-to-train interval narrower than without it (the committed RetinaNet
folder, planned on four 2-socket nodes, with and without `network: {bandwidth_gbit_per_s: 25}`)."""

from __future__ import annotations

import json

from orchestrator.cli import main

FOLDER = "results/example-predict-retinanet"
RCP = "tests/data/rcp/rcps_retinanet.json"
TOPOLOGIES = "sweeps/topologies"


def plan(tmp_path, topology: str) -> dict:
    out = tmp_path / topology
    assert main(["predict", FOLDER, "--rcp", RCP, "--topology", f"{TOPOLOGIES}/{topology}.yaml", "--nodes", "4",
                 "--out", str(out)]) == 0
    return {(r["ranks"], r["threads_per_rank"], r["local_batch"]): r
            for r in json.loads((out / "prediction.json").read_text())["layouts"]}


def test_a_stated_link_costs_every_row_across_nodes_and_narrows_time_to_train(tmp_path, capsys):
    before, stated = plan(tmp_path, "cluster-4x2s28c"), plan(tmp_path, "cluster-4x2s28c-25gbe")
    capsys.readouterr()
    assert before.keys() == stated.keys() and all(r["nodes"] == 4 for r in stated.values())
    for key, row in stated.items():
        assert any(n.startswith("links across nodes costed from the topology file's statement, 25 Gbit/s, latency "
                                "10 µs") for n in row["notes"]), row["notes"]
        assert not any("no held-out level for nodes" in n for n in row["notes"])
        assert any("links across nodes were not calibrated" in n for n in before[key]["notes"])
        if row["hours_low"] is not None:
            assert row["hours_low"] < row["hours"] < row["hours_high"]
            assert row["hours_high"] / row["hours_low"] < before[key]["hours_high"] / before[key]["hours_low"]
