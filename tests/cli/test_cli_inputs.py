"""Bad input through `orchestrator.cli.main(argv)`: exit status 2, a message naming the problem (with its
line where there is one), and never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli import main

REPO = Path(__file__).resolve().parents[2]
EMULATED = str(REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml")

SWEEP = """\
name: broken
workload:
  name: classifier
  params:
    hidden: 64
grid:
  ranks: [1, 2]
  threads_per_rank: [1]
  local_batch: [32]
measure:
  timed_steps: 5
convergence:
  metric: accuracy
  target: 0.9
  base_lr: 0.05
  base_batch: 32
"""

TOPOLOGY = """\
name: box
sockets: 2
cores_per_socket: 1
memory_gib: 4
cpus:
  - [0]
  - [1]
"""


def run_bad(capsys, argv: list[str]) -> str:
    """Run `orch argv`, expect exit status 2 and no traceback; return stderr."""
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert err.startswith("orch: ")
    return err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def sweep_with(tmp_path: Path, old: str, new: str) -> str:
    assert old in SWEEP
    return write(tmp_path, "sweep.yaml", SWEEP.replace(old, new, 1))


def test_the_base_files_are_valid(tmp_path, capsys):
    topology = write(tmp_path, "topo.yaml", TOPOLOGY)
    assert main(["plan", write(tmp_path, "sweep.yaml", SWEEP), "--topology", topology]) == 0
    assert "2 of 2 grid points will run" in capsys.readouterr().out


# --- sweep files -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, expected", [
    ("measure:\n", "measure:\n  repeat: 3\n",
     "measure.repeat (line 11): unknown key; valid keys are: allreduce, data, isolation, peak, probe, repeats, "
     "startup_timeout_s, step_timeout_s, timed_steps, timeout_s, warmup_steps"),
    ("name: broken\n", "name: broken\nnodes: 4\n", "nodes (line 2): unknown key; valid keys are: adaptive, backend, "),
    ("timed_steps: 5", "timed_steps: five", "measure.timed_steps (line 11): must be int, got 'five'"),
    ("local_batch: [32]", "local_batch: [32, -4]", "grid.local_batch[1] (line 9): must be >= 1, got -4"),
    ("ranks: [1, 2]", "ranks: [0, 2]", "grid.ranks[0] (line 7): must be >= 1, got 0"),
    ("ranks: [1, 2]", "ranks: []", "grid (line 6): grid.ranks: must list at least one value"),
    ("timed_steps: 5", "timed_steps: 5\n  timed_steps: 6",
     "measure.timed_steps (line 12): duplicate key (YAML would silently keep the last one)"),
    ("ranks: [1, 2]", "ranks: [1, 2", "(line 8): YAML syntax error"),
    ("name: classifier", "name: classifer",
     "workload.name (line 3): no workload named 'classifer': the entry points of group orch.workloads are: chaos, classifier, "),
    ("hidden: 64", "hidden: 64\n    depth: 3",
     "workload.params.depth (line 6): unknown key; valid keys are: classes, data_seed, ddp_bucket_mb, ddp_comm_hook, "
     "ddp_grad_as_bucket_view, features, hidden, ipex, lr, "),
    ("hidden: 64", "hidden: 0", "workload.params.hidden (line 5): must be >= 1, got 0"),
    ("hidden: 64", "hidden: 64\n    ddp_comm_hook: int8",
     "workload.params.ddp_comm_hook (line 6): must be one of 'none', 'bf16', 'fp16'; got 'int8'"),
    ("metric: accuracy", "metric: map",
     "convergence.metric (line 13): 'map' is not a metric of workload classifier; it reports: accuracy"),
    ("  target: 0.9\n", "", "convergence.target (line 12): required (value of the metric that counts as converged)"),
    ("convergence:\n", "backend: mpi\nconvergence:\n", "backend (line 12): must be one of 'auto', 'ccl', 'gloo'"),
], ids=["unknown-nested-key", "unknown-key", "wrong-type", "negative", "zero-ranks", "empty-list", "duplicate",
        "yaml-syntax", "unknown-workload", "unknown-param", "bad-param", "bad-ddp-switch", "bad-metric", "missing-key",
        "bad-enum"])
def test_malformed_sweep_file(tmp_path, capsys, old, new, expected):
    err = run_bad(capsys, ["plan", sweep_with(tmp_path, old, new), "--topology", EMULATED])
    assert expected in err


def test_every_problem_in_a_sweep_file_reported_at_once(tmp_path, capsys):
    text = SWEEP.replace("ranks: [1, 2]", "ranks: [0, 2]").replace("timed_steps: 5", "timed_steps: x") \
        .replace("hidden: 64", "hidden: 64\n    depth: 3")
    err = run_bad(capsys, ["plan", write(tmp_path, "s.yaml", text), "--topology", EMULATED])
    assert "3 problem(s)" in err
    assert "grid.ranks[0] (line 8)" in err and "measure.timed_steps (line 12)" in err
    assert "workload.params.depth (line 6)" in err


@pytest.mark.parametrize("text, expected", [
    ("", "the file is empty"),
    ("# only a comment\n", "the file is empty"),
    ("- 1\n- 2\n", "<top>: must be a mapping, got [1, 2]"),
    ("name: x\n", "workload: required"),
    ("convergence:\n" + SWEEP.replace("convergence:\n", "other:\n"), "other (line 13): unknown key"),
    ("name: x\nworkload: {name: classifier}\ngrid: {local_batch: [1]}\nconstraints: {memory_headroom: 1.5}\n",
     "constraints.memory_headroom (line 4): must be <= 1, got 1.5"),
    ("name: x\nworkload: {name: classifier}\ngrid: {local_batch: [1]}\nconvergence: {seeds: [1]}\n",
     "convergence.metric (line 4): required"),
])
def test_degenerate_sweep_files(tmp_path, capsys, text, expected):
    assert expected in run_bad(capsys, ["plan", write(tmp_path, "s.yaml", text), "--topology", EMULATED])


def test_sweep_file_that_is_not_utf8(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_bytes(b"name: \xff\xfe\n")
    assert "is not UTF-8 text (byte 6 is 0xff)" in run_bad(capsys, ["plan", str(path), "--topology", EMULATED])


def test_missing_sweep_file(tmp_path, capsys):
    err = run_bad(capsys, ["plan", str(tmp_path / "nope.yaml"), "--topology", EMULATED])
    assert f"sweep file {tmp_path / 'nope.yaml'}: 1 problem(s):\n  - <top>: file not found" in err


def test_sweep_path_is_a_directory(tmp_path, capsys):
    assert "is a directory, not a file" in run_bad(capsys, ["plan", str(tmp_path), "--topology", EMULATED])


def test_null_sections_are_defaults_not_crashes(tmp_path, capsys):
    text = "name: x\nworkload: {name: classifier}\ngrid: {ranks: [1], threads_per_rank: [1], local_batch: [1]}\n" \
           "measure:\nconvergence:\nconstraints: {rank_memory_mib: null}\n"
    assert main(["plan", write(tmp_path, "s.yaml", text), "--topology", EMULATED]) == 0
    out, err = capsys.readouterr()
    assert "1 of 1 grid points will run" in out and err == ""


# --- topology files ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    (TOPOLOGY.replace("sockets: 2", "socket: 2"), "socket (line 2): unknown key; valid keys are: "),
    (TOPOLOGY.replace("cores_per_socket: 1", "cores_per_socket: one"),
     "cores_per_socket (line 3): must be int, got 'one'"),
    (TOPOLOGY.replace("memory_gib: 4", "memory_gib: -4"), "memory_gib (line 4): must be > 0, got -4.0"),
    (TOPOLOGY.replace("- [1]", "- [1"), "YAML syntax error"),
    (TOPOLOGY + "name: again\n", "name (line 8): duplicate key"),
    (TOPOLOGY.replace("  - [1]\n", ""), "cpus: lists 1 socket(s) but sockets is 2"),
    (TOPOLOGY.replace("- [1]", "- [0]"), "cpus[1][0]: CPU id 0 appears twice"),
    ("", "the file is empty"),
    ("nodes:\n  - name: a\n    memory_mib: 1024\n    sockets: [[0, 1]]\n    numa_nodes:\n"
     "      - {cpus: [0, 1], memory_mib: lots}\n",
     "nodes[0].numa_nodes[0].memory_mib (line 6): must be float, got 'lots'"),
    ("nodes:\n  - name: a\n    memory_mib: 1024\n    sockets: [[0, 1], [1]]\n",
     "nodes[0].sockets[1][0] (line 4): CPU id(s) [1] appear twice"),
], ids=["unknown-key", "wrong-type", "negative", "yaml-syntax", "duplicate", "cpus-count", "cpus-duplicate", "empty",
        "detailed-numa-type", "detailed-duplicate-cpu"])
@pytest.mark.parametrize("command", ["plan", "topology"])
def test_malformed_topology_file(tmp_path, capsys, text, expected, command):
    topology = write(tmp_path, "topo.yaml", text)
    argv = (["plan", write(tmp_path, "s.yaml", SWEEP)] if command == "plan" else ["topology"]) + [
        "--topology", topology]
    err = run_bad(capsys, argv)
    assert f"topology file {topology}" in err
    assert expected in err


def test_detailed_topology_type_and_cpu_problems_are_reported_together_with_lines(tmp_path, capsys):
    text = ("nodes:\n  - name: a\n    memory_mib: lots\n    sockets: [[0]]\n"
            "  - name: b\n    memory_mib: 1024\n    sockets: [[0, 1], [1]]\n")
    err = run_bad(capsys, ["topology", "--topology", write(tmp_path, "topo.yaml", text)])
    assert "2 problem(s)" in err
    assert "nodes[0].memory_mib (line 3): must be float, got 'lots'" in err
    assert "nodes[1].sockets[1][0] (line 7): CPU id(s) [1] appear twice" in err


@pytest.mark.parametrize("command", ["plan", "topology"])
def test_missing_topology_file_or_directory(tmp_path, capsys, command):
    prefix = ["plan", write(tmp_path, "s.yaml", SWEEP)] if command == "plan" else ["topology"]
    assert "file not found" in run_bad(capsys, prefix + ["--topology", str(tmp_path / "none.yaml")])
    assert "is a directory" in run_bad(capsys, prefix + ["--topology", str(tmp_path)])


# --- options -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["plan", "s.yaml", "--bogus"], "unrecognized arguments: --bogus"),
    (["topology", "--jsn"], "unrecognized arguments: --jsn"),
    (["plan"], "the following arguments are required: SWEEP"),
    ([], "the following arguments are required: COMMAND"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["plan", "s.yaml", "--topology"], "argument --topology: expected one argument"),
])
def test_usage_errors_exit_2(capsys, argv, expected):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2
    assert expected in err and "Traceback" not in err


# --- absurd inputs: refused at once with the numbers, not planned for minutes --------------------------------

LAUGHS = "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi"))


@pytest.mark.parametrize("text, expected", [
    ("name: &n [*n]\n", "<top> (line 1): a YAML alias refers to its own anchor"),
    ("name: x\nworkload: &w {name: classifier, params: {x: *w}}\n", "<top> (line 2): a YAML alias refers to its own"),
    (LAUGHS, "YAML aliases expand the file from 28 to 490,329,064 values, more than the 100,000 extra values"),
    ("a: " + "[" * 3000 + "]" * 3000 + "\n", "<top>: nested too deeply to read"),
], ids=["recursive-alias", "recursive-alias-in-mapping", "alias-bomb", "deep-nesting"])
@pytest.mark.parametrize("what", ["sweep", "topology"])
def test_yaml_that_never_ends_is_refused(tmp_path, capsys, text, expected, what):
    bad = write(tmp_path, "bad.yaml", text)
    argv = ["plan", bad, "--topology", EMULATED] if what == "sweep" else ["topology", "--topology", bad]
    assert expected in run_bad(capsys, argv)


def test_a_million_nodes_is_refused(tmp_path, capsys):
    topology = write(tmp_path, "t.yaml", "nodes: 1000000\nsockets: 2\ncores_per_socket: 28\nmemory_gib: 192\n")
    err = run_bad(capsys, ["plan", write(tmp_path, "s.yaml", SWEEP), "--topology", topology])
    assert "nodes (line 1): must be <= 200000, got 1000000" in err


def test_a_grid_too_large_to_plan_is_refused(tmp_path, capsys):
    values = ", ".join(map(str, range(1, 301)))
    sweep = sweep_with(tmp_path, "  ranks: [1, 2]\n  threads_per_rank: [1]\n  local_batch: [32]",
                       f"  ranks: [{values}]\n  threads_per_rank: [{values}]\n  local_batch: [32]")
    err = run_bad(capsys, ["plan", sweep, "--topology", EMULATED])
    assert "grid: the grid has 300 ranks × 300 threads × 1 local batch values = 90,000 points, more than orch " \
           "plans at once (50,000)" in err


def test_the_embedded_ray_settings_last_only_as_long_as_the_command(monkeypatch):
    """An embedded Ray's loopback and quiet settings are set while a command runs and removed after it: left in
    the environment of a notebook or a test run, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 stopped a later `ray start`
    from forming a two-node cluster ("Multi-node Ray clusters are not supported")."""
    import os

    from orchestrator.app.session import embedded_ray_environment
    from orchestrator.constants import RAY_LOOPBACK_ENV_VAR

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv(RAY_LOOPBACK_ENV_VAR, raising=False)
    monkeypatch.setenv("RAY_event_stats", "1")          # the user's own setting wins and stays
    with embedded_ray_environment(None):
        assert os.environ[RAY_LOOPBACK_ENV_VAR] == "0" and os.environ["RAY_event_stats"] == "1"
    assert RAY_LOOPBACK_ENV_VAR not in os.environ and os.environ["RAY_event_stats"] == "1"
    with embedded_ray_environment("127.0.0.1:6379"):    # joining a cluster: its own settings
        assert RAY_LOOPBACK_ENV_VAR not in os.environ


@pytest.mark.parametrize("env, address, said", [
    ({"RAY_ADDRESS": "10.0.0.9:6379"}, None, "RAY_ADDRESS=10.0.0.9:6379 is set: joining that Ray cluster"),
    ({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"}, None,
     "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1 is set: the embedded Ray listens on this machine's network address"),
    ({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}, None, None),      # orch's own value: nothing to say
    ({"RAY_ADDRESS": "10.0.0.9:6379"}, "10.0.0.9:6379", None),    # --address given: nothing hidden
    ({}, None, None),
])
def test_a_preset_ray_setting_that_changes_where_ray_listens_is_said_in_one_line(monkeypatch, capsys, env, address,
                                                                                   said):
    from orchestrator.app.session import embedded_ray_environment
    from orchestrator.cli.logs import configure

    configure(None, terminal=False)   # as `main` does: the note is a log record, shown on stderr
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with embedded_ray_environment(address):
        pass
    err = capsys.readouterr().err
    if said is None:
        assert err == ""
    else:
        assert err.count("\n") == 1 and err.startswith("warning: ") and said in err
