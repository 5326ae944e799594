"""`orch profile` end to end on a real local Ray: the classifier at 1×1 through the same placement,
pinned launcher and rank process as a throughput trial; and the bad-input paths (exit 2)."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import CPUS, write_sweep

from orchestrator.cli import main
from orchestrator.cli.profile_cmd import DEFAULT_MAX_PASSES
from orchestrator.core.profile.checks import check_target
from orchestrator.io.caches import cpu_caches
from orchestrator.io.profile_store import RESULT_FILE, load_result

pytestmark = [pytest.mark.ray]

CLASSIFIER = """
workload:
  name: classifier
  params: {hidden: 64, train_samples: 2048}
grid:
  ranks: [1]
  threads_per_rank: [1]
  local_batch: [32]
profile:
  layouts: [1x1x32]
  warmup_steps: 2
  steps: 2
"""


@pytest.fixture(scope="module")
def profiled(ray_local, tmp_path_factory):
    folder = tmp_path_factory.mktemp("profile")
    sweep = write_sweep(folder, "prof", CLASSIFIER)
    out = folder / "out"
    code = main(["profile", str(sweep), "--out", str(out)])
    return sweep, out, code


def test_classifier_1x1_is_profiled_through_ray(profiled):
    _, out, code = profiled
    assert code == 0
    result = json.loads((out / "1x1x32" / "profile-result.json").read_text())
    assert result["status"] == "ok", result.get("reason")
    assert len(result["results"]) == 1
    # Pinned like a throughput trial: the rank's threads could only run on its one planned CPU.
    assert result["observed_cpus"] == [result["placement"][0]["cpus"]]
    rank0 = result["results"][0]
    assert len(rank0["plain_step_ms"]) == 2 * 2 and len(rank0["verbose_step_ms"]) == 2   # plain: first and last
    assert len(rank0["profiler"]["step_ms"]) == 2
    ops = {row["op"] for row in rank0["profiler"]["ops"]}
    assert "aten::addmm" in ops                       # the fp32 linear layers, seen by the profiler
    assert any(r["gflop_per_step"] > 0 for r in rank0["profiler"]["ops"])
    layers = {row["layer"] for row in rank0["profiler"]["layers"]}
    assert {"net.0", "net.2"} <= layers               # the MLP's Linear layers
    assert rank0["peak"]["gflops"] > 0 and rank0["stream_triad_gbs"] > 0
    # the compute roof: the best of run.rank.roof's primitives (fastest calls) and the GEMM peak
    assert rank0["peak"]["gflops"] == max(rank0["peak"]["gemm_gflops"], *rank0["peak"]["roof_by_primitive"].values())
    # a bandwidth roof per level, each triad inside its level, DRAM's the one the summary calls triad_gbs
    levels = {r["level"]: r for r in rank0["level_roofs"]}
    if not cpu_caches(result["placement"][0]["cpus"]):
        pytest.skip("this machine's sysfs lists no caches: no roof per level")
    assert set(levels) >= {"L1", "L2", "DRAM"} and levels["L1"]["gbs"] is None
    assert all(0 < r["triad_bytes"] <= r["fits_bytes"] for name, r in levels.items() if name not in ("L1", "DRAM"))
    assert levels["DRAM"]["gbs"] == rank0["stream_triad_gbs"] and levels["DRAM"]["triad_bytes"] >= 96 * 2**20


def test_outputs_are_written(profiled):
    _, out, _ = profiled
    md = (out / "profile.md").read_text()
    for heading in ("## Summary", "## oneDNN primitives", "## Operator categories", "### Top layers"):
        assert heading in md
    for name in ("summary.csv", "summary.json", "categories.csv", "onednn-breakdown.png", "layers.png",
                 "layers-1x1x32.png", "ops-1x1x32.csv", "1x1x32/onednn-rank0.log.gz"):
        assert (out / name).is_file(), name
    trace = json.loads(gzip.decompress((out / "1x1x32" / "trace-rank0.json.gz").read_bytes()))
    assert any(e.get("name", "").startswith("ProfilerStep#") for e in trace["traceEvents"])


def test_fp32_linear_layers_do_not_reach_onednn(profiled):
    """On this CPU torch sends fp32 matmuls to BLAS (MKL), not oneDNN: the verbose log has no primitive,
    so the whole step is 'outside oneDNN' and the operator table is what explains it."""
    _, out, _ = profiled
    rank0 = json.loads((out / "1x1x32" / "profile-result.json").read_text())["results"][0]
    assert rank0["onednn"]["executions"] == 0
    summary = json.loads((out / "summary.json").read_text())[0]
    assert summary["onednn_ms_per_step"] == 0


@pytest.mark.skipif(len(CPUS) > 2, reason="the layout must not fit this machine")
def test_a_layout_that_cannot_run_is_bad_input(ray_local, tmp_path, capsys):
    sweep = write_sweep(tmp_path, "prof", CLASSIFIER)
    assert main(["profile", str(sweep), "--layout", "4x1x32", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "layout 4x1x32: cannot run on" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_a_layout_the_workload_has_no_batch_for_is_bad_input(ray_local, tmp_path, capsys):
    sweep = write_sweep(tmp_path, "prof", CLASSIFIER)
    assert main(["profile", str(sweep), "--layout", "1x1x4096"]) == 2
    err = " ".join(capsys.readouterr().err.split())   # rich wraps lines
    # The plan's dataset rule refuses it before anything starts: not one local batch per rank in an epoch.
    assert "layout 1x1x4096: cannot run" in err and "2,048 per rank < local batch 4096" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("args, message", [
    (["--layout", "1x1"], "'1x1' is not RxTxB"),
    (["--layout", "0x1x8"], "ranks must be >= 1"),
    (["--layout", "1x1x8", "--layout", "1x1x8"], "listed twice"),
    (["--layout", "1x1x8", "--steps", "0"], "--steps must be >= 1"),
])
def test_bad_options_exit_2_before_anything_starts(tmp_path, capsys, args, message):
    sweep = write_sweep(tmp_path, "prof", CLASSIFIER)
    assert main(["profile", str(sweep), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_no_layout_anywhere_is_bad_input(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "prof", CLASSIFIER.replace("  layouts: [1x1x32]\n", ""))
    assert main(["profile", str(sweep)]) == 2
    assert "no layout to profile" in capsys.readouterr().err


def test_bad_profile_section_is_reported_with_its_line(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "prof", CLASSIFIER.replace("[1x1x32]", "[1x1x32, 2by2]")
                        + "  variants: {wide: {hidden: 0}}\n")
    assert main(["profile", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "'2by2' is not RxTxB" in err


def test_report_only_rewrites_the_report_from_saved_results(profiled, tmp_path, capsys):
    sweep, out, _ = profiled
    (out / "profile.md").unlink()
    (out / "summary.csv").unlink()
    assert main(["profile", str(sweep), "--out", str(out), "--report-only"]) == 0
    assert "## Summary" in (out / "profile.md").read_text()
    assert (out / "summary.csv").is_file()
    assert main(["profile", str(sweep), "--out", str(tmp_path / "empty"), "--report-only"]) == 2
    assert "holds no complete `orch profile` output" in capsys.readouterr().err


def test_every_pass_records_the_ranks_cpu_share_and_the_runs_it_took(profiled):
    """The physical checks read each pass's CPU share per rank; the result says how many runs
    the target took (a run whose own checks fail is repeated, at most --max-passes)."""
    _, out, _ = profiled
    result = json.loads((out / "1x1x32" / "profile-result.json").read_text())
    passes, disturbed = result["passes"], result["disturbed_passes"]
    assert all(reasons and all(": " in r for r in reasons) for reasons in disturbed), disturbed   # each says why
    if len(disturbed) == passes:     # every run failed its own checks: it gave up only at the limit
        assert passes == DEFAULT_MAX_PASSES
    else:                            # it ran again only while disturbed, and its last run passes its checks
        assert len(disturbed) == passes - 1
        assert check_target(load_result(out / "1x1x32" / RESULT_FILE)) == []
    assert f"1x1x32 {passes}" in (out / "profile.md").read_text()     # the report says how many it took
    rank0 = result["results"][0]
    for name in ("plain", "verbose", "profiler"):
        assert 0 < rank0[f"{name}_cpu_share"] <= 1.5, name   # CPU time ÷ wall ÷ threads (a little over 1: helpers)
    md = (out / "profile.md").read_text()
    assert md.index("## Checks") < md.index("## Summary") and "## Attribution per rank" in md


def test_a_replayed_problem_is_called_until_enough_calls_and_time(monkeypatch):
    """Five calls could not tell a slow kernel from one that lost a CPU to another
    process for a scheduler slice. A replay now calls at least REPLAY_MIN_RUNS times and for at least
    REPLAY_MIN_S, never more than REPLAY_MAX_RUNS."""
    import time

    from orchestrator.run.rank import profile_replay as prp

    calls = []
    prp._captured(lambda: calls.append(1), min_runs=4, min_s=0.0, max_runs=50)
    assert len(calls) == 2 + 4                     # two warm-up calls, then the minimum
    calls.clear()
    prp._captured(lambda: (calls.append(1), time.sleep(0.01)), min_runs=4, min_s=0.1, max_runs=50)
    assert 2 + 9 <= len(calls) <= 2 + 12           # ~0.1 s of 10 ms calls
    calls.clear()
    prp._captured(lambda: (calls.append(1), time.sleep(0.01)), min_runs=4, min_s=10.0, max_runs=7)
    assert len(calls) == 2 + 7


def test_each_problem_is_replayed_in_blocks_spread_over_passes_through_all_problems(monkeypatch):
    """A burst of other work can cover every back-to-back call of a short primitive, so the replay makes
    REPLAY_PASSES passes through all problems, each a block of calls per problem (found in a quiet run at
    1 × 2: a different small primitive 1.2-2.2× slower alone on each try while its calls were back to back).
    The real torch calls run; only the capture around them is recorded instead of timed."""
    from orchestrator.core.profile import onednn_verbose as ov
    from orchestrator.run.rank import profile_replay as prp

    shapes = [ov.ShapeTotal("convolution", "forward", p, "f32", "abcd", 1, 1.0) for p in
              ("mb1_ic4oc4_ih8oh8kh3sh1dh0ph1_iw8ow8kw3sw1dw0pw1", "mb1_ic8oc8_ih8oh8kh3sh1dh0ph1_iw8ow8kw3sw1dw0pw1")]
    order, budgets = [], []

    def captured(call, min_runs, min_s, max_runs):
        out = call()
        order.append(out.shape[1])      # which problem (by its channels) this block ran
        budgets.append((min_runs, min_s, max_runs))
        shape = shapes[0] if out.shape[1] == 4 else shapes[1]
        execution = ov.Execution(kind=shape.kind, direction=shape.direction, implementation="test",
                                 src="src:f32::blocked:abcd::f0", problem=shape.problem, time_ms=0.5)
        return [execution], 0.6

    monkeypatch.setattr(prp, "_captured", captured)
    rows = prp.replay_shapes(shapes)
    assert order == [4, 8] * prp.REPLAY_PASSES
    per_pass = budgets[0]
    assert per_pass[0] * prp.REPLAY_PASSES >= prp.REPLAY_MIN_RUNS
    assert per_pass[1] * prp.REPLAY_PASSES == pytest.approx(prp.REPLAY_MIN_S)
    assert per_pass[2] * prp.REPLAY_PASSES <= prp.REPLAY_MAX_RUNS
    assert [r["runs"] for r in rows] == [prp.REPLAY_PASSES] * 2 and all(r["isolated_min_ms"] == 0.5 for r in rows)
