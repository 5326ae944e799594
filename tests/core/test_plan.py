"""make_plan: the table3 grid on the 2-socket 28-core SMT server, backends, memory budgets, convergence runs,
and the plan's tables and JSON."""

from __future__ import annotations

import json

import pytest

from orchestrator.core.planning.constraints import BACKEND, CORES, MEMORY, SPANS_SOCKETS
from orchestrator.core.planning.plan import CCL_MODULE, choose_backend, make_plan
from orchestrator.core.planning.spec import SweepSpec, parse_spec
from orchestrator.core.planning.trial import Trial
from orchestrator.core.planning.view import plan_tables, plan_to_dict
from orchestrator.core.text.table import INFEASIBLE

from hand_topologies import GIB, cluster_4x2s28c, emulated_2s1c, xeon_2s28c_smt, xeon_8s28c


def spec_of(grid: dict, **extra) -> SweepSpec:
    spec, problems = parse_spec({"name": "t", "workload": {"name": "classifier"}, "grid": grid, **extra})
    assert problems == []
    return spec


# The grid of sweeps/retinanet-table3.yaml, rebuilt here so that the test does not need the retinanet plug-in.
TABLE3_GRID = {"ranks": [1, 2, 4, 8, 16], "threads_per_rank": [7, 14, 28, 56], "local_batch": [1, 2]}
TABLE3_CONSTRAINTS = {"hyperthreads": False, "memory_headroom": 0.9}


def table3_plan(rank_mib, topology=None, constraints=None, **extra):
    spec = spec_of(TABLE3_GRID, constraints={**TABLE3_CONSTRAINTS, **(constraints or {})}, **extra)
    return make_plan(spec, topology or xeon_2s28c_smt(), rank_memory_mib=rank_mib, ccl_available=False)


def verdicts(plan, local_batch):
    return {(p.trial.ranks, p.trial.threads_per_rank): tuple(r.code for r in p.reasons)
            for p in plan.trials if p.trial.local_batch == local_batch}


def test_table3_on_the_2_socket_28_core_smt_server():
    plan = table3_plan(lambda batch: 5_000.0 * batch)   # 16 ranks × 10,000 MiB still fit 176,947 MiB
    ok = ()
    expected = {
        (1, 7): ok, (2, 7): ok, (4, 7): ok, (8, 7): ok, (16, 7): (CORES,),
        (1, 14): ok, (2, 14): ok, (4, 14): ok, (8, 14): (CORES,), (16, 14): (CORES,),
        (1, 28): ok, (2, 28): ok, (4, 28): (CORES,), (8, 28): (CORES,), (16, 28): (CORES,),
        (1, 56): (SPANS_SOCKETS,), (2, 56): (SPANS_SOCKETS, CORES), (4, 56): (SPANS_SOCKETS, CORES),
        (8, 56): (SPANS_SOCKETS, CORES), (16, 56): (SPANS_SOCKETS, CORES),
    }
    assert verdicts(plan, 1) == expected
    assert verdicts(plan, 2) == expected
    assert len(plan.feasible) == 2 * 9
    assert plan.cell(16, 7, 1).reasons[0].message == (
        "16 ranks × 7 cores = 112 > 56 physical cores (hyperthreads not counted) on 1 node(s)")
    assert plan.cell(1, 56, 1).reasons[0].message == (
        "a rank would span sockets: 56 threads > 28 physical cores (hyperthreads not counted) per socket")


def test_table3_when_memory_binds():
    # 25,000 MiB per rank at local batch 2: 176,947 // 25,000 = 7 ranks fit the node
    plan = table3_plan(lambda batch: 12_500.0 * batch)
    assert verdicts(plan, 1)[(8, 7)] == ()
    assert verdicts(plan, 2)[(8, 7)] == (MEMORY,)
    assert verdicts(plan, 2)[(16, 7)] == (CORES, MEMORY)
    assert plan.cell(8, 7, 2).reasons[0].message == (
        "8 ranks × 25,000 MiB exceed memory: the node(s) hold 7 rank(s) within 0.9 × their memory")
    assert plan.cell(8, 7, 2).rank_memory_mib == 25_000.0


