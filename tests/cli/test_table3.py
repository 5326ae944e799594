"""The shipped table3 sweep reproduces the published study's feasibility pattern on its machine, and docs/commands.md
shows that plan as `orch plan` prints it."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.cli import main

REPO = Path(__file__).resolve().parents[2]
TABLE3 = str(REPO / "sweeps" / "retinanet-table3.yaml")
SMT_SERVER = str(REPO / "sweeps" / "topologies" / "xeon-2s28c-smt.yaml")

# The study's Table 3 (2 sockets × 28 cores with SMT): threads per rank → the ranks that ran. Every other
# cell of ranks 1-16 × threads 7-56 is "–": ranks × threads would exceed the node's 112 hardware threads.
PUBLISHED_RUNNABLE = {7: {1, 2, 4, 8, 16}, 14: {1, 2, 4, 8}, 28: {1, 2, 4}, 56: {1, 2}}


def plan_json(capsys) -> dict:
    assert main(["plan", TABLE3, "--topology", SMT_SERVER, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_table3_plan_has_the_published_14_runnable_cells_and_6_dashes(capsys):
    plan = plan_json(capsys)
    assert plan["axes"] == {"ranks": [1, 2, 4, 8, 16], "threads_per_rank": [7, 14, 28, 56], "local_batch": [1, 2]}
    for batch in (1, 2):
        cells = {(t["threads_per_rank"], t["ranks"]): t for t in plan["trials"] if t["local_batch"] == batch}
        runnable = {(threads, ranks) for (threads, ranks), t in cells.items() if t["feasible"]}
        assert runnable == {(threads, r) for threads, ranks in PUBLISHED_RUNNABLE.items() for r in ranks}
        assert (len(runnable), len(cells) - len(runnable)) == (14, 6)
        for (threads, ranks), t in cells.items():
            if not t["feasible"]:  # only the core count stops them, never memory or the socket rule
                assert [r["message"] for r in t["reasons"]] == [
                    f"{ranks} ranks × {threads} cores = {ranks * threads} > 112 hardware threads on 1 node(s)"]


def test_table3_56_threads_per_rank_fill_one_socket_with_its_siblings(capsys):
    cell = next(t for t in plan_json(capsys)["trials"] if (t["ranks"], t["threads_per_rank"], t["local_batch"])
                == (2, 56, 1))
    first, second = cell["placement"]
    # socket 0 holds CPUs 0-27 and their siblings 56-83; socket 1 holds 28-55 and 84-111
    assert sorted(first["cpus"]) == list(range(0, 28)) + list(range(56, 84)) and first["socket"] == 0
    assert sorted(second["cpus"]) == list(range(28, 56)) + list(range(84, 112)) and second["socket"] == 1


def test_docs_show_the_table3_plan_as_printed(capsys):
    assert main(["plan", TABLE3, "--topology", SMT_SERVER]) == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    readme = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    block = readme.split("$ orch plan sweeps/retinanet-table3.yaml --topology sweeps/topologies/xeon-2s28c-smt.yaml\n",
                         1)[1].split("```", 1)[0].splitlines()
    start = printed.index(block[0])
    assert printed[start:start + len(block)] == block
