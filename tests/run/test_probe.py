"""The probe for real, through orch's own rank path (the launcher, pinned and watched, no Ray): a file-path
workload and a built-in measured, what the cache keeps, `orch plan` before and after a probe (torch-free), and
the failures a probe must turn into one clear line (exit 2, no traceback)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_sweep

from orch import decide_precision
from orchestrator.cli import main
from orchestrator.core.planning.probe import PROBE_BATCHES, ProbePoint, ProbeResult, probe_result
from orchestrator.io.isa import from_flags
from orchestrator.io.sweepfile import load_sweep
from orchestrator.io.topofile import load_topology
from orchestrator.run.driver.probe import ProbeSetup, run_probe

pytestmark = [pytest.mark.slow]

OWN_MODEL = Path(__file__).resolve().parents[1] / "data" / "own_model"
TINYNET = OWN_MODEL / "tinynet.py"
LAZYNET = OWN_MODEL / "lazynet.py"
ONE_SOCKET = "sockets: 1\ncores_per_socket: 2\nmemory_gib: 16\nisa:\n  features: [avx2]\n  bf16_native: false\n"


def sweep_of(folder: Path, name: str, workload: str, params: str = "{}", extra: str = "") -> Path:
    return write_sweep(folder, name, f"""
        workload:
          name: {workload}
          params: {params}
        grid: {{ranks: [1, 2], threads_per_rank: [1], local_batch: [16, 64]}}
        measure: {{warmup_steps: 2, timed_steps: 5, repeats: 1, peak: false, allreduce: false}}
        """ + extra)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """A cache of the test's own; the probe's rank folders (kept after a failure, for its log) too."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ORCH_CACHE_DIR", str(folder))
    monkeypatch.setattr("orchestrator.run.driver.probe.WORK_ROOT", tmp_path / "work")
    return folder


def cached(cache: Path) -> list[ProbeResult]:
    return [ProbeResult.from_json(json.loads(p.read_text())) for p in sorted((cache / "probes").glob("*.json"))]


def test_orch_probe_measures_a_file_path_workload_and_caches_it(tmp_path, cache, capsys):
    sweep = sweep_of(tmp_path, "tiny", f"{TINYNET}:workload")
    assert main(["probe", str(sweep), "--topology", str(write_topology(tmp_path))]) == 0
    out = capsys.readouterr()
    [result] = cached(cache)
    assert [p.local_batch for p in result.points] == list(PROBE_BATCHES)
    for p in result.points:   # a process with torch imported: hundreds of MiB, the rank's own figure fitted
        assert 100 < p.peak_private_mib < 4000 and p.peak_private_mib == p.rank_peak_private_mib
        assert p.watched_peak_private_mib > 100 and p.library_mib > 100   # torch's libraries, apart
    assert result.memory.libraries_mib == max(p.library_mib for p in result.points)
    # tinynet: Linear(8, 32) and Linear(32, 2); the counter counts matmuls: forward 2 × (8·32 + 32·2) = 640, backward
    # the weights' gradients (640) and the hidden layer's input gradient (2 × 32·2 = 128): 1,408 per sample
    assert result.flops_per_sample == 1408.0
    assert result.samples_per_epoch == 512 and result.held_batches == 7   # 2 warm-up + 5 timed steps
    grads = (8 * 32 + 32 + 32 * 2 + 2) * 4
    assert {p.gradient_bytes for p in result.points} == {grads}
    assert result.memory.ddp_mib == pytest.approx(grads / 2**20)   # DDP's buckets: one more copy
    assert result.precision == "fp32" and result.params["precision"] == "fp32"   # auto, decided for an AVX2 CPU
    assert "memory per rank: probe at batches 2 and 8" in out.out and "cached:" in out.err
    # a second run finds it: nothing measured again
    assert main(["probe", str(sweep), "--topology", str(write_topology(tmp_path))]) == 0
    assert capsys.readouterr().out.startswith("cached probe of tinynet")


def write_topology(folder: Path) -> Path:
    path = folder / "one-socket-avx2.yaml"
    path.write_text(ONE_SOCKET)
    return path


