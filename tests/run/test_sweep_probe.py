"""`orch sweep` on a workload that declares no memory, FLOPs or epoch size: it probes first (no Ray), plans by
the measured memory (a layout that does not fit is refused), records where each figure came from, and does not
probe again when it resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import by_key, read_records, write_sweep

from orchestrator.cli import main
from orchestrator.core.planning.probe import ProbeResult
from orchestrator.io.isa import from_flags

# isa: the sweep probes in the precision its Ray node's CPU decides and the plan must agree (it failed on every
# bf16-native CPU while passing on AVX2-only ones): scripts/avx2_check.sh runs it again under the AVX2 cap
pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2), pytest.mark.isa]

LAZYNET = Path(__file__).resolve().parents[1] / "data" / "own_model" / "lazynet.py"
# This machine's two CPUs as one socket
NODE = "sockets: 1\ncores_per_socket: 2\nmemory_gib: {gib}\ncpus:\n  - [0, 1]\n"


def test_sweep_probes_first_plans_by_measured_memory_and_records_the_sources(ray_local, tmp_path, monkeypatch,
                                                                              capsys):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ORCH_CACHE_DIR", str(cache))
    monkeypatch.setattr("orchestrator.run.driver.probe.WORK_ROOT", tmp_path / "work")
    topology = tmp_path / "node.yaml"
    topology.write_text(NODE.format(gib=16))
    sweep = write_sweep(tmp_path, "lazy-sweep", f"""
        workload:
          name: {LAZYNET}:workload
        grid: {{ranks: [1, 2], threads_per_rank: [1], local_batch: [16]}}
        measure: {{warmup_steps: 2, timed_steps: 5, repeats: 1, peak: false, allreduce: false}}
        """)
    results = tmp_path / "results"
    argv = ["sweep", str(sweep), "--topology", str(topology), "--results", str(results), "--no-report"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "probing workload lazynet first (not known yet: memory per rank, FLOPs per sample, samples per epoch)" \
        in " ".join(err.split())

    [cached] = [ProbeResult.from_json(json.loads(p.read_text())) for p in (cache / "probes").glob("*.json")]
    kept = ProbeResult.from_json(json.loads((results / "probe.json").read_text()))
    assert kept == cached
    need = cached.memory.mib(16)
    records = by_key(read_records(results))
    one, two = records["r1-t1-b16"], records["r2-t1-b16"]
    assert one["status"] == two["status"] == "ok"
    assert one["memory"]["estimate_mib"] == two["memory"]["estimate_mib"] == pytest.approx(need)   # planned by it
    libraries = cached.memory.libraries_mib   # torch's file-backed pages: once per node, beside each rank's own
    assert libraries > 100 and one["memory"]["library_mib"] == two["memory"]["library_mib"] == libraries

    derived = json.loads((results / "spec.json").read_text())["derived"]
    assert derived["sources"] == {"memory": cached.memory.text(), "flops_per_sample": cached.flops_source,
                                  "samples_per_epoch": cached.samples_source}
    # Linear(16, 64), Linear(64, 2): forward 2 × 1,152, the weights' gradients 2 × 1,152, the hidden input's 2 × 128
    assert derived["samples_per_epoch"] == 1024 and derived["train_flops_per_sample"] == 4864.0
    assert one["throughput"]["train_flops_per_sample"] == 4864.0   # the trial's own count agrees
    assert one["throughput"]["train_flops_rule"] == cached.flops_rule == "valid-taps"   # and says how it counted

    assert main(argv) == 0          # resumed: the cached probe plans it, nothing measured again
    assert "probing" not in capsys.readouterr().err

    # On a node with room for the libraries and 1.5 ranks of what the probe measured, the plan refuses two ranks,
    # with the numbers
    small = tmp_path / "small-node.yaml"
    small.write_text(NODE.format(gib=(1.5 * need + libraries) / 0.9 / 1024))
    assert main(["plan", str(sweep), "--topology", str(small), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    verdicts = {t["key"]: [r["code"] for r in t["reasons"]] for t in plan["trials"]}
    assert verdicts == {"r1-t1-b16": [], "r2-t1-b16": ["memory"]}
    [reason] = next(t for t in plan["trials"] if t["key"] == "r2-t1-b16")["reasons"]
    assert f"2 ranks × {need:,.0f} MiB + {libraries:,.0f} MiB of libraries once per node exceed memory" in \
        reason["message"]


def test_a_sweep_whose_probe_fails_is_exit_2_with_the_ranks_error_before_any_trial(ray_local, tmp_path, monkeypatch,
                                                                                     capsys):
    monkeypatch.setenv("ORCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("orchestrator.run.driver.probe.WORK_ROOT", tmp_path / "work")
    tinynet = LAZYNET.parent / "tinynet.py"
    sweep = write_sweep(tmp_path, "raising", f"""
        workload:
          name: {tinynet}:workload
          params: {{fail: factory}}
        grid: {{ranks: [1], threads_per_rank: [1], local_batch: [16]}}
        """)
    results = tmp_path / "results"
    assert main(["sweep", str(sweep), "--results", str(results), "--no-report"]) == 2
    err = capsys.readouterr().err
    [error] = [line for line in err.splitlines() if line.startswith("orch: error:")]
    assert ("the probe of workload tinynet at local batch 2 failed: the rank exited with status 1: WorkloadError: "
            "the model factory build_model raised RuntimeError: the model factory failed on purpose") in error
    assert "Traceback" not in err and not results.exists()     # nothing ran, nothing recorded


def test_measure_probe_always_times_a_declared_workloads_step_and_the_estimate_rests_on_it(ray_local, tmp_path,
                                                                                          monkeypatch, capsys):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ORCH_CACHE_DIR", str(cache))
    monkeypatch.setattr("orchestrator.run.driver.probe.WORK_ROOT", tmp_path / "work")
    sweep = write_sweep(tmp_path, "always", """
        workload:
          name: classifier
          params: {hidden: 64, train_samples: 1024}
        grid: {ranks: [1], threads_per_rank: [1, 2], local_batch: [16]}
        measure: {warmup_steps: 2, timed_steps: 5, repeats: 1, peak: false, allreduce: false, probe: always}
        """)
    results = tmp_path / "results"
    argv = ["sweep", str(sweep), "--results", str(results), "--no-report"]
    assert main(argv) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "probing workload classifier first (measure.probe: always, for its step time on this CPU" in err
    assert "expected time: about" in err and "steps the probe timed on this CPU" in err
    kept = ProbeResult.from_json(json.loads((results / "probe.json").read_text()))
    assert kept.cpu == from_flags().identity and all(p.step_s for p in kept.points)
    derived = json.loads((results / "spec.json").read_text())["derived"]
    assert derived["sources"]["memory"] == "the workload’s formula (memory_estimate_mib)"   # declared still wins
    assert {r["status"] for r in read_records(results)} == {"ok"}

    assert main(argv) == 0          # resumed: the cached probe has its step on this CPU, nothing measured again
    assert "probing" not in capsys.readouterr().err
