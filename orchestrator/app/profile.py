"""`orch profile`: where a training step's time goes, for one or more layouts side by side. Each layout runs on
Ray exactly as a throughput trial runs, is checked against physics (run again up to `max_passes` times while
disturbed), and the report is written into the output folder; `project_to` projects each step onto another
CPU from its primitives. `report_only` rewrites the report (and the projection) from what the folder holds."""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.app.notices import Notice, Notify
from orchestrator.app.options import ProfileOptions
from orchestrator.constants import DEFAULT_RESULTS_ROOT, RESULTS_ROOT_ENV_VAR
from orchestrator.core.planning.layout import parse_layout
from orchestrator.core.planning.spec import MAX_PROFILE_LAYOUTS, ProfileSpec
from orchestrator.errors import InputError
from orchestrator.io.profile_store import has_header, read_saved, refresh_shapes, save_result, write_header
from orchestrator.io.sweepfile import Sweep, load_sweep

if TYPE_CHECKING:   # the run layer imports Ray: imported when a profile runs
    from orchestrator.core.machine.topology import Topology
    from orchestrator.core.planning.plan import Plan
    from orchestrator.core.planning.trial import Trial
    from orchestrator.core.profile.result import ProfiledTarget
    from orchestrator.run.driver.cluster import Cluster
    from orchestrator.run.driver.profile_run import ProfileTarget

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Profiled:
    """What `orch profile` did: the output folder and each target's result (a target that failed to run is one
    too, with its status and reason)."""

    out: Path
    results: tuple[ProfiledTarget, ...]

    @property
    def failed(self) -> tuple[ProfiledTarget, ...]:
        return tuple(r for r in self.results if r.status != "ok")


def profile(options: ProfileOptions, notify: Notify) -> Profiled:
    """Profile the layouts `options` ask for (or rewrite the report from the folder), then project them."""
    sweep = load_sweep(options.sweep)
    if sweep.spec.workload.script is not None:
        raise InputError(f"{options.sweep} runs a script: orch profile profiles orch's own training step, and a "
                         "script's step is its own (profile it with torch.profiler inside the script)")
    spec = sweep.spec.profile or ProfileSpec()
    out = Path(options.out) if options.out else Path(os.environ.get(RESULTS_ROOT_ENV_VAR, DEFAULT_RESULTS_ROOT)) / \
        sweep.spec.name / "profile"
    projection_topology = _projection_topology(options.project_to)
    if options.report_only:
        results = _report_only(out)
    else:
        results = _profiled(options, sweep, spec, out, notify)
    _project(options.project_to, projection_topology, out, notify)
    return Profiled(out, tuple(results))


def _profiled(options: ProfileOptions, sweep: Sweep, spec: ProfileSpec, out: Path,
              notify: Notify) -> list[ProfiledTarget]:
    """Every target on Ray, then the report."""
    from orchestrator.app.plan import plan_for
    from orchestrator.app.session import ray_session
    from orchestrator.run.driver.profile_run import plan_targets, variant_params

    layouts, steps = _chosen(options, spec)
    replay = spec.replay if options.replay is None else options.replay
    variants = variant_params(sweep, spec.variants)
    file_topology = None
    if options.topology:
        from orchestrator.io.topofile import load_topology

        file_topology = load_topology(options.topology)
    with ray_session(options.address, file_topology, options.topology) as session:
        targets, plan = plan_targets(sweep, layouts, variants,
                                     lambda s: plan_for(s, session.topology, ccl_available=session.ccl_available))
        if plan.backend.error:
            raise InputError(plan.backend.error)
        targets = _precision_decided(targets, sweep, plan.topology)
        run = _Runs(sweep, plan, session.cluster, out, steps, spec, replay, options.max_passes, notify)
        results = run.all(targets)
    _report(results, sweep, plan, out, steps, spec)
    return results


def _precision_decided(targets: list[ProfileTarget], sweep: Sweep, topology: Topology) -> list[ProfileTarget]:
    """The targets with `precision: auto` decided for `topology` as a sweep decides it (`Sweep.resolve_precision`:
    bf16 where every node computes it natively, fp32 where a variant's parameters rule bf16 out): a profile's
    ranks, like a sweep's, never see `auto`, which a `model_workload`'s trainer refuses."""
    from orchestrator.core.json.schema import to_plain
    from orchestrator.io.workload_finder import parse_params

    decided = []
    for target in targets:
        if target.params.get("precision") != "auto":
            decided.append(target)
            continue
        params, problems = parse_params(sweep.workload, target.params)
        assert params is not None and not problems, problems   # variant_params parsed these very parameters
        resolved, _ = dataclasses.replace(sweep, params=params).resolve_precision(topology)
        decided.append(dataclasses.replace(target, params=to_plain(resolved.params)))
    return decided


def _chosen(options: ProfileOptions, profile: ProfileSpec) -> tuple[list[Trial], int]:
    """(layouts, steps); InputError with every problem at once."""
    texts = list(options.layouts) or list(profile.layouts)
    if not texts:
        raise InputError("no layout to profile: give --layout RxTxB (e.g. --layout 1x2x8) or list profile.layouts "
                         "in the sweep file")
    if len(texts) > MAX_PROFILE_LAYOUTS:
        raise InputError(f"{len(texts)} layouts, more than {MAX_PROFILE_LAYOUTS} (each is a run of its own)")
    layouts, errors = [], []
    for text in texts:
        try:
            layouts.append(parse_layout(text))
        except InputError as err:
            errors.append(str(err))
    if len(set(layouts)) != len(layouts):
        errors.append(f"a layout is listed twice: {', '.join(texts)}")
    steps = options.steps if options.steps is not None else profile.steps
    if steps < 1:
        errors.append(f"--steps must be >= 1, got {steps}")
    if options.max_passes < 1:
        errors.append(f"--max-passes must be >= 1, got {options.max_passes}")
    if errors:
        raise InputError("; ".join(errors))
    return layouts, steps


