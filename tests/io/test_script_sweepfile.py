"""A sweep that names a script: its placeholders, the script found, hashed and labelled at load, every bad input
an exit status of 2 at plan time, the hash kept in spec.json so that a changed script refuses a resume, and the
plan's backend for a script."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.core.json.schema import InvalidInput
from orchestrator.core.machine.topology import CompactTopology, build_compact
from orchestrator.core.planning.plan import make_plan
from orchestrator.core.planning.script import arg_problems, environment, fill_args, trial_values
from orchestrator.io.store import spec_changes
from orchestrator.io.sweepfile import load_sweep, sweep_from_frozen

SCRIPT = "import orch.script\n"
SWEEP = """\
name: mine
workload:
  script: train.py
  args: [--batch-size, "{local_batch}", --lr, "{lr}", --epochs, "{max_epochs}", --note, 0.5]
grid:
  ranks: [1, 2]
  threads_per_rank: [1]
  local_batch: [8]
convergence:
  metric: top1
  target: 0.9
  max_epochs: 2.5
  base_lr: 0.1
  base_batch: 8
"""


def _folder(tmp_path: Path, sweep: str = SWEEP, script: str | None = SCRIPT) -> Path:
    (tmp_path / "sweep.yaml").write_text(sweep)
    if script is not None:
        (tmp_path / "train.py").write_text(script)
    return tmp_path / "sweep.yaml"


def test_placeholders_are_filled_and_given_as_environment_variables():
    values = trial_values(ranks=2, threads=3, local_batch=8, seed=1, lr=0.1 * 2 ** 0.5, max_epochs=2.5)
    assert fill_args(["-b", "{local_batch}", "--gb={global_batch}", "{{literal}}", "{lr}"], values) == \
        ["-b", "8", "--gb=16", "{literal}", "0.141421"]
    assert environment(values)["ORCH_THREADS"] == "3" and environment(values)["ORCH_MAX_EPOCHS"] == "3"
    assert "lr" not in trial_values(ranks=1, threads=1, local_batch=8, seed=0, lr=None, max_epochs=None)
    assert arg_problems(["{local_batch}", "{{x}}"]) == []
    assert arg_problems(["{batch", "{seed!r}"]) == [
        "args[0]: expected '}' before end of string",
        "args[1]: {seed!r}: a placeholder is a bare name such as {local_batch}"]


def test_a_script_is_found_relative_to_the_sweep_file_hashed_and_labelled(tmp_path):
    sweep = load_sweep(_folder(tmp_path))
    w = sweep.spec.workload
    assert w.script == str((tmp_path / "train.py").resolve()) and w.name == "train"
    assert w.script_sha256 == hashlib.sha256(SCRIPT.encode()).hexdigest()
    assert sweep.workload.name == "train" and sweep.workload_source.startswith(f"script {w.script} (sha256 ")
    frozen = sweep.frozen_spec()
    assert frozen["workload"]["script_sha256"] == w.script_sha256 and frozen["workload"]["params"] == {}
    # report and predict read the sweep back from spec.json, with or without the script beside it
    (tmp_path / "train.py").unlink()
    again = sweep_from_frozen(frozen, tmp_path / "spec.json")
    assert again.spec.workload == w and again.workload.name == "train"


def test_specs_derived_without_convergence_stay_valid(tmp_path):
    # `orch predict`'s capacity plan and `orch profile` plan a copy of the spec without its convergence section:
    # {lr} is a sweep file's problem, checked when it is loaded, never a derived spec's.
    spec = load_sweep(_folder(tmp_path)).spec
    assert dataclasses.replace(spec, convergence=None).convergence is None


def test_a_changed_script_refuses_a_resume(tmp_path):
    old = load_sweep(_folder(tmp_path)).frozen_spec()
    (tmp_path / "train.py").write_text(SCRIPT + "# changed\n")
    new = load_sweep(tmp_path / "sweep.yaml").frozen_spec()
    changes = spec_changes(old, new, {}, {})
    assert len(changes) == 1 and changes[0].startswith("workload.script_sha256: ")


def test_a_stated_hash_accepts_only_that_script(tmp_path):
    sha = hashlib.sha256(SCRIPT.encode()).hexdigest()
    assert load_sweep(_folder(tmp_path, SWEEP.replace("script: train.py", f"script: train.py\n  script_sha256: {sha}")))
    (tmp_path / "train.py").write_text("print('another')\n")
    with pytest.raises(InvalidInput, match=f"workload.script_sha256 .*not {sha}: the script changed"):
        load_sweep(tmp_path / "sweep.yaml")


def run_bad(capsys, path: Path) -> str:
    assert main(["plan", str(path)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("orch: ") and "Traceback" not in err + out
    return err


@pytest.mark.parametrize("sweep, script, expected", [
    (SWEEP, None, "workload.script (line 3): {folder}/train.py does not exist"),
    (SWEEP.replace("script: train.py", "script: ."), SCRIPT, "workload.script (line 3): {folder} is not a file"),
    (SWEEP.replace("  args:", "  params: {a: 1}\n  args:"), SCRIPT,
     "workload (line 2): params: a script takes its settings as args, not params"),
    (SWEEP.replace("{local_batch}", "{batch}"), SCRIPT, "workload (line 2): args[1]: unknown placeholder {batch}; valid: "),
    (SWEEP.replace("  args:", "  flops: 3\n  args:"), SCRIPT, "workload.flops (line 4): unknown key; valid keys are: args, "
                                                             "flops_per_sample, name, params, samples_per_epoch, script, script_sha256"),
    (SWEEP.split("convergence:")[0], SCRIPT, "workload (line 2): args[3]: {lr} needs a convergence section"),
    (SWEEP + "  warmup_epochs: 1\n", SCRIPT, "convergence.warmup_epochs (line 15): orch cannot set a script's learning rate"),
    (SWEEP.replace("  script: train.py\n", ""), SCRIPT, "workload (line 2): give the workload's name, or a script to run"),
], ids=["missing", "a-folder", "params", "unknown-placeholder", "unknown-key", "lr-without-convergence",
        "lr-warmup", "neither"])
def test_a_bad_script_sweep_is_exit_2_at_plan_time(tmp_path, capsys, sweep, script, expected):
    err = run_bad(capsys, _folder(tmp_path, sweep, script))
    assert expected.replace("{folder}", str(tmp_path.resolve())) in err


def test_an_unreadable_script_is_exit_2(tmp_path, capsys):
    # A file whose read fails whoever reads it (root reads a file of mode 0): this process's memory file.
    err = run_bad(capsys, _folder(tmp_path, SWEEP.replace("script: train.py", "script: /proc/self/mem"), None))
    assert f"workload.script (line 3): /proc/{os.getpid()}/mem cannot be read: Input/output error" in err
    if os.geteuid() != 0:
        path = _folder(tmp_path)
        (tmp_path / "train.py").chmod(0)
        try:
            assert f"{(tmp_path / 'train.py').resolve()} is not readable" in run_bad(capsys, path)
        finally:
            (tmp_path / "train.py").chmod(0o644)


def test_orch_plan_names_the_script_and_its_arguments(tmp_path, capsys):
    assert main(["plan", str(_folder(tmp_path))]) == 0
    out = " ".join(capsys.readouterr().out.split())   # rich wraps long lines
    assert f"sweep mine: script {(tmp_path / 'train.py').resolve()} --batch-size {{local_batch}} --lr {{lr}}" in out
    assert "a script chooses its own backend" in out


def test_auto_means_gloo_for_a_script_and_ccl_runs_only_when_asked(tmp_path):
    sweep = load_sweep(_folder(tmp_path))
    topology = build_compact(CompactTopology(name="box", sockets=1, cores_per_socket=2, memory_gib=8))
    auto = make_plan(sweep.spec, topology, rank_memory_mib=lambda b: None, ccl_available=True)
    assert auto.backend.chosen == "gloo" and "a script chooses its own backend" in auto.backend.note
    spec = dataclasses.replace(sweep.spec, backend="ccl")
    assert make_plan(spec, topology, rank_memory_mib=lambda b: None, ccl_available=True).backend.chosen == "ccl"


def test_the_time_estimate_says_a_script_needs_its_flops_stated(tmp_path):
    from orchestrator.core.json.schema import load
    from orchestrator.run.driver.estimate import sweep_estimate
    from orchestrator.run.driver.kinds.base import SweepContext
    from orchestrator.run.driver.kinds.throughput import ThroughputItem

    compact, problems = load(CompactTopology, {"name": "box", "sockets": 1, "cores_per_socket": 2, "memory_gib": 8,
                                               "isa": {"features": ["avx2"], "fp32_gflops": 20.0}})
    assert not problems
    topology = build_compact(compact)

    def estimate(sweep_text: str) -> tuple[object, str]:
        sweep = load_sweep(_folder(tmp_path, sweep_text))
        plan = make_plan(sweep.spec, topology, rank_memory_mib=lambda b: None, ccl_available=False)
        ctx = SweepContext(sweep, plan, nodes=1, convergence=False)
        return sweep_estimate(ctx, ThroughputItem.plan_items(ctx))

    eta, why = estimate(SWEEP)
    assert eta is None and why == "no time estimate: the sweep file gives no workload.flops_per_sample for the script"
    eta, basis = estimate(SWEEP.replace("  args:", "  flops_per_sample: 1.0e+9\n  args:"))
    assert eta is not None and basis.startswith("1 GFLOP per sample (the sweep file’s)")


def test_unquoted_arguments_reach_the_script_as_written(tmp_path):
    """YAML 1.1 reads `010` as 8, `1.10` as 1.1 and `12:30` as 750; a shell would pass them as written, and so
    does orch. A number that reads back as written stays a number (older folders' specs kept it so)."""
    sweep = _folder(tmp_path, SWEEP.replace("--note, 0.5]", "--note, 0.5, --a, 010, --b, 1.10, --c, 12:30, 7]"))
    assert load_sweep(sweep).spec.workload.arg_texts[-8:] == ("0.5", "--a", "010", "--b", "1.10", "--c", "12:30", "7")
    assert load_sweep(sweep).frozen_spec()["workload"]["args"][-1] == 7


def test_a_changed_helper_beside_the_script_refuses_a_resume(tmp_path):
    """The Python files of the script's folder are in its fingerprint (workload.script_sources); a folder written
    before it was kept resumes as its script's own hash allows."""
    (tmp_path / "helper.py").write_text("X = 1\n")
    old = load_sweep(_folder(tmp_path)).frozen_spec()
    (tmp_path / "helper.py").write_text("X = 2\n")
    new = load_sweep(tmp_path / "sweep.yaml").frozen_spec()
    changes = spec_changes(old, new, {}, {})
    assert len(changes) == 1 and changes[0].startswith("workload.script_sources: "), changes
    older = {**old, "workload": {k: v for k, v in old["workload"].items() if k != "script_sources"}}
    assert spec_changes(older, new, {}, {}) == []