def test_table3_with_hyperthreads_counted():
    plan = table3_plan(lambda batch: 1_000.0, constraints={"hyperthreads": True})
    feasible = {(p.trial.ranks, p.trial.threads_per_rank) for p in plan.feasible if p.trial.local_batch == 1}
    assert feasible == {(1, 7), (2, 7), (4, 7), (8, 7), (16, 7), (1, 14), (2, 14), (4, 14), (8, 14),
                        (1, 28), (2, 28), (4, 28), (1, 56), (2, 56)}


def test_table3_on_the_8_socket_machine_and_the_cluster():
    big = table3_plan(lambda batch: 8_000.0, topology=xeon_8s28c())
    assert {(p.trial.ranks, p.trial.threads_per_rank) for p in big.trials if not p.feasible} == {
        (16, 28), (1, 56), (2, 56), (4, 56), (8, 56), (16, 56)}
    cluster = table3_plan(lambda batch: 8_000.0, topology=cluster_4x2s28c())
    assert cluster.cell(16, 14, 1).placement.nodes_used == 4
    assert cluster.cell(4, 14, 1).placement.nodes_used == 1
    assert cluster.cell(8, 28, 1).feasible and cluster.cell(8, 28, 1).placement.nodes_used == 4
    assert not cluster.cell(16, 28, 1).feasible


def test_memory_budgets_share_a_node_or_take_the_explicit_value():
    plan = table3_plan(lambda batch: 1_000.0)
    cell = plan.cell(4, 7, 1)
    assert cell.memory_budget_mib == (192 * GIB * 0.9 / 4,) * 4
    assert plan.cell(16, 7, 1).memory_budget_mib == ()
    plan = table3_plan(lambda batch: 1_000.0, constraints={"memory_budget_mib": 4_096})
    assert plan.cell(4, 7, 1).memory_budget_mib == (4_096,) * 4
    assert plan.cell(4, 7, 1).rank_memory_mib == 1_000.0


def test_spec_rank_memory_overrides_the_workload_estimate():
    plan = table3_plan(lambda batch: 1.0, constraints={"rank_memory_mib": 200_000})
    assert plan.feasible == ()
    assert plan.cell(1, 7, 1).reasons[0].code == MEMORY


def test_budget_smaller_than_the_estimate_rejects_every_point():
    plan = table3_plan(lambda batch: 5_000.0, constraints={"memory_budget_mib": 4_000})
    assert all(MEMORY in (r.code for r in p.reasons) for p in plan.trials)
    assert plan.cell(1, 7, 2).reasons[-1].message == (
        "a rank needs ~5,000 MiB at local batch 2, more than memory_budget_mib 4,000")


# --- backends ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("requested, available, chosen, has_error", [
    ("gloo", True, "gloo", False), ("gloo", False, "gloo", False),
    ("auto", True, "ccl", False), ("auto", False, "gloo", False),
    ("ccl", True, "ccl", False), ("ccl", False, "ccl", True),
])
def test_choose_backend(requested, available, chosen, has_error):
    backend = choose_backend(requested, available)
    assert (backend.chosen, backend.error is not None) == (chosen, has_error)
    if not available and requested == "auto":
        assert CCL_MODULE in backend.note and "fell back to gloo" in backend.note


def test_ccl_requested_but_unavailable_rejects_every_point_with_the_fix():
    spec = spec_of({"ranks": [1], "threads_per_rank": [1], "local_batch": [1]}, backend="ccl")
    plan = make_plan(spec, xeon_2s28c_smt(), rank_memory_mib=lambda b: 100.0, ccl_available=False)
    assert [r.code for r in plan.trials[0].reasons] == [BACKEND]
    assert plan.trials[0].reasons[0].message == (
        f"backend ccl requested but {CCL_MODULE} is not installed; install oneCCL's bindings or set "
        "backend: auto (falls back to gloo)")
    assert plan.backend.error == plan.trials[0].reasons[0].message