def _projection_topology(project_to: str | None) -> Topology | None:
    """The topology file --project-to names (None for 'avx2' or no projection), loaded before anything runs:
    a bad file is bad input, not a failure after the profile."""
    from orchestrator.run.driver.profile_projection import AVX2

    if project_to is None or project_to == AVX2:
        return None
    from orchestrator.io.topofile import load_topology
    from orchestrator.run.driver.profile_projection import check_projectable

    try:
        topology = load_topology(project_to)
        check_projectable(topology)
    except InputError as exc:
        raise InputError(f"--project-to {project_to}: {exc}") from None
    return topology


def _project(project_to: str | None, topology: Topology | None, out: Path, notify: Notify) -> None:
    """Project the saved results (after the profile's own report)."""
    if project_to is None or not has_header(out):
        return
    from orchestrator.report.projection_report import write_projection
    from orchestrator.run.driver.profile_projection import project

    _header, results = read_saved(out)
    projections = project(results, project_to, topology)
    path = write_projection(projections, out)
    for p in projections:
        notify(Notice(f"projection {p['label']} → {p['target']}: measured {p['measured_step_ms']:.1f} ms, projected "
                      f"{p['projected_step_ms']['same']:.1f} ms"))
    log.info("projection: %s", path)


@dataclass(frozen=True, slots=True)
class _Runs:
    """What every target of one profile runs with."""

    sweep: Sweep
    plan: Plan
    cluster: Cluster
    out: Path
    steps: int
    spec: ProfileSpec
    replay: bool
    max_passes: int
    notify: Notify

    def all(self, targets: list[ProfileTarget]) -> list[ProfiledTarget]:
        results = []
        for i, target in enumerate(targets, 1):
            self.notify(Notice(f"{target.label} ({target.trial.ranks} rank(s) × {target.trial.threads_per_rank} "
                               f"thread(s), local batch {target.trial.local_batch})",
                               heading=f"profile {i}/{len(targets)}"))
            results.append(self.checked(target))
        return results

    def checked(self, target: ProfileTarget) -> ProfiledTarget:
        """Run a target until its own physical checks pass or `max_passes` runs are spent; the result keeps
        how many runs it took and what each disturbed one failed."""
        from orchestrator.core.profile.checks import check_target
        from orchestrator.run.driver.profile_run import run_target

        disturbed_runs: list[tuple[str, ...]] = []
        for attempt in range(1, self.max_passes + 1):
            result = run_target(target, self.sweep, self.plan, self.cluster, self.out, steps=self.steps,
                                warmup_steps=self.spec.warmup_steps, replay=self.replay)
            reason = f": {result.reason}" if result.reason else ""
            self.notify(Notice(f"  {result.status} in {result.wall_s:.0f} s{reason}"))
            if result.status != "ok":
                break
            findings = check_target(result)
            if not findings:
                break
            disturbed_runs.append(tuple(f"{f.check}: {f.detail}" for f in findings))
            log.warning("disturbed (run %d of at most %d): %s", attempt, self.max_passes, disturbed_runs[-1][0])
        result = dataclasses.replace(result, passes=attempt, disturbed_passes=tuple(disturbed_runs))
        save_result(result, self.out)
        return result


def _command_line(sweep: Sweep, results: list[ProfiledTarget], steps: int) -> str:
    """The command that reproduces this profile (layouts as run, not as typed)."""
    layouts = dict.fromkeys(f"{r.ranks}x{r.threads}x{r.local_batch}" for r in results)
    parts = ["orch", "profile", str(sweep.path), *(f"--layout {lay}" for lay in layouts), f"--steps {steps}"]
    return " ".join(p if " " in p else shlex.quote(p) for p in parts)


def _report(results: list[ProfiledTarget], sweep: Sweep, plan: Plan, out: Path, steps: int,
            profile: ProfileSpec) -> None:
    header: dict[str, object] = {
        "sweep": sweep.spec.name, "workload": sweep.spec.workload.name, "steps": steps,
        "warmup": profile.warmup_steps, "machine": plan.topology.describe(), "backend": plan.backend.note,
        "command": _command_line(sweep, results, steps)}
    write_header(out, header, [r.label for r in results])
    _write(results, header, out)


def _report_only(out: Path) -> list[ProfiledTarget]:
    header, results = read_saved(out)
    results = [refresh_shapes(r, out) for r in results]
    _write(results, header, out)
    return results


def _write(results: list[ProfiledTarget], header: Mapping[str, object], out: Path) -> None:
    from orchestrator.report.profile_report import PROFILE_FILE, write_profile_report

    paths = write_profile_report(results, out, header)
    log.info("profile: %s and %d more file(s)", out / PROFILE_FILE, len(paths) - 1)
    for r in results:
        if r.status != "ok":
            log.error("%s: %s — %s", r.label, r.status, r.reason)
