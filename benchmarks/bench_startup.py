"""Where a trial's start-up goes, per trial kind of the default sweep, and before/after a change side by side.

Start-up is a record's `startup_s`: from the trial's start until every rank is ready to step. Each trial of
`sweeps/retinanet.yaml`'s kinds (GEMM peak per layout, all-reduce calibration, throughput per layout, a
convergence run per layout) runs through the sweep's own `run_ranks` with the fewest steps its protocol
allows (start-up does not depend on them), and, as in a sweep, on one `NodePool` held for the whole run (the
CPUs reserved once, one launcher actor per node); `--per-trial-reservation` runs each trial on its own pool
instead, as sweeps did before NodePool. Each start-up is split into:

- driver: trial start → the rank's process created (node_info/free_port calls, Popen; with
  `--per-trial-reservation` also the placement group and a launcher actor, a new Ray worker importing orch),
  from the rank's /proc start time (10 ms);
- the rank's own phases from its result's `startup_breakdown_s` (rank.process.StartupClock): interpreter
  (numactl, Python, run.rank.main's imports), import_torch, import_protocol, rendezvous
  (init_process_group), import_workload (the workload's torch side: torchvision, its modules), build
  (model, optimizer, data), ddp (DDP wrap), barrier (waiting for the slowest rank).

Columns are rank 0's view; they add up to its ready time. `--driver-probe` also times, one by one, the
driver's Ray calls of a trial on its own pool (run_ranks' own pieces; the ranks are not started).

With `--baseline REF` the same trials also run with the rank code (orchestrator/, workloads/) of git REF,
interleaved with the working tree's in every round (order alternating), so both see the same machine load.
REF's ranks read the working tree's job files, so REF must share their format (run/job.py; tasks tagged by
kind since run/ was split by process): for an older REF compare whole sweeps with benchmarks/sweep_ab.py.

    python benchmarks/bench_startup.py --rounds 3 --baseline <commit>
    python benchmarks/bench_startup.py --rounds 1 --kinds peak --driver-probe 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.constants import EMBEDDED_RAY_ENV, RAY_LOOPBACK_ENV_VAR, RAY_LOOPBACK_VALUE  # noqa: E402

PHASES = ("driver", "interpreter", "import_torch", "import_protocol", "rendezvous", "import_workload", "build",
          "ddp", "barrier")
SWEEP = REPO / "sweeps" / "retinanet.yaml"


def trial_cases(sweep: Any, plan: Any, nodes: int) -> list[tuple[str, Any, Any]]:
    """(trial key, planned trial, RankJob) for each trial kind × layout of the default sweep, in sweep order: the
    sweep's own work items and jobs, with the fewest steps each protocol allows."""
    from dataclasses import replace

    from orchestrator.core.measured import records as rec
    from orchestrator.run.driver.kinds import item_types
    from orchestrator.run.driver.kinds.base import SweepContext

    ctx = SweepContext(sweep.with_choice(plan.precision), plan, nodes)
    cases, trained = [], set()
    for kind in item_types():
        for item in kind.plan_items(ctx):
            job = item.job(ctx, item.planned)
            job = replace(job, task=_fewest_steps(job.task, sweep), init_timeout_s=120.0)
            if item.KIND == rec.Kind.CONVERGENCE:
                if item.planned.trial.key in trained:   # one per layout: start-up does not depend on the seed
                    continue
                trained.add(item.planned.trial.key)
            cases.append((item.key, item.planned, job))
    return cases


def _fewest_steps(task: Any, sweep: Any) -> Any:
    """The task with the fewest steps its protocol allows: one warm-up and one timed step; one allreduce size;
    a convergence run of one training step, then one evaluation (its start-up is the throughput trial's, plus
    the lr schedule)."""
    from dataclasses import replace

    from orchestrator.run.job import AllreduceTask, ConvergenceTask, ProbeTask, ThroughputTask

    if isinstance(task, ThroughputTask | ProbeTask):
        return replace(task, steps=replace(task.steps, warmup=1, timed=1, repeats=1))
    if isinstance(task, AllreduceTask):
        return replace(task, message_bytes=task.message_bytes[:1])
    if isinstance(task, ConvergenceTask):
        conv = task.settings
        steps_per_epoch = (sweep.facts.samples.value or 0) // conv.global_batch
        return replace(task, settings=replace(conv, max_epochs=1 / steps_per_epoch, warmup_epochs=0.0))
    return task