def test_ccl_workers_reserved_only_when_ccl_is_chosen():
    grid = {"ranks": [4], "threads_per_rank": [14], "local_batch": [1]}
    with_ccl = make_plan(spec_of(grid), xeon_2s28c_smt(), rank_memory_mib=lambda b: 1.0, ccl_available=True)
    assert [r.code for r in with_ccl.trials[0].reasons] == [CORES]   # 4 × (14 + 1) = 60 > 56
    assert "4 ranks × 15 cores = 60 > 56" in with_ccl.trials[0].reasons[0].message
    (cell,) = make_plan(spec_of(grid), xeon_2s28c_smt(), rank_memory_mib=lambda b: 1.0,
                        ccl_available=False).trials
    assert cell.feasible and all(r.ccl_cpus == () for r in cell.placement.ranks)
    grid = {"ranks": [4], "threads_per_rank": [13], "local_batch": [1]}
    (cell,) = make_plan(spec_of(grid, constraints={"ccl_workers": 1}), xeon_2s28c_smt(),
                        rank_memory_mib=lambda b: 1.0, ccl_available=True).trials
    assert [r.ccl_cpus for r in cell.placement.ranks] == [(13,), (27,), (41,), (55,)]


# --- convergence runs --------------------------------------------------------------------------------------

CONVERGENCE = {"metric": "accuracy", "target": 0.9, "base_lr": 0.1, "base_batch": 32, "seeds": [7, 3]}


def test_convergence_runs_use_the_cheapest_layout_per_global_batch():
    spec = spec_of({"ranks": [1, 2, 4], "threads_per_rank": [1, 2], "local_batch": [32, 64]},
                   convergence=CONVERGENCE)
    plan = make_plan(spec, xeon_2s28c_smt(), rank_memory_mib=lambda b: 100.0, ccl_available=False)
    chosen = [(run.global_batch, run.seed, run.layout.trial) for run in plan.convergence]
    assert chosen == [
        (32, 7, Trial(1, 1, 32)), (32, 3, Trial(1, 1, 32)),
        (64, 7, Trial(1, 1, 64)), (64, 3, Trial(1, 1, 64)),     # 1 × 64 beats 2 × 32: fewer cores
        (128, 7, Trial(2, 1, 64)), (128, 3, Trial(2, 1, 64)),   # 2 × 64 beats 4 × 32
        (256, 7, Trial(4, 1, 64)), (256, 3, Trial(4, 1, 64)),
    ]
    assert [run.key for run in plan.convergence[:2]] == ["g32-s7", "g32-s3"]


def test_convergence_skips_infeasible_layouts_and_ties_break_on_fewer_ranks():
    spec = spec_of({"ranks": [1, 2, 4], "threads_per_rank": [1, 2], "local_batch": [32, 64]},
                   convergence=CONVERGENCE)
    # local batch 64 needs more memory than a rank may have: global batch 64 must use 2 ranks × 32
    plan = make_plan(spec, xeon_2s28c_smt(), rank_memory_mib=lambda b: 500_000.0 if b == 64 else 100.0,
                     ccl_available=False)
    assert {run.global_batch: run.layout.trial for run in plan.convergence} == {
        32: Trial(1, 1, 32), 64: Trial(2, 1, 32), 128: Trial(4, 1, 32)}
    # equal cores (2): 1 rank × 2 threads at 64 vs 2 ranks × 1 thread at 32: fewer ranks wins
    spec = spec_of({"ranks": [1, 2], "threads_per_rank": [2, 1], "local_batch": [32, 64]},
                   convergence=CONVERGENCE)
    plan = make_plan(spec, xeon_2s28c_smt(), rank_memory_mib=lambda b: 100.0, ccl_available=False)
    assert {run.global_batch: run.layout.trial for run in plan.convergence}[64] == Trial(1, 1, 64)


