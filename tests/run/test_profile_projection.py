"""`orch profile --project-to` without a profile run: the projection of saved results with the probe
replaced by fixed roofs, a topology target's per-core figures, and the refusal of a topology that states
none (exit 2 before anything runs)."""

from __future__ import annotations

import json

import pytest
from conftest import write_sweep

from orchestrator.cli import main
from orchestrator.core.machine.topology import topology_from_data
from orchestrator.run.driver import profile_projection as pp

CONV = "mb8_ic256oc256_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1"   # compute-bound at any roof here


def _result() -> dict:
    rank = {"steps": 1, "plain_step_ms": [100.0], "peak": {"precision": "fp32"},
            "onednn": {"shapes": [{"kind": "convolution", "direction": "forward", "problem": CONV, "dtype": "f32",
                                   "calls": 2, "time_ms": 60.0}]}}
    return {"label": "1x2x8", "status": "ok", "threads": 2, "placement": [{"rank": 0, "cpus": [1, 0]}],
            "results": [rank]}


def _probes(cpus: list[int], precision: str) -> dict:
    assert (cpus, precision) == ([0, 1], "fp32")      # rank 0's cores, in the profile's precision
    return {"native": {"gflops": 200.0, "gemm_gflops": 180.0, "triad_gbs": 30.0,
                       "kind_gflops": {"convolution forward": 150.0, "convolution backward_weights": 140.0}},
            "avx2": {"gflops": 100.0, "gemm_gflops": 90.0, "triad_gbs": 30.0,
                     "kind_gflops": {"convolution forward": 100.0, "convolution backward_weights": 70.0}}}


def test_avx2_projection_scales_the_primitives_by_the_probed_roofs():
    (p,) = pp.project([_result()], pp.AVX2, None, measure=_probes)
    # the forward convolution's 60 ms × 150 / 100 (its own direction's roofs) = 90 ms; the other 40 ms of the
    # step kept: 130 ms; with the rest × the overall peak ratio 200 / 100: 90 + 80
    assert p["projected_step_ms"]["same"] == pytest.approx(130.0)
    assert p["projected_step_ms"]["peak"] == pytest.approx(90 + 40 * 2)
    assert p["target_roof"]["gflops"] == 100.0 and p["target_roof"]["kind_gflops"]["convolution forward"] == 100.0
    (rank,) = pp.ranks_from_json(json.loads(json.dumps(p)))      # what the validation reads back
    assert rank.projected_step_ms() == pytest.approx(130.0)


def _topology(isa: dict) -> object:
    topology, problems = topology_from_data({"nodes": 2, "sockets": 1, "cores_per_socket": 4, "memory_gib": 8,
                                             "isa": isa})
    assert not problems, problems
    return topology


def test_a_topology_target_uses_its_per_core_figures_times_the_threads():
    topology = _topology({"features": ["avx2"], "peak_fp32_gflops_per_core": 45.0, "triad_gb_per_s_per_core": 10.0})
    (p,) = pp.project([_result()], "target.yaml", topology, measure=_probes)
    # target 2 × 45 = 90 GFLOP/s against the source's GEMM, 180 (the file states no class roofs): × 2 → 120 + 40
    assert p["target_roof"] == {"gflops": 90.0, "gbs": 20.0}
    assert p["projected_step_ms"]["same"] == pytest.approx(160.0)


def test_a_topology_without_per_core_figures_cannot_be_projected_to():
    with pytest.raises(ValueError, match="triad_gb_per_s_per_core"):
        pp.check_projectable(_topology({"features": ["avx2"], "peak_fp32_gflops_per_core": 45.0}))


def test_the_cli_refuses_such_a_topology_before_anything_runs(tmp_path, capsys):
    topo = tmp_path / "t.yaml"
    topo.write_text("nodes: 1\nsockets: 1\ncores_per_socket: 2\nmemory_gib: 4\nisa: {features: [avx2]}\n")
    sweep = write_sweep(tmp_path, "s", "workload: {name: classifier}\ngrid: {ranks: [1], threads_per_rank: [1], "
                                       "local_batch: [2]}\n")
    assert main(["profile", str(sweep), "--layout", "1x1x2", "--project-to", str(topo)]) == 2
    assert "--project-to" in capsys.readouterr().err
