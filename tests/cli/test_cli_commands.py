"""`orch plan` and `orch topology` end to end through `main(argv)`, help texts, and two real subprocesses."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.cli import build_parser, main
from orchestrator.io.detect import detect_local
from orchestrator.io.topofile import load_topology

REPO = Path(__file__).resolve().parents[2]
CLASSIFIER = str(REPO / "sweeps" / "classifier.yaml")
TOPOLOGIES = REPO / "sweeps" / "topologies"
EMULATED = str(TOPOLOGIES / "emulated-2s1c.yaml")
VENV_BIN = Path(sys.executable).parent


def flat(text: str) -> str:
    """Rich wraps long lines at the console width; compare text with whitespace runs as single spaces."""
    return " ".join(text.split())


def run_ok(capsys, argv: list[str]) -> str:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "Traceback" not in err
    return out


def subcommands() -> dict:
    (action,) = [a for a in build_parser()._actions if a.dest == "command"]
    return action.choices


# --- orch plan ---------------------------------------------------------------------------------------------

def test_plan_on_the_emulated_two_socket_machine(capsys):
    out = run_ok(capsys, ["plan", CLASSIFIER, "--topology", EMULATED])
    text = flat(out)
    assert "sweep classifier: workload classifier" in text
    assert "threads \\ ranks" in out
    assert "│ 1 │ run │ run │" in text and "│ 2 │ – a │ – a,b │" in text
    assert "a: a rank would span sockets: 2 threads > 1 physical cores (hyperthreads not counted) per socket" in text
    assert "ranks × cores per rank > 2 physical cores" in text
    assert "global batch 64: 2 rank(s) × 1 thread(s), local batch 32; seeds 0, 1, 2" in text
    assert "4 of 8 grid points will run; 12 convergence run(s)" in text


def test_plan_json_has_placements(capsys):
    data = json.loads(run_ok(capsys, ["plan", CLASSIFIER, "--topology", EMULATED, "--json"]))
    by_key = {t["key"]: t for t in data["trials"]}
    assert sorted(by_key) == sorted(f"r{r}-t{t}-b{b}" for r in (1, 2) for t in (1, 2) for b in (32, 128))
    assert [(p["rank"], p["socket"], p["cpus"]) for p in by_key["r2-t1-b32"]["placement"]] == [
        (0, 0, [0]), (1, 1, [1])]
    assert by_key["r1-t2-b32"]["placement"] == []
    assert by_key["r1-t2-b32"]["reasons"][0]["code"] == "spans_sockets"
    assert data["backend"]["chosen"] in ("gloo", "ccl")
    assert len(data["convergence"]) == 12


@pytest.mark.parametrize("topology, feasible", [
    ("xeon-2s28c-smt.yaml", 8), ("xeon-8s28c.yaml", 8), ("cluster-4x2s28c.yaml", 8), ("emulated-2s1c.yaml", 4),
])
def test_plan_against_every_shipped_topology(capsys, topology, feasible):
    data = json.loads(run_ok(capsys, ["plan", CLASSIFIER, "--topology", str(TOPOLOGIES / topology), "--json"]))
    assert sum(t["feasible"] for t in data["trials"]) == feasible


def test_plan_on_this_machine(capsys):
    out = run_ok(capsys, ["plan", CLASSIFIER])
    assert "[detected on" in flat(out) and "grid points will run" in flat(out)


def test_plan_with_ccl_requested_but_missing_prints_the_plan_and_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("orchestrator.io.backends.ccl_installed", lambda: False)
    sweep = tmp_path / "ccl.yaml"
    sweep.write_text(Path(CLASSIFIER).read_text().replace("grid:", "backend: ccl\ngrid:"))
    rc = main(["plan", str(sweep), "--topology", str(TOPOLOGIES / "xeon-2s28c-smt.yaml")])
    out, err = capsys.readouterr()
    assert rc == 2
    assert "0 of 8 grid points will run" in flat(out)
    assert "backend ccl requested but oneccl_bindings_for_pytorch is not installed" in flat(err)
    assert "Traceback" not in err


# --- orch topology -----------------------------------------------------------------------------------------

def test_topology_table_of_a_file(capsys):
    out = run_ok(capsys, ["topology", "--topology", str(TOPOLOGIES / "xeon-2s28c-smt.yaml")])
    assert "1 node(s): 2 socket(s) × 28 cores × 2 thread(s), 192 GiB" in flat(out)
    assert "0-27" in out and "56-83" in out and "84-111" in out


def test_topology_json_loads_back_as_topology(tmp_path, capsys):
    saved = tmp_path / "here.json"
    saved.write_text(run_ok(capsys, ["topology", "--json"]))
    loaded = load_topology(saved).nodes
    # the same machine, and the same CPU verdict; the probe's own GEMM figures differ from run to run
    assert [replace(n, isa=None) for n in loaded] == [replace(n, isa=None) for n in detect_local().nodes]
    assert [(n.isa.features, n.isa.source, n.isa.bf16_native) for n in loaded] == \
        [(n.isa.features, "probe", n.isa.bf16_native) for n in detect_local(probe_isa=True).nodes]
    # and plans: the saved file is a valid --topology for both commands
    assert "grid points will run" in run_ok(capsys, ["plan", CLASSIFIER, "--topology", str(saved)])
    again = json.loads(run_ok(capsys, ["topology", "--topology", str(saved), "--json"]))
    assert again["nodes"] == json.loads(saved.read_text())["nodes"]


@pytest.mark.parametrize("name", sorted(p.name for p in TOPOLOGIES.glob("*.yaml")))
def test_shipped_topologies_round_trip_through_topology_json(tmp_path, capsys, name):
    original = load_topology(TOPOLOGIES / name)
    saved = tmp_path / "t.json"
    saved.write_text(run_ok(capsys, ["topology", "--topology", str(TOPOLOGIES / name), "--json"]))
    assert load_topology(saved).nodes == original.nodes


# --- help --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(subcommands()))
def test_help_of_every_subcommand_mentions_every_option(capsys, name):
    out = run_ok(capsys, [name, "--help"])
    parser = subcommands()[name]
    assert f"usage: orch {name}" in out
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:   # an old spelling, or --mlflow's value: said by the option's help
            continue
        for option in action.option_strings:
            assert option in out, option
        if not action.option_strings:
            assert (action.metavar or action.dest) in out


def test_top_level_help_lists_every_subcommand(capsys):
    out = run_ok(capsys, ["--help"])
    for name in subcommands():
        assert name in out
    assert "--version" in out


# --- real processes ----------------------------------------------------------------------------------------

def test_orch_console_script_runs(tmp_path):
    orch = VENV_BIN / "orch"
    if not orch.exists():
        pytest.skip(f"{orch} is not installed")
    done = subprocess.run([str(orch), "plan", CLASSIFIER, "--topology", EMULATED, "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert any(t["placement"] for t in data["trials"])
    bad = subprocess.run([str(orch), "plan", str(tmp_path / "missing.yaml")], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "file not found" in bad.stderr and "Traceback" not in bad.stderr


PROBE = """
import contextlib, io, json, sys, time
start = time.perf_counter()
from orchestrator.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "ray", "torchvision"))
print(json.dumps({"rc": rc, "heavy": heavy, "seconds": time.perf_counter() - start}))
"""


@pytest.mark.parametrize("argv", [["plan", CLASSIFIER, "--topology", EMULATED],
                                  ["plan", CLASSIFIER, "--json"]], ids=["file-topology", "detected"])
def test_plan_imports_neither_torch_nor_ray(argv):
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    wall = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rc"] == 0
    assert result["heavy"] == []
    assert wall < 10, f"orch plan took {wall:.1f} s (loose bound; timing targets live in benchmarks/)"


# --- precision from the CPU (issue: orch on any x86-64 CPU) ------------------------------------------------
RETINANET_SWEEP = (REPO / "sweeps" / "retinanet.yaml").read_text()


def _topology(tmp_path, bf16_native: bool) -> str:
    path = tmp_path / f"cpu-{bf16_native}.yaml"
    features = "[avx2, avx512f, avx512_bf16]" if bf16_native else "[avx2]"
    path.write_text(f"sockets: 1\ncores_per_socket: 2\nmemory_gib: 16\nisa:\n  features: {features}\n"
                    f"  bf16_native: {str(bf16_native).lower()}\n")
    return str(path)


def _sweep(tmp_path, precision: str, extra: str = "") -> str:
    path = tmp_path / f"sweep-{precision}.yaml"
    path.write_text(RETINANET_SWEEP.replace("precision: auto", f"precision: {precision}") + extra)
    return str(path)


@pytest.mark.parametrize("native,chosen", [(True, "bf16"), (False, "fp32")])
def test_plan_resolves_precision_auto_from_the_topologys_cpu(tmp_path, capsys, native, chosen):
    plan = json.loads(run_ok(capsys, ["plan", _sweep(tmp_path, "auto"), "--topology", _topology(tmp_path, native),
                                      "--json"]))
    assert plan["precision"]["requested"] == "auto" and plan["precision"]["chosen"] == chosen
    assert plan["precision"]["error"] is None
    # the memory estimate follows: autocast keeps bf16 weight copies only in bf16
    memory = {t["key"]: t["rank_memory_mib"] for t in plan["trials"]}
    other = json.loads(run_ok(capsys, ["plan", _sweep(tmp_path, chosen), "--topology",
                                       _topology(tmp_path, native), "--json"]))
    assert memory == {t["key"]: t["rank_memory_mib"] for t in other["trials"]}


def test_explicit_bf16_on_an_emulating_cpu_is_refused_with_the_reason(tmp_path, capsys):
    rc = main(["plan", _sweep(tmp_path, "bf16"), "--topology", _topology(tmp_path, False)])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in err
    assert "precision bf16 on node" in flat(err) and "constraints.allow_slow_bf16: true" in flat(err)
    assert "– a" in out and "run" not in out.split("Plan, local batch 8")[1].split("\n\n")[0]
    allowed = _sweep(tmp_path, "bf16", "constraints:\n  allow_slow_bf16: true\n")
    out = run_ok(capsys, ["plan", allowed, "--topology", _topology(tmp_path, False)])
    assert "allow_slow_bf16: true) although on" in flat(out) and "grid points will run" in out


def test_auto_falls_back_to_fp32_where_the_parameters_rule_bf16_out(tmp_path, capsys):
    small = tmp_path / "small.yaml"
    small.write_text(RETINANET_SWEEP.replace("image_size: 128", "image_size: 64"))
    plan = json.loads(run_ok(capsys, ["plan", str(small), "--topology", _topology(tmp_path, True), "--json"]))
    assert plan["precision"]["chosen"] == "fp32"
    assert plan["precision"]["reason"].startswith("auto: fp32, because bf16 is ruled out: precision 'bf16' needs "
                                                  "image_size >= 96")


@pytest.mark.isa
def test_topology_json_shows_the_isa_and_the_bf16_verdict(capsys):
    (node,) = json.loads(run_ok(capsys, ["topology", "--json"]))["nodes"]
    isa = node["isa"]
    assert isa["source"] == "probe" and isa["fp32_gflops"] > 0 and isa["bf16_gflops"] > 0
    assert isinstance(isa["bf16_native"], bool) and isa["verdict"].startswith(
        "bf16 native" if isa["bf16_native"] else "bf16 not native")
    assert "avx2" in isa["features"]   # every x86-64 CPU orch supports has it


def test_a_topology_file_refuses_an_unknown_isa_feature(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text("sockets: 1\ncores_per_socket: 2\nmemory_gib: 16\nisa:\n  features: [avx2, avx1024]\n")
    assert main(["topology", "--topology", str(path)]) == 2
    assert "isa.features: unknown ['avx1024']" in capsys.readouterr().err


PLANNED_WORKLOAD = """from pathlib import Path
Path(__file__).with_name("IMPORTED").write_text("orch plan imported me")
from workloads.classifier.workload import ClassifierWorkload as W
"""


def test_plan_says_that_it_runs_the_workloads_code_and_does(tmp_path, capsys):
    """`orch plan` imports the workload's module and calls its factory (its parameters, metrics and memory
    formula are declared there): its help, its docs and the Python API say so, and it does exactly that; a
    training script is read, never run (docs/trust.md)."""
    assert main(["plan", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "it runs the sweep file's code: it imports the workload's module and calls its factory" in help_text
    assert "Starts nothing" not in help_text
    docs = " ".join((REPO / "docs" / "commands.md").read_text().split())
    assert "`orch plan` imports the workload's module" in docs and "imports the workload's module" in " ".join(
        (REPO / "docs" / "trust.md").read_text().split())
    (tmp_path / "mine.py").write_text(PLANNED_WORKLOAD)
    (tmp_path / "s.yaml").write_text("name: mine\nworkload: {name: mine.py:W}\n"
                                     "grid: {ranks: [1], threads_per_rank: [1], local_batch: [8]}\n")
    assert main(["plan", str(tmp_path / "s.yaml"), "--topology", str(REPO / "sweeps/topologies/emulated-2s1c.yaml")]) == 0
    assert (tmp_path / "IMPORTED").exists()
