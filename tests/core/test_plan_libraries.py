"""Memory planned as each rank's private memory plus the libraries once per node: a Table-3 node (2 sockets × 28
cores, 192 GiB, headroom 0.9: 176,947 MiB) holding 56 ranks of a probed workload, with the numbers.

The probe measured 2,500 and 2,506 MiB of private memory at batches 2 and 8 (2,498 + 1·b MiB, + 15% margin) and
353 MiB of libraries (the file-backed pages torch maps, which the ranks of a node share)."""

from __future__ import annotations

import pytest

from orchestrator.core.execution.schedule import admit_packed, memory_share_mib
from orchestrator.core.planning.constraints import MEMORY
from orchestrator.core.planning.facts import PROBE, WORKLOAD, workload_facts
from orchestrator.core.planning.plan import make_plan
from orchestrator.core.planning.probe import ProbePoint, probe_result
from orchestrator.core.planning.spec import parse_spec
from orchestrator.core.planning.view import plan_tables, plan_to_dict

from hand_topologies import GIB, cluster_4x2s28c, xeon_2s28c_smt

KEY = {"format": 2, "workload": "w:workload", "code": "c", "params": {}, "precision": "fp32", "torch": "2.14.1",
       "backend": "gloo", "held_batches": 13}
NODE_MIB = 192 * GIB * 0.9   # 176,947.2 MiB
LIBRARIES = 353.0


def probe():
    points = [ProbePoint(local_batch=b, peak_private_mib=peak, rank_peak_private_mib=peak,
                         watched_peak_private_mib=peak, library_mib=LIBRARIES, flops_per_step=None)
              for b, peak in ((2, 2500.0), (8, 2506.0))]
    return probe_result(KEY, points, threads=28, measured_at="t", ddp_copies=0.0)


def plan_of(topology, ranks, facts, library_mib=None):
    spec, problems = parse_spec({"name": "t", "workload": {"name": "w"}, "constraints": {"memory_headroom": 0.9},
                                 "grid": {"ranks": [ranks], "threads_per_rank": [1], "local_batch": [64, 256]}})
    assert problems == []
    return make_plan(spec, topology, rank_memory_mib=facts.memory.mib, ccl_available=False, facts=facts,
                     library_mib=facts.memory.library_mib if library_mib is None else library_mib)


def test_56_ranks_reserve_the_libraries_once_per_node_not_once_per_rank():
    facts = workload_facts(precision="fp32", probe=probe())
    assert facts.memory.origin == PROBE and facts.memory.library_mib == LIBRARIES
    private = (2498 + 64) * 1.15                       # 2,946.3 MiB per rank at local batch 64
    assert facts.memory.mib(64) == pytest.approx(private)
    plan = plan_of(xeon_2s28c_smt(), 56, facts)
    cell = plan.cell(56, 1, 64)
    # 56 × 2,946.3 + 353 once = 165,346 MiB ≤ 176,947: the 56 ranks run
    assert 56 * private + LIBRARIES <= NODE_MIB and cell.feasible
    assert cell.rank_memory_mib == pytest.approx(private) and cell.library_mib == LIBRARIES
    # each rank's budget is its share of the node less the libraries: (176,947.2 − 353) ÷ 56 = 3,153.5 MiB
    assert cell.memory_budget_mib == pytest.approx(((NODE_MIB - LIBRARIES) / 56,) * 56)
    assert (NODE_MIB - LIBRARIES) / 56 == pytest.approx(3153.47, abs=0.01)
    # The old accounting, the libraries in every rank: 56 × (2,946.3 + 353) = 184,761 MiB > 176,947: refused, 53 fit
    old = plan_of(xeon_2s28c_smt(), 56, workload_facts(precision="fp32", declared_memory=lambda b: facts.memory.mib(b)
                                                       + LIBRARIES), library_mib=0.0).cell(56, 1, 64)
    assert 56 * (private + LIBRARIES) > NODE_MIB and [r.code for r in old.reasons] == [MEMORY]
    assert old.reasons[0].message == ("56 ranks × 3,299 MiB exceed memory: the node(s) hold 53 rank(s) within 0.9 × "
                                      "their memory")