def test_a_builtin_is_probed_only_when_forced_and_its_own_figures_still_win(tmp_path, cache):
    sweep = load_sweep(sweep_of(tmp_path, "cls", "classifier", "{hidden: 64, train_samples: 1024}"))
    assert sweep.facts.memory.origin == "workload" and not sweep.facts.needs_probe()
    setup = ProbeSetup((0,), (0,), 4000.0, "the test's")
    result = run_probe(sweep, "gloo", setup)
    # features 32, hidden 64, classes 4: weights 32·64 + 64·64 + 64·4 = 6,400; forward 2 per weight, backward 2 per
    # weight for the weights' gradients and 2 per weight but the first layer's for the inputs' gradients
    assert result.flops_per_sample == 2 * 6400 + 2 * 6400 + 2 * (64 * 64 + 64 * 4)
    with_probe = sweep.with_probe(result)
    assert with_probe.facts.memory.origin == "workload"          # declared wins; the probe is kept beside it
    assert with_probe.facts.flops.value == sweep.workload.train_flops_per_sample(sweep.params)
    assert result.threads == 1 and result.samples_per_epoch is None   # its trainer does not tell; the workload does
    # It timed its steps and its start-up, on this CPU, for the time estimate (measure.probe: always)
    here = from_flags().identity
    assert result.cpu == here and all(p.step_s and p.step_s > 0 and p.startup_s and p.startup_s > 0
                                      for p in result.points)
    assert all(p.step_s < p.wall_s and p.startup_s < p.wall_s for p in result.points)
    assert result.step_s(64, 1, here) is not None and result.step_s(64, 1, here + " elsewhere") is None


def test_measure_probe_always_probes_a_workload_that_declares_every_figure_until_its_step_is_timed_here(tmp_path):
    declared = load_sweep(sweep_of(tmp_path, "cls", "classifier", "{hidden: 64}"))
    assert declared.spec.measure.probe == "auto" and not declared.needs_probe("cpu A (avx2)")
    path = sweep_of(tmp_path, "cls-always", "classifier", "{hidden: 64}")
    path.write_text(path.read_text().replace("allreduce: false}", "allreduce: false, probe: always}"))
    always = load_sweep(path)
    assert always.spec.measure.probe == "always" and always.needs_probe("cpu A (avx2)")
    points = [ProbePoint(local_batch=b, peak_private_mib=300.0, rank_peak_private_mib=300.0, library_mib=0.0,
                         watched_peak_private_mib=300.0, flops_per_step=None, step_s=0.1 * b) for b in PROBE_BATCHES]
    fields = {"format": 1, "workload": "classifier", "code": "c", "params": {}, "precision": "fp32", "torch": "t",
              "backend": "gloo", "held_batches": 13}
    timed_here = always.with_probe(probe_result(fields, points, threads=1, measured_at="now", ddp_copies=0.0,
                                                cpu="cpu A (avx2)"))
    assert not timed_here.needs_probe("cpu A (avx2)")
    assert timed_here.needs_probe("cpu A (avx2 avx512f)")       # timed on another CPU: probed again here


PLAN = """
import contextlib, io, json, sys
from orchestrator.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "ray", "torchvision"))
print(json.dumps({"rc": rc, "heavy": heavy, "plan": json.loads(out.getvalue())}))
"""


