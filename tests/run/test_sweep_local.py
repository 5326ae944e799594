"""`orch sweep` end to end on a real local Ray: pinning read back from the rank processes, all-reduce
evidence, resume, refusal of a changed spec, and real failures that never end the sweep."""

from __future__ import annotations

import statistics

import pytest
from conftest import EMULATED_2S1C, RankWatch, by_key, read_records, write_sweep

from orchestrator.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.needs_cpus(2)]

CLASSIFIER = """
workload:
  name: classifier
  params: {hidden: 64, train_samples: 2048}
grid:
  ranks: [1, 2]
  threads_per_rank: [1, 2]
  local_batch: [16]
measure: {warmup_steps: 2, timed_steps: 20, repeats: 2, peak: %s}
"""


@pytest.fixture(scope="module")
def emulated_sweep(ray_local, tmp_path_factory):
    """One sweep on the emulated 2-socket × 1-core topology, shared by the assertions below."""
    folder = tmp_path_factory.mktemp("emulated")
    sweep = write_sweep(folder, "emulated", CLASSIFIER % "true")
    results = folder / "results"
    code = main(["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results)])
    return sweep, results, code


def test_emulated_sockets_pin_each_rank_inside_its_socket(emulated_sweep):
    _, results, code = emulated_sweep
    assert code == 0
    records = by_key(read_records(results))
    trial = records["r2-t1-b16"]
    assert trial["status"] == "ok", trial["reason"]
    socket_cpus = {0: {0}, 1: {1}}  # the emulated topology: socket s is CPU s
    seen: set[int] = set()
    for rank in trial["placement"]:
        observed = set(rank["observed_cpus"])  # every thread's mask, read inside the rank process
        assert observed <= socket_cpus[rank["socket"]], rank
        assert not observed & seen, "two ranks share a CPU"
        seen |= observed
    assert {r["socket"] for r in trial["placement"]} == {0, 1}


def test_two_thread_ranks_are_rejected_for_spanning_emulated_sockets(emulated_sweep):
    records = by_key(read_records(emulated_sweep[1]))
    for key in ("r1-t2-b16", "r2-t2-b16"):
        assert records[key]["status"] == "infeasible"
        assert "spans_sockets" in {r["code"] for r in records[key]["reasons"]}


def test_gloo_allreduce_really_averages_gradients(emulated_sweep):
    trial = by_key(read_records(emulated_sweep[1]))["r2-t1-b16"]
    assert trial["backend"] == "gloo"
    checks = [rank["allreduce_check"] for rank in trial["placement"]]
    local = [c["local_grad_sums"] for c in checks]
    synced = [c["synced_grad_sums"] for c in checks]
    assert local[0] != pytest.approx(local[1], rel=1e-3)      # different shards, different gradients
    assert synced[0] == pytest.approx(synced[1], rel=1e-6, abs=1e-9)
    assert synced[0] == pytest.approx([(a + b) / 2 for a, b in zip(*local)], rel=1e-4, abs=1e-7)


def test_measurements_are_recorded_with_their_spread(emulated_sweep):
    records = by_key(read_records(emulated_sweep[1]))
    one, two = records["r1-t1-b16"], records["r2-t1-b16"]
    for r in (one, two):
        t = r["throughput"]
        repeats = t["samples_per_s_repeats"]
        assert len(repeats) == 2 and t["samples_per_s"] == pytest.approx(statistics.median(repeats))
        # the spread is the repeats' own: sample standard deviation over the mean (a CV of 0 would need two
        # repeats equal to the last digit, which timed steps never are)
        assert t["cv"] == pytest.approx(statistics.stdev(repeats) / statistics.mean(repeats)) and t["cv"] > 0
        assert len(t["step_ms_median"]) == r["ranks"] and all(m > 0 for m in t["step_ms_p90"])
        assert all(u > 50 for u in r["memory"]["peak_private_mib"]) and "peak_uss_mib" not in r["memory"]
        assert r["startup_s"] > 0 and r["wall_s"] > r["startup_s"]
    # global batch × timed steps ÷ slowest rank's time
    t = two["throughput"]
    assert t["samples_per_s_repeats"][0] == pytest.approx(32 * 20 / t["timed_s_repeats"][0])
    # one peak per layout, measured with all of its ranks at once, each pinned to its own CPU as in the trial
    peaks = {(r["ranks"], r["threads_per_rank"]): r for r in records.values() if r["kind"] == "peak"}
    assert sorted(peaks) == [(1, 1), (2, 1)] and all(p["status"] == "ok" for p in peaks.values())
    both = peaks[(2, 1)]
    assert both["key"] == "peak-r2-t1-fp32" and both["peak"]["concurrent"] is True
    assert len(both["peak"]["per_rank_gflops"]) == 2 and all(g > 1 for g in both["peak"]["per_rank_gflops"])
    assert both["peak"]["gflops"] == pytest.approx(sum(both["peak"]["per_rank_gflops"]))
    assert [r["observed_cpus"] for r in both["placement"]] == [[0], [1]]
    assert [r["observed_cpus"] for r in peaks[(1, 1)]["placement"]] == [[0]]
    # and the layout's compute roof (run.rank.roof): GEMMs of several sizes and convolutions in both memory formats,
    # summed over the ranks that ran them at once; the best of them, the peak's own GEMM among them
    roof = both["peak"]["roof_by_primitive"]
    assert {"gemm 256", "gemm 2048", "3x3 conv 256ch 16x16 channels-last forward",
            "3x3 conv 256ch 16x16 contiguous backward", "1x1 conv 256ch 16x16 contiguous forward"} <= set(roof)
    assert roof["gemm 2048"] >= both["peak"]["gflops"] and both["peak"]["roof_gflops"] == max(roof.values())


def test_report_is_written_at_the_end(emulated_sweep):
    report = emulated_sweep[1] / "report"
    assert (report / "report.md").is_file()
    assert "Scalability" in (report / "report.md").read_text()
    assert "with all of its ranks multiplying at once" in (report / "report.md").read_text()
    assert list(report.glob("*.png"))


def test_rerun_resumes_without_rerunning_or_duplicating(emulated_sweep, capsys):
    sweep, results, _ = emulated_sweep
    before = read_records(results)
    assert main(["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results), "--no-report"]) == 0
    assert "0 trial(s) to run" in capsys.readouterr().err
    assert read_records(results) == before


def test_changed_spec_is_refused_for_the_same_results_folder(emulated_sweep, capsys):
    sweep, results, _ = emulated_sweep
    sweep.write_text(sweep.read_text().replace("timed_steps: 20", "timed_steps: 30"))
    before = read_records(results)
    code = main(["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results)])
    err = capsys.readouterr().err
    assert code == 2
    assert "measure.timed_steps: 20 → 30" in err and "--results" in err and "Traceback" not in err
    assert read_records(results) == before


CHAOS = """
workload:
  name: chaos
  params: {hidden: 64, train_samples: 2048, fault: %s, fault_rank: 1, fault_at_step: 4, fault_local_batch: 8}
grid:
  ranks: [2]
  threads_per_rank: [1]
  local_batch: [8, 16]
measure: {warmup_steps: 2, timed_steps: 20, repeats: 2, peak: false, allreduce: false, step_timeout_s: 8}
constraints: {memory_budget_mib: 1500, rank_memory_mib: 600}
"""


@pytest.mark.parametrize("fault, status, reason", [
    ("kill", "failed", "rank 1: the rank was killed by SIGKILL"),
    ("crash", "failed", "rank 1: the rank exited with status 1"),
    ("oom", "oom", "rank 1: private memory"),
    ("hang", "timeout", "no progress for 8 s"),
])
def test_a_failing_trial_is_recorded_and_the_sweep_goes_on(ray_local, tmp_path, capsys, fault, status, reason):
    name = f"chaos-{fault}"
    sweep = write_sweep(tmp_path, name, CHAOS % fault)
    results = tmp_path / "results"
    args = ["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results), "--no-report"]
    with RankWatch(name) as watch:
        assert main(args) == 1
        # Positive control: the matcher saw both ranks of each trial while they ran.
        assert watch.ranks("r2-t1-b8") == watch.ranks("r2-t1-b16") == {0, 1}
        # The failed trial's ranks (the faulty one and its surviving peer, the one blocked in the all-reduce
        # when the other hangs) and every process they started were gone when the next trial started, while
        # the launcher that started them still ran: both trials' ranks had the same parent, the node's
        # NodeLaunchers actor, which the sweep shares between its trials and ends only when the sweep does.
        assert watch.left_at_start["r2-t1-b16"] == []
        assert watch.launchers["r2-t1-b8"] == watch.launchers["r2-t1-b16"] and len(watch.launchers["r2-t1-b8"]) == 1
        # At the sweep's end nothing it started remains: no rank, no rank's child, no launcher (Ray worker).
        watch.assert_all_gone()
    records = by_key(read_records(results))
    bad, good = records["r2-t1-b8"], records["r2-t1-b16"]
    assert bad["status"] == status, bad["reason"]
    assert reason in bad["reason"]
    assert bad["log_tail"] is not None
    assert bad["wall_s"] < 60, "the failure was not noticed within its timeout"
    assert good["status"] == "ok", good["reason"]  # the next trial ran on the released cores
    assert sorted(p.name for p in (results / "logs").glob("r2-t1-b8-rank*.log")) == ["r2-t1-b8-rank0.log",
                                                                                     "r2-t1-b8-rank1.log"]
    if fault == "hang":  # the hung rank's stacks were dumped before it was killed: the log shows where
        hung = (results / "logs" / "r2-t1-b8-rank1.log").read_text()
        assert "time.sleep" in hung or "_misbehave" in hung, hung[-2000:]

    # A rerun runs the failed trial again (only ok trials count as done), which fails the same way, keeps the
    # ok one, and leaves nothing behind either.
    capsys.readouterr()
    with RankWatch(name) as rerun:
        assert main(args) == 1
        assert rerun.ranks("r2-t1-b8") == {0, 1} and rerun.ranks("r2-t1-b16") == set()
        rerun.assert_all_gone()
    assert "1 trial(s) to run" in capsys.readouterr().err
    assert [(r["key"], r["status"]) for r in read_records(results)] == [
        ("r2-t1-b8", status), ("r2-t1-b16", "ok"), ("r2-t1-b8", status)]


ONE_POINT = """
workload: {name: classifier, params: {hidden: 64, train_samples: 2048}}
grid: {ranks: [2], threads_per_rank: [1], local_batch: [16]}
measure: {warmup_steps: 2, timed_steps: 20, repeats: 2, peak: false, allreduce: false, data: stream}
"""


def test_explicit_ccl_without_its_bindings_is_refused_before_any_trial(ray_local, tmp_path, capsys):
    sweep = write_sweep(tmp_path, "ccl", "backend: ccl\n" + ONE_POINT)
    results = tmp_path / "results"
    assert main(["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "backend ccl requested but oneccl_bindings_for_pytorch is not installed" in " ".join(err.split())
    assert not (results / "trials.jsonl").exists()


def test_auto_backend_falls_back_to_gloo_json_output_and_streamed_data(ray_local, tmp_path, capsys):
    import json

    sweep = write_sweep(tmp_path, "json", ONE_POINT)
    results = tmp_path / "results"
    assert main(["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results), "--json"]) == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]   # stdout is records only
    assert [r["key"] for r in lines] == ["r2-t1-b16"] and lines[0]["backend"] == "gloo"
    assert lines == read_records(results)
    environment = json.loads((results / "environment.json").read_text())
    assert "auto fell back to gloo" in environment["backend"]["note"]
    # data: stream times the loader inside the timed region and reports its share
    share = lines[0]["throughput"]["data_wait_share"]
    assert 0 < share < 1


def test_each_rank_records_where_its_start_up_went(emulated_sweep):
    """Per rank, the start-up phases from the process's creation to its first step: a slow start in a record
    says which phase was slow (interpreter, imports, rendezvous, build, DDP)."""
    trial = by_key(read_records(emulated_sweep[1]))["r2-t1-b16"]
    for rank in trial["placement"]:
        laps = rank["startup_breakdown_s"]
        assert {"interpreter", "import_torch", "rendezvous", "build"} <= set(laps), laps
        # each phase that does work took time: a lap of 0 would be two reads of the clock at one point, a phase
        # that was not timed (laps are rounded to 0.1 ms; the barrier alone may be that fast)
        assert all(laps[phase] > 0 for phase in ("interpreter", "import_torch", "rendezvous", "build")), laps
        # The rank's phases fit inside the trial's start-up, which also holds the launch by the driver.
        assert 0 < sum(laps.values()) <= trial["startup_s"] + 0.05, (laps, trial["startup_s"])