def test_a_rank_too_many_for_private_memory_and_libraries_is_refused_with_both_numbers():
    plan = plan_of(xeon_2s28c_smt(), 56, workload_facts(precision="fp32", probe=probe()))
    # at 256: (2,498 + 256) × 1.15 = 3,167.1 MiB; 56 × 3,167.1 + 353 = 177,711 > 176,947; (176,947 − 353) ÷ 3,167.1
    # holds 55
    (reason,) = plan.cell(56, 1, 256).reasons
    assert reason.code == MEMORY and reason.message == (
        "56 ranks × 3,167 MiB + 353 MiB of libraries once per node exceed memory: the node(s) hold 55 rank(s) within "
        "0.9 × their memory")


def test_each_node_of_a_cluster_holds_the_libraries_once():
    plan = plan_of(cluster_4x2s28c(), 224, workload_facts(precision="fp32", probe=probe()))
    cell = plan.cell(224, 1, 64)
    assert cell.feasible and cell.placement.nodes_used == 4
    assert cell.memory_budget_mib == pytest.approx(((NODE_MIB - LIBRARIES) / 56,) * 224)


def test_the_plan_says_private_memory_and_the_libraries_once_per_node():
    plan = plan_of(xeon_2s28c_smt(), 56, workload_facts(precision="fp32", probe=probe()))
    assert plan_tables(plan)[0].caption.startswith(
        "Each rank needs ~2,946 MiB of its own (measured by the probe), + 353 MiB of libraries once per node.")
    assert plan_to_dict(plan)["trials"][0]["library_mib"] == LIBRARIES
    assert plan.facts.memory.source.endswith("+ 15% margin; + 353 MiB of libraries once per node")


def test_a_formula_has_the_probes_libraries_beside_it_and_the_sweep_files_figure_none():
    """A workload's formula counts a rank's own memory: the probe's libraries, where it ran, stand beside it. A
    figure the sweep file states is all there is."""
    formula = workload_facts(precision="fp32", declared_memory=lambda b: 400.0, probe=probe())
    assert formula.memory.origin == WORKLOAD and formula.memory.library_mib == LIBRARIES
    assert formula.memory.library_source == "353 MiB, once per node, measured by the probe (its file-backed pages)"
    assert workload_facts(precision="fp32", declared_memory=lambda b: 400.0).memory.library_mib == 0.0
    stated = workload_facts(precision="fp32", sweep_memory_mib=900.0, probe=probe())
    assert stated.memory.library_mib == 0.0 and stated.memory.library_source == ""


def test_packed_runs_share_the_node_less_the_libraries_in_proportion_to_their_cores():
    node = xeon_2s28c_smt().nodes[0]
    assert memory_share_mib(node, 7, 0.9, False, LIBRARIES) == pytest.approx((NODE_MIB - LIBRARIES) * 7 / 56)
    admitted = admit_packed(xeon_2s28c_smt(), 2, 7, frozenset(), hyperthreads=False, ccl_workers=0,
                            rank_memory_mib=3000.0, memory_headroom=0.9, library_mib=LIBRARIES)
    assert admitted is not None
    assert admitted.memory_budget_mib == pytest.approx(((NODE_MIB - LIBRARIES) * 7 / 56,) * 2)


def test_orch_plan_says_where_the_libraries_beside_a_formula_come_from():
    from orchestrator.cli.plan_cmd import facts_lines

    lines = facts_lines(workload_facts(precision="fp32", declared_memory=lambda b: 400.0, probe=probe()), "S")
    assert lines[:2] == ["memory per rank: the workload’s formula (memory_estimate_mib)",
                         "libraries: 353 MiB, once per node, measured by the probe (its file-backed pages)"]
    probed = facts_lines(workload_facts(precision="fp32", probe=probe()), "S")
    assert not any(line.startswith("libraries:") for line in probed)   # the probe's own source says them