def run_case(cluster: Any, p: Any, job: Any, workdir: str, pool: Any) -> dict[str, float]:
    """One trial through the sweep's run_ranks (on `pool`, or on its own when None): its start-up, wall time
    and rank 0's phases."""
    from orchestrator.run.driver.sweep import rank_specs
    from orchestrator.run.driver.trial import run_ranks

    started = time.time()
    run = run_ranks(cluster, rank_specs(p), job, workdir=workdir, step_timeout_s=120.0, startup_timeout_s=600.0,
                   timeout_s=600.0, pool=pool)
    if run.status != "ok":
        raise RuntimeError(f"{job.kind} trial failed: {run.status}: {run.reason}\n"
                           f"{next((o.log_tail for o in run.outcomes if o and o.status != 'ok'), '')}")
    result = run.outcomes[0].result
    out = {"startup": run.ready_s if run.ready_s is not None else float("nan"), "wall": run.wall_s}
    if result.started_at is not None and result.startup_breakdown_s:
        out["driver"] = result.started_at - started
        out.update(result.startup_breakdown_s)
    return out


def baseline_tree(ref: str, into: Path) -> Path:
    """The rank code (orchestrator/, workloads/) of git `ref`, extracted without touching the checkout."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "orchestrator", "workloads"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def driver_probe(cluster: Any, p: Any, rounds: int) -> dict[str, list[float]]:
    """The driver's Ray calls of a trial on its own pool, one by one, through run_ranks' own pieces (NodePool,
    RayRanks; no rank is started): reserve after 1.5 s idle and right after the previous trial's release (as
    between trials); the launcher actor up (a new Ray worker, importing orch's launcher) with its node_info;
    free_port; the same calls again on the launcher now running (what the sweep's long-lived one costs); and
    the release."""
    from orchestrator.run.driver.sweep import rank_specs
    from orchestrator.run.driver.trial import NodePool, RayRanks, trial_cpus

    ranks = rank_specs(p)
    times: dict[str, list[float]] = {}

    def lap(name: str, since: float) -> float:
        now = time.time()
        times.setdefault(name, []).append(now - since)
        return now

    def reserve(name: str) -> Any:
        pool, t0 = NodePool(cluster), time.time()
        problem = pool.reserve(trial_cpus(ranks), threading.Event())
        if problem is not None:
            raise SystemExit(f"could not reserve the trial's CPUs: {problem}")
        lap(name, t0)
        return pool

    for i in range(rounds):
        reserve("reserve (first, or 1.5 s after a release)").close()
        pool = reserve("reserve right after a release")
        t = time.time()
        host = RayRanks(pool, ranks, f"{tempfile.gettempdir()}/bench-startup-probe-{os.getpid()}-{i}")
        host.node_infos()
        t = lap("launcher actors up + node_info", t)
        host.rendezvous_port()
        t = lap("free_port", t)
        host.node_infos()
        host.rendezvous_port()
        t = lap("node_info + free_port on running launchers", t)
        host.cleanup()
        pool.close()
        lap("cleanup + kill + release", t)
        time.sleep(1.5)
    return times


def print_table(title: str, rows: dict[str, dict[str, list[dict[str, float]]]]) -> None:
    """Medians per case and side: start-up, wall and each phase."""
    sides = sorted({side for per in rows.values() for side in per}, key=lambda s: s != "before")
    print(f"\n{title} (medians, seconds; n = trials per cell)")
    header = f"{'case':26} {'side':6} {'n':>2} {'startup':>8} {'wall':>6} " + " ".join(f"{p[:10]:>10}" for p in PHASES)
    print(header)
    for case, per in rows.items():
        for side in sides:
            runs = per.get(side, [])
            if not runs:
                continue

            def med(key: str, runs: list[dict[str, float]] = runs) -> str:
                values = [r[key] for r in runs if key in r]
                return f"{statistics.median(values):.2f}" if values else "–"

            print(f"{case:26} {side:6} {len(runs):>2} {med('startup'):>8} {med('wall'):>6} "
                  + " ".join(f"{med(p):>10}" for p in PHASES))


def connect_and_plan() -> tuple[Any, Any, Any]:
    for name, value in {RAY_LOOPBACK_ENV_VAR: RAY_LOOPBACK_VALUE, **EMBEDDED_RAY_ENV}.items():
        os.environ.setdefault(name, value)
    from orchestrator.app.plan import plan_for
    from orchestrator.io.sweepfile import load_sweep
    from orchestrator.run.driver import cluster as ray_cluster

    ray_cluster.connect(None)
    cluster = ray_cluster.discover()
    sweep = load_sweep(str(SWEEP))
    plan = plan_for(sweep, ray_cluster.detected_topology(cluster),
                    ccl_available=all(n.ccl_installed for n in cluster.nodes))
    return sweep, plan, cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every case once per side")
    parser.add_argument("--baseline", metavar="REF", help="git ref whose rank code runs as 'before'")
    parser.add_argument("--kinds", nargs="*", default=["peak", "allreduce", "throughput", "convergence"])
    parser.add_argument("--driver-probe", type=int, default=0, metavar="N", help="also time the driver's Ray calls")
    parser.add_argument("--per-trial-reservation", action="store_true",
                        help="each trial reserves its own CPUs and launcher actor (sweeps before NodePool)")
    args = parser.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    print(f"start-up of {SWEEP.relative_to(REPO)}'s trial kinds: {os.cpu_count()} CPUs ({cpu}), load average "
          f"{os.getloadavg()[0]:.2f} at start")
    sweep, plan, cluster = connect_and_plan()
    pool = None if args.per_trial_reservation else sweep_pool(cluster)
    cases = [c for c in trial_cases(sweep, plan, len(cluster.nodes)) if c[2].kind in args.kinds]
    rows: dict[str, dict[str, list[dict[str, float]]]] = {label: {} for label, _, _ in cases}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        # The rank processes import orch from PYTHONPATH (run_ranks passes the driver's environment on).
        sides = {"after": str(REPO)}
        if args.baseline:
            sides = {"before": str(baseline_tree(args.baseline, Path(tmp) / "baseline")), **sides}
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for label, p, job in cases:
                for side in order:
                    os.environ["PYTHONPATH"] = sides[side]
                    out = run_case(cluster, p, job, f"{tmp}/{side}-{label.replace(' ', '_')}-{r}", pool)
                    rows[label].setdefault(side, []).append(out)
                    print(f"round {r + 1} {label:26} {side:6} startup {out['startup']:.2f} s  wall {out['wall']:.2f} s",
                          flush=True)
        os.environ["PYTHONPATH"] = sides["after"]
        if pool is not None:
            pool.close()   # before the probe, which reserves CPUs of its own
        print_table("start-up per trial kind", rows)
        if args.driver_probe:
            p = next(p for _label, p, _ in cases if p.trial.ranks >= 2)
            probe = driver_probe(cluster, p, args.driver_probe)
            print(f"\ndriver's Ray calls for a {p.trial.ranks}-rank trial, {args.driver_probe} rounds "
                  "(median, min, max s)")
            for name, values in probe.items():
                print(f"  {name:45} {statistics.median(values):6.2f} {min(values):6.2f} {max(values):6.2f}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


def sweep_pool(cluster: Any) -> Any:
    """A NodePool holding every CPU Ray offers on each node, as a sweep holds its nodes."""
    from orchestrator.run.driver.trial import NodePool

    pool = NodePool(cluster)
    problem = pool.reserve({i: float(node.ray_cpus) for i, node in enumerate(cluster.nodes)}, threading.Event())
    if problem is not None:
        raise SystemExit(f"could not reserve the nodes: {problem}")
    return pool


if __name__ == "__main__":
    main()
