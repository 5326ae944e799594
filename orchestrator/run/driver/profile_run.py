"""`orch profile`: plan each requested layout exactly as `orch plan` would, then run it on Ray exactly as a
throughput trial runs (placement group, pinned rank processes, the same launcher), with the rank asked to
profile instead of to measure throughput.

Targets (variant × layout) are checked before anything starts, so a layout that cannot run is bad input
(exit 2), never a failed run half-way through.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.json.schema import InvalidInput, Problem, to_plain
from orchestrator.core.json.values import JsonDict, JsonMapping
from orchestrator.core.planning.layout import layout_label
from orchestrator.core.planning.names import name_problem
from orchestrator.core.planning.plan import Plan, PlannedTrial
from orchestrator.core.planning.spec import GridSpec
from orchestrator.core.planning.trial import Trial
from orchestrator.core.profile.result import ProfiledTarget, RankPlacement, RankProfile
from orchestrator.io.profile_store import save_result
from orchestrator.io.sweepfile import Sweep
from orchestrator.io.workload_finder import parse_params
from orchestrator.run.driver.cluster import Cluster
from orchestrator.run.driver.sweep import WORK_ROOT, rank_specs
from orchestrator.run.driver.trial import run_ranks
from orchestrator.run.job import ProfileTask, RankJob, RankProgress, init_timeout_s

PROFILE_SLACK = 3.0


@dataclass(frozen=True, slots=True)
class ProfileTarget:
    variant: str                 # "" when the sweep file has no variants
    trial: Trial
    planned: PlannedTrial
    params: JsonDict             # the workload parameters this target runs with (defaults filled in)

    @property
    def label(self) -> str:
        return f"{self.variant}-{layout_label(self.trial)}" if self.variant else layout_label(self.trial)


def variant_params(sweep: Sweep, variants: JsonMapping) -> dict[str, JsonDict]:
    """Workload parameters per variant, each checked strictly like the sweep file's own; every problem is
    reported at once."""
    if not variants:
        return {"": to_plain(sweep.params)}
    out, problems = {}, []
    for name, overrides in variants.items():
        bad_name = name_problem(name, "profile.variants")   # it names a folder under --out: a name, never a path
        if bad_name is not None:
            problems.append(Problem(f"profile.variants.{name}", bad_name))
            continue
        if not isinstance(overrides, dict):
            problems.append(Problem(f"profile.variants.{name}", f"must be a mapping of workload parameters, "
                                                                f"got {overrides!r}"))
            continue
        merged = {**sweep.spec.workload.params, **overrides}
        params, found = parse_params(sweep.workload, merged, f"profile.variants.{name}")
        problems += found
        if params is not None:
            out[name] = to_plain(params)
    if problems:
        raise InvalidInput(f"sweep file {sweep.path}", problems)
    return out


def plan_targets(sweep: Sweep, layouts: list[Trial], variants: dict[str, JsonDict],
                 plan_for: Callable[[Sweep], Plan]) -> tuple[list[ProfileTarget], Plan]:
    """Plan every layout through the sweep's own planning code (`plan_for(sweep) -> Plan`); raise
    InvalidInput naming every layout that cannot run and why."""
    problems: list[Problem] = []
    targets: list[ProfileTarget] = []
    plan = None
    for trial in layouts:
        where = f"layout {layout_label(trial)}"
        grid = GridSpec(ranks=(trial.ranks,), threads_per_rank=(trial.threads_per_rank,),
                        local_batch=(trial.local_batch,))
        plan = plan_for(dataclasses.replace(sweep, spec=dataclasses.replace(sweep.spec, grid=grid, convergence=None)))
        planned = plan.trials[0]
        if not planned.feasible:
            problems += [Problem(where, f"cannot run on {plan.topology.describe()}: {r.message}")
                         for r in planned.reasons]
            continue
        targets += [ProfileTarget(v, trial, planned, params) for v, params in variants.items()]
    if problems:
        raise InvalidInput("orch profile", problems)
    assert plan is not None
    return targets, plan


def run_target(target: ProfileTarget, sweep: Sweep, plan: Plan, cluster: Cluster, out_dir: Path, *, steps: int,
               warmup_steps: int, replay: bool,
               on_status: Callable[[RankProgress | None], None] | None = None) -> ProfiledTarget:
    """Run one target; write and return its result (every rank's profile, or the failure)."""
    folder = out_dir / target.label
    folder.mkdir(parents=True, exist_ok=True)
    m = sweep.spec.measure
    backend = plan.backend.chosen
    task = ProfileTask(warmup_steps=warmup_steps, steps=steps, out_dir=str(folder.resolve()), replay=replay)
    job = RankJob(task=task, workload=sweep.spec.workload.name or "", params=target.params, backend=backend,
                  local_batch=target.trial.local_batch, threads=target.trial.threads_per_rank,
                  init_timeout_s=init_timeout_s(m.step_timeout_s, m.startup_timeout_s))
    workers = plan.ccl_workers
    started = time.time()
    workdir = f"{WORK_ROOT}/{sweep.spec.name}/profile-{target.label}-{int(started * 1000)}"
    # Profiled steps are slower than training steps (verbose logging, the profiler) and the trace export
    # happens between two of them: the watchdog gets PROFILE_SLACK times the sweep's limits.
    run = run_ranks(cluster, rank_specs(target.planned), job, workdir=workdir,
                    step_timeout_s=PROFILE_SLACK * m.step_timeout_s, startup_timeout_s=m.startup_timeout_s,
                    timeout_s=PROFILE_SLACK * m.timeout_s,
                    ccl_workers=workers, on_status=on_status)
    result = ProfiledTarget(
        label=target.label, variant=target.variant, ranks=target.trial.ranks,
        threads=target.trial.threads_per_rank, local_batch=target.trial.local_batch, status=run.status,
        reason=run.reason, wall_s=run.wall_s, backend=backend, params=target.params,
        placement=tuple(RankPlacement(r.rank, tuple(r.cpus)) for r in target.planned.placement.ranks)
        if target.planned.placement else (),
        applied=next((o.result.applied for o in run.outcomes if o and o.result), None),
        # CPU masks read inside each rank process: the evidence that the profiled ranks were pinned.
        observed_cpus=tuple(o.result.affinity.get("threads") if o and o.result else None for o in run.outcomes),
        results=tuple(profile for o in run.outcomes if o and o.result
                      and (profile := o.result.report_of(RankProfile)) is not None) if run.status == "ok" else (),
        log_tail=None if run.status == "ok" else next((o.log_tail for o in run.outcomes if o and o.status != "ok"), ""),
    )
    save_result(result, out_dir)
    return result
