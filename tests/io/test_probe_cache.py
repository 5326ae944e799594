"""The probe's cache and the facts a loaded sweep carries (io.probe_cache, io.sweepfile): built-ins declare
every figure, a workload that declares none is "not known" until a probe of its parameters is cached, the key
follows the workload's file and parameters, and a bad cache is a miss, never an error. No torch, no probe run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.core.planning.probe import ProbePoint, probe_result
from orchestrator.io import probe_cache
from orchestrator.io.probe_cache import cache_dir, cached_probe, code_fingerprint, probe_key_fields, store_probe
from orchestrator.io.sweepfile import load_sweep

REPO = Path(__file__).resolve().parents[2]
LAZYNET = REPO / "tests" / "data" / "own_model" / "lazynet.py"


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def sweep_file(folder: Path, workload: str, params: str = "{}") -> Path:
    path = folder / "s.yaml"
    path.write_text(f"name: s\nworkload: {{name: '{workload}', params: {params}}}\n"
                    "grid: {ranks: [1, 2], threads_per_rank: [1], local_batch: [16]}\n")
    return path


def fake_probe(fields: dict) -> object:
    points = [ProbePoint(local_batch=b, peak_private_mib=500.0 + b, rank_peak_private_mib=500.0 + b, library_mib=0.0,
                         watched_peak_private_mib=500.0, flops_per_step=10.0 * b, samples_per_epoch=1024,
                         gradient_bytes=2**20) for b in (2, 8)]
    return probe_result(fields, points, threads=1, measured_at="t", ddp_copies=1.0)


def test_the_cache_folder_follows_orch_then_xdg_then_home(monkeypatch):
    monkeypatch.setenv("ORCH_CACHE_DIR", "/x/orch-cache")
    assert cache_dir() == Path("/x/orch-cache")
    monkeypatch.delenv("ORCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/xdg")
    assert cache_dir() == Path("/x/xdg/orch")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path("~/.cache/orch").expanduser()


@pytest.mark.parametrize("name,probed", [("sweeps/classifier.yaml", False), ("sweeps/retinanet.yaml", True)])
def test_builtins_declare_every_figure_and_only_the_default_sweep_probes_for_its_step_time(name, probed, cache):
    sweep = load_sweep(REPO / name)
    facts = sweep.facts
    assert facts.unknown() == [] and facts.probe is None and not facts.needs_probe()
    assert (facts.memory.origin, facts.flops.origin, facts.samples.origin) == ("workload",) * 3
    assert sweep.needs_probe("any CPU") is probed     # measure.probe: always, for the first time estimate


def test_a_workload_that_declares_nothing_plans_by_its_cached_probe_once_one_has_run(tmp_path, cache):
    sweep = load_sweep(sweep_file(tmp_path, f"{LAZYNET}:workload"))
    assert sweep.facts.unknown() == ["memory per rank", "FLOPs per sample", "samples per epoch"]
    assert sweep.with_cached_probe("gloo").probe is None
    fields = probe_key_fields(sweep, "gloo")
    assert fields["workload"] == f"{LAZYNET}:workload" and fields["held_batches"] == 13
    path, problem = store_probe("lazynet", fake_probe(fields))
    assert problem is None and path.parent == cache / "probes" and path.name.startswith("lazynet-")
    found = sweep.with_cached_probe("gloo")
    assert found.probe is not None and found.facts.memory.origin == "probe"
    assert found.facts.memory.mib(16) == pytest.approx(found.probe.memory.mib(16))
    assert found.facts.samples.value == 1024 and found.facts.flops.value == 10.0
    assert sweep.with_cached_probe("ccl").probe is None                   # another backend: another probe
    other = load_sweep(sweep_file(tmp_path, f"{LAZYNET}:workload", "{width: 128}"))
    assert other.with_cached_probe("gloo").probe is None                  # other parameters too


def test_an_edit_to_the_workloads_file_changes_the_key(tmp_path):
    copy = tmp_path / "net.py"
    copy.write_text(LAZYNET.read_text())
    before = code_fingerprint(f"{copy}:workload")
    copy.write_text(LAZYNET.read_text() + "\n# an edit\n")
    assert code_fingerprint(f"{copy}:workload") != before
    assert code_fingerprint("classifier") == code_fingerprint("workloads.classifier.workload:ClassifierWorkload")
    assert code_fingerprint("nosuch.module:x") == "unknown"


def test_a_bad_cached_file_is_a_miss_and_an_unwritable_cache_is_said(tmp_path, cache, monkeypatch):
    sweep = load_sweep(sweep_file(tmp_path, f"{LAZYNET}:workload"))
    fields = probe_key_fields(sweep, "gloo")
    path, _ = store_probe("lazynet", fake_probe(fields))
    path.write_text("{not json")
    assert cached_probe("lazynet", fields) is None
    path.write_text(json.dumps({"format": 1}))
    assert cached_probe("lazynet", fields) is None
    monkeypatch.setattr(probe_cache, "cache_dir", lambda: Path("/proc/no-cache-here"))
    assert store_probe("lazynet", fake_probe(fields))[1].startswith("the probe cache /proc/no-cache-here/probes "
                                                                    "cannot be written")


def test_reading_the_cache_imports_no_torch(tmp_path, cache):
    code = ("import sys; from orchestrator.io.sweepfile import load_sweep; "
            f"s = load_sweep({str(sweep_file(tmp_path, f'{LAZYNET}:workload'))!r}); s.with_cached_probe('gloo'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision', 'ray')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "ORCH_CACHE_DIR": str(cache)})
    assert done.stdout.strip() == "[]"


def test_a_training_script_is_probed_for_its_memory_its_epoch_size_is_the_sweep_files(tmp_path, cache):
    sweep = load_sweep(REPO / "examples" / "ddp_script" / "sweep.yaml")
    facts = sweep.facts
    assert facts.probeable and facts.needs_probe() and facts.unknown() == ["memory per rank", "FLOPs per sample"]
    assert facts.samples.value == 2048 and facts.samples.source == "the sweep file’s workload.samples_per_epoch: 2,048"
    assert facts.memory.source == "not known yet: the script has not been probed (`orch probe` runs it as one rank)"
    # The key follows the script's content and arguments, not a workload's parameters.
    from orchestrator.core.planning.probe import probe_key
    from orchestrator.io.probe_cache import probe_key_fields

    fields = probe_key_fields(sweep, "gloo")
    assert fields["code"] == sweep.spec.workload.script_sha256 and fields["params"] == {
        "args": list(sweep.spec.workload.arg_texts)}
    other = dataclasses.replace(sweep, spec=dataclasses.replace(sweep.spec, workload=dataclasses.replace(
        sweep.spec.workload, args=(*sweep.spec.workload.args, "--extra"))))
    assert probe_key(probe_key_fields(other, "gloo")) != probe_key(fields)
    # A script whose memory the sweep file states is not probed at all.
    stated = dataclasses.replace(sweep, spec=dataclasses.replace(sweep.spec, constraints=dataclasses.replace(
        sweep.spec.constraints, rank_memory_mib=900.0)))
    assert not stated.facts.needs_probe()


def test_a_probe_counted_by_torchs_own_convolution_formula_is_measured_again_its_folder_copy_still_reads(
        tmp_path, cache):
    """The FLOP rule is a key of the cache: a probe cached before the valid-tap count (key fields without it, its
    FLOPs torch's own formula's) is a miss; the same file kept in a results folder still reads (format 2: its
    memory is measured as now)."""
    from orchestrator.core.profile.flop_count import FLOPS_RULE
    from orchestrator.io.probe_cache import PROBE_FILE, read_probe

    sweep = load_sweep(sweep_file(tmp_path, f"{LAZYNET}:workload"))
    fields = probe_key_fields(sweep, "gloo")
    assert fields["flops_rule"] == FLOPS_RULE == "valid-taps"
    older = {k: v for k, v in fields.items() if k != "flops_rule"}
    path, _ = store_probe("lazynet", fake_probe(older))
    assert cached_probe("lazynet", older) is not None and cached_probe("lazynet", fields) is None
    kept = tmp_path / PROBE_FILE
    kept.write_text(path.read_text())
    assert read_probe(kept) is not None and read_probe(kept).flops_per_sample == 10.0