def plan_json(sweep: Path, topology: Path, cache: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PLAN, "plan", str(sweep), "--topology", str(topology), "--json"],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "ORCH_CACHE_DIR": str(cache), "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_orch_plan_says_nothing_is_known_before_a_probe_and_plans_by_it_after_without_torch(tmp_path, cache, capsys):
    sweep = sweep_of(tmp_path, "lazy", f"{LAZYNET}:workload",
                     extra="constraints: {memory_budget_mib: 2000}\n")
    topology = write_topology(tmp_path)
    before = plan_json(sweep, topology, cache)
    assert before["rc"] == 0 and before["heavy"] == []
    facts = before["plan"]["facts"]
    assert {facts[k]["origin"] for k in ("memory", "flops_per_sample", "samples_per_epoch")} == {"unknown"}
    assert facts["memory"]["source"] == "not known yet: no probe has run for these parameters in fp32"
    assert all(t["rank_memory_mib"] == 0.0 for t in before["plan"]["trials"])
    assert main(["plan", str(sweep), "--topology", str(topology)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"`orch probe {sweep}` measures them with one rank on this machine" in text
    assert "Memory per rank not known yet: not checked." in text

    assert main(["probe", str(sweep), "--topology", str(topology)]) == 0
    [result] = cached(cache)
    after = plan_json(sweep, topology, cache)
    assert after["rc"] == 0 and after["heavy"] == []
    facts = after["plan"]["facts"]
    assert facts["memory"] == {"origin": "probe", "source": result.memory.text()}
    assert facts["memory"]["source"].startswith("probe at batches 2 and 8: ")
    assert facts["samples_per_epoch"] == {"origin": "probe", "source": result.samples_source, "value": 1024}
    assert facts["flops_per_sample"]["source"] == result.flops_source and facts["probe_key"] == result.key
    for trial in after["plan"]["trials"]:
        assert trial["rank_memory_mib"] == pytest.approx(result.memory.mib(trial["local_batch"]))
    assert main(["plan", str(sweep), "--topology", str(topology)]) == 0
    assert "(measured by the probe)" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("workload, params, extra, expected", [
    ("workload", "{fail: factory}", "",
     "at local batch 2 failed: the rank exited with status 1: WorkloadError: the model factory build_model raised RuntimeError: the "
     "model factory failed on purpose"),
    ("inputs_only", "{}", "", "at local batch 2 failed: the rank exited with status 1: WorkloadError: the training loss is a float32 "
                              "tensor of shape (2, 2), not a scalar"),
    ("workload", "{}", "constraints: {memory_budget_mib: 60}\n",
     "at local batch 2 ran out of memory (its budget: constraints.memory_budget_mib): private memory"),
], ids=["factory-raises", "no-scalar-loss", "out-of-memory"])
def test_a_probe_that_fails_is_exit_2_with_the_ranks_one_line_error(tmp_path, cache, capsys, workload, params, extra,
                                                                      expected):
    sweep = sweep_of(tmp_path, "bad", f"{TINYNET}:{workload}", params, extra)
    assert main(["probe", str(sweep), "--topology", str(write_topology(tmp_path))]) == 2
    err = capsys.readouterr().err
    [error] = [line for line in err.splitlines() if line.startswith("orch: error:")]
    assert error.startswith("orch: error: the probe of workload tinynet") and expected in error, err
    assert error.endswith("rank.log") and Path(error.rsplit(" ", 1)[1]).is_file()   # its log, kept
    assert "Traceback" not in err
    assert not (cache / "probes").exists()


def test_the_probe_runs_on_the_first_sockets_cores_within_what_the_node_allows_one_rank(tmp_path):
    machine = tmp_path / "two-sockets.yaml"
    machine.write_text("sockets: 2\ncores_per_socket: 3\nthreads_per_core: 2\nmemory_gib: 16\n")
    sweep = load_sweep(sweep_of(tmp_path, "x", "classifier"))
    here = ProbeSetup.here(load_topology(str(machine)), sweep.spec.constraints)
    assert len(here.cpus) == 3 and here.numa_nodes == (0,)     # one socket's physical cores, no hyperthreads
    assert here.budget_mib == pytest.approx(16 * 1024 * 0.9)
    assert here.budget_note == "this machine's 16,384 MiB × memory_headroom 0.9"
    budget = load_sweep(sweep_of(tmp_path, "y", "classifier", extra="constraints: {memory_budget_mib: 3000}\n"))
    assert ProbeSetup.here(load_topology(str(machine)), budget.spec.constraints).budget_mib == 3000


def test_a_training_script_is_probed_as_one_rank_for_its_memory(tmp_path, cache, capsys):
    """The example DDP script, run as it is as one rank at each probe batch (its reporter ends it after the probe's
    steps): its memory measured, its FLOPs the ones it reports, its epoch size the sweep file's."""
    sweep = Path(__file__).resolve().parents[2] / "examples" / "ddp_script" / "sweep.yaml"
    topology = str(write_topology(tmp_path))
    assert main(["probe", str(sweep), "--topology", topology]) == 0
    [result] = cached(cache)
    assert [p.local_batch for p in result.points] == list(PROBE_BATCHES)
    assert all(100 < p.peak_private_mib < 4000 for p in result.points)
    assert result.workload.startswith("script ") and result.params == {"args": list(load_sweep(sweep).spec.workload
                                                                                    .arg_texts)}
    assert result.flops_source.startswith("reported by the script (orch.script.flops)")
    capsys.readouterr()
    assert main(["plan", str(sweep), "--topology", topology]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "memory per rank: probe at batches 2 and 8" in out and "(measured by the probe)" in out
    assert "samples per epoch: the sweep file’s workload.samples_per_epoch: 2,048" in out


def test_the_probe_counts_a_convolutions_taps_inside_the_input_and_says_so(tmp_path, cache):
    """tests/data/own_model/convnet.py: a 3×3 pad-1 convolution on 4×4 images and a linear layer, 3,840 FLOPs per
    image as orch counts them (torch's own formula, which counts the border taps in the padding: 4,896)."""
    sweep = load_sweep(sweep_of(tmp_path, "conv", f"{OWN_MODEL / 'convnet.py'}:workload"))
    sweep = dataclasses.replace(sweep, params=decide_precision(sweep.params))   # as `orch probe` decides `auto`
    result = run_probe(sweep, "gloo", ProbeSetup((0,), (0,), 4000.0, "the test's"))
    assert result.flops_per_sample == 3_840.0
    assert result.flops_rule == "valid-taps" and {p.flops_rule for p in result.points} == {"valid-taps"}
    assert "convolutions over the taps inside the input" in result.flops_source