def test_no_convergence_section_or_no_feasible_point_means_no_runs():
    grid = {"ranks": [1], "threads_per_rank": [1], "local_batch": [1]}
    assert make_plan(spec_of(grid), emulated_2s1c(), rank_memory_mib=lambda b: 1.0,
                     ccl_available=False).convergence == ()
    plan = make_plan(spec_of(grid, convergence=CONVERGENCE), emulated_2s1c(),
                     rank_memory_mib=lambda b: 1e9, ccl_available=False)
    assert plan.feasible == () and plan.convergence == ()


def test_make_plan_is_deterministic():
    first = table3_plan(lambda batch: 6_000.0 * batch, topology=cluster_4x2s28c())
    second = table3_plan(lambda batch: 6_000.0 * batch, topology=cluster_4x2s28c())
    assert first == second
    assert plan_to_dict(first) == plan_to_dict(second)


# --- views -------------------------------------------------------------------------------------------------

def test_plan_tables_mark_infeasible_cells_with_footnotes():
    plan = table3_plan(lambda batch: 5_000.0 * batch)
    tables = plan_tables(plan)
    assert [t.name for t in tables] == ["plan-b1", "plan-b2"]
    table = tables[0]
    assert table.title == "Plan, local batch 1 (global batch = ranks × 1)"
    assert table.columns == ("1", "2", "4", "8", "16")
    assert {label: [c.text for c in cells] for label, cells in table.rows} == {
        "7": ["run", "run", "run", "run", "– a"],
        "14": ["run", "run", "run", "– a", "– a"],
        "28": ["run", "run", "– a", "– a", "– a"],
        "56": ["– b", "– b,a", "– b,a", "– b,a", "– b,a"],
    }
    assert all(c.mark == INFEASIBLE for c in table.rows[3][1])
    assert table.rows[0][1][0].mark is None
    # One footnote per rule; the per-point arithmetic stays in the JSON and the records.
    assert table.footnotes == (
        "a: ranks × cores per rank > 56 physical cores (hyperthreads not counted) on 1 node(s)",
        "b: a rank would span sockets: 56 threads > 28 physical cores (hyperthreads not counted) per socket",
    )
    cell = plan.cell(16, 28, 1)
    assert cell.reasons[0].message == "16 ranks × 28 cores = 448 > 56 physical cores (hyperthreads not counted) on 1 node(s)"
    assert table.caption == "Each rank needs ~5,000 MiB. 'run': the point fits and will be measured."
    assert tables[1].caption.startswith("Each rank needs ~10,000 MiB.")


def test_plan_tables_show_node_counts_on_a_cluster():
    plan = table3_plan(lambda batch: 1_000.0, topology=cluster_4x2s28c())
    cells = {label: [c.text for c in cells] for label, cells in plan_tables(plan)[0].rows}
    assert cells["14"] == ["run", "run", "run", "run (2 nodes)", "run (4 nodes)"]


def test_plan_json_has_placements_and_reasons():
    plan = table3_plan(lambda batch: 1_000.0, convergence=CONVERGENCE)
    data = json.loads(json.dumps(plan_to_dict(plan)))
    assert data["sweep"] == "t" and data["workload"] == "classifier"
    assert data["axes"] == {"ranks": [1, 2, 4, 8, 16], "threads_per_rank": [7, 14, 28, 56], "local_batch": [1, 2]}
    assert data["backend"]["chosen"] == "gloo" and data["backend"]["error"] is None
    by_key = {t["key"]: t for t in data["trials"]}
    assert len(by_key) == 40
    cell = by_key["r2-t14-b1"]
    assert cell["feasible"] and cell["global_batch"] == 2 and cell["reasons"] == []
    assert [(p["rank"], p["socket"], p["cpus"][0], p["numa_nodes"]) for p in cell["placement"]] == [
        (0, 0, 0, [0]), (1, 1, 28, [1])]
    assert cell["placement"][0]["node_name"] == "xeon-smt"
    assert by_key["r16-t56-b2"]["placement"] == []
    assert [r["code"] for r in by_key["r16-t56-b2"]["reasons"]] == ["spans_sockets", "cores"]
    assert [run["key"] for run in data["convergence"]][:2] == ["g1-s7", "g1-s3"]
    assert data["topology"]["nodes"][0]["name"] == "xeon-smt"
