"""`orch profile`: where a training step's time goes, for one or more layouts side by side."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.cli.common import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    add_topology_option,
    console,
    fail_input,
    plan_for,
    ray_session,
)
from orchestrator.constants import DEFAULT_RESULTS_ROOT, RESULTS_ROOT_ENV_VAR
from orchestrator.core.profile.layout import parse_layout
from orchestrator.core.spec import MAX_PROFILE_LAYOUTS, ProfileSpec
from orchestrator.io.files import write_atomic
from orchestrator.io.sweepfile import Sweep, load_sweep

log = logging.getLogger(__name__)

if TYPE_CHECKING:   # types only: rich and the run layer are imported when a profile runs, not when the CLI starts
    from rich.console import Console

    from orchestrator.core.grid import Trial
    from orchestrator.core.plan import Plan
    from orchestrator.core.profile.result import ProfiledTarget
    from orchestrator.core.topology import Topology
    from orchestrator.run.profile_run import ProfileTarget

HEADER_FILE = "profile-header.json"   # what profile.md says about the run, kept for --report-only
HEADER_KEYS = ("sweep", "workload", "steps", "warmup", "machine", "backend", "command")   # what profile.md reads
DEFAULT_MAX_PASSES = 3   # a disturbed target is run again up to this many times in all before giving up


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "profile", help="profile training steps on one or more layouts: oneDNN primitives, layers, ops, roofline",
        description="Run the sweep's workload on each layout exactly as a throughput trial runs (Ray placement "
                    "group, one pinned process per rank, the same launcher) and profile a few steps after warm-up: "
                    "oneDNN's primitive breakdown from its verbose log, layer-wise forward/backward time, "
                    "torch.profiler's operator table and a Chrome trace per rank, a roofline against the compute roof "
                    "(GEMMs and convolutions) and a STREAM-triad bandwidth per memory level (L2, L3, DRAM) measured "
                    "on the same cores, and the efficiency ratio from "
                    "replaying each convolution and matmul problem alone. Layouts (and the sweep file's profile "
                    "variants) are compared side by side. Writes profile.md, CSV/JSON tables and PNGs. "
                    "Exit status: 0 all profiled, 1 some target failed to run, 2 bad input.")
    parser.add_argument("sweep", metavar="SWEEP", help="sweep file (YAML): its workload, backend, constraints "
                                                       "and profile section are used; its grid is not")
    parser.add_argument("--layout", action="append", metavar="RxTxB", dest="layouts",
                        help="ranks x threads per rank x local batch, e.g. 1x2x8; repeatable; default: the sweep "
                             "file's profile.layouts")
    parser.add_argument("--steps", type=int, metavar="N", help="profiled steps per pass (default: profile.steps, 3)")
    parser.add_argument("--out", metavar="DIR",
                        help="output folder; default: the sweep's results folder "
                             f"(${RESULTS_ROOT_ENV_VAR} or '{DEFAULT_RESULTS_ROOT}')/<name>/profile")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: rewrite profile.md, the tables and the plots from the results already in "
                             "the output folder (after a report change, or to restore an edited file)")
    parser.add_argument("--no-replay", dest="replay", action="store_false", default=None,
                        help="skip replaying primitives alone (no efficiency ratio)")
    parser.add_argument("--max-passes", type=int, default=DEFAULT_MAX_PASSES, metavar="N",
                        help="run a target whose own checks fail (above its roof, efficiency above 1, negative "
                             "overhead, a rank short of its CPUs, ranks disagreeing) again, up to N runs in all "
                             f"(default {DEFAULT_MAX_PASSES}); the report says how many it took")
    parser.add_argument("--project-to", metavar="avx2|TOPOLOGY", dest="project_to",
                        help="also project each target's step onto another CPU from its primitives (each scaled by "
                             "the target's peak or bandwidth, whichever bounds it): 'avx2' (this CPU under "
                             "ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2, both roofs probed now on the "
                             "rank's cores) or a topology file whose isa states peak_<precision>_gflops_per_core "
                             "and triad_gb_per_s_per_core; writes projection.md and projection.json; works with "
                             "--report-only")
    add_topology_option(parser)
    parser.add_argument("--address", metavar="ADDR", help="join an existing Ray cluster (as in orch sweep)")
    parser.set_defaults(run=run)


def _options(args: argparse.Namespace, profile: ProfileSpec) -> tuple[list[Trial], int] | str:
    """(layouts, steps), or the bad-input message."""
    texts = args.layouts or list(profile.layouts)
    if not texts:
        return ("no layout to profile: give --layout RxTxB (e.g. --layout 1x2x8) or list profile.layouts in the "
                "sweep file")
    if len(texts) > MAX_PROFILE_LAYOUTS:
        return f"{len(texts)} layouts, more than {MAX_PROFILE_LAYOUTS} (each is a run of its own)"
    layouts, errors = [], []
    for text in texts:
        try:
            layouts.append(parse_layout(text))
        except ValueError as err:
            errors.append(str(err))
    if len(set(layouts)) != len(layouts):
        errors.append(f"a layout is listed twice: {', '.join(texts)}")
    steps = args.steps if args.steps is not None else profile.steps
    if steps < 1:
        errors.append(f"--steps must be >= 1, got {steps}")
    if args.max_passes < 1:
        errors.append(f"--max-passes must be >= 1, got {args.max_passes}")
    return "; ".join(errors) if errors else (layouts, steps)


def run(args: argparse.Namespace) -> int:
    sweep = load_sweep(args.sweep)
    if sweep.spec.workload.script is not None:
        return fail_input(f"{args.sweep} runs a script: orch profile profiles orch's own training step, and a script's "
                          "step is its own (profile it with torch.profiler inside the script)")
    profile = sweep.spec.profile or ProfileSpec()
    out = Path(args.out) if args.out else Path(os.environ.get(RESULTS_ROOT_ENV_VAR, DEFAULT_RESULTS_ROOT)) / \
        sweep.spec.name / "profile"
    try:
        projection_topology = _projection_topology(args.project_to)
    except ValueError as exc:
        return fail_input(f"--project-to {args.project_to}: {exc}")
    if args.report_only:
        return _project(args.project_to, projection_topology, out, _report_only(out, console(stderr=True)))
    chosen = _options(args, profile)
    if isinstance(chosen, str):
        return fail_input(chosen)
    layouts, steps = chosen
    replay = profile.replay if args.replay is None else args.replay
    from orchestrator.run.profile_run import plan_targets, variant_params

    variants = variant_params(sweep, profile.variants)
    file_topology = None
    if args.topology:
        from orchestrator.io.topofile import load_topology

        file_topology = load_topology(args.topology)
    err = console(stderr=True)
    with ray_session(args.address, file_topology, args.topology) as session:
        targets, plan = plan_targets(sweep, layouts, variants,
                                     lambda s: plan_for(s, session.topology, ccl_available=session.ccl_available))
        if plan.backend.error:
            return fail_input(plan.backend.error)
        results = _run_all(targets, sweep, plan, session.cluster, out, steps, profile, replay, err, args.max_passes)
    return _project(args.project_to, projection_topology, out, _report(results, sweep, plan, out, steps, profile, err))


def _projection_topology(project_to: str | None) -> Topology | None:
    """The topology file --project-to names (None for 'avx2' or no projection), loaded before anything runs:
    a bad file is bad input, not a failure after the profile."""
    from orchestrator.run.profile_projection import AVX2

    if project_to is None or project_to == AVX2:
        return None
    from orchestrator.io.topofile import load_topology
    from orchestrator.run.profile_projection import check_projectable

    topology = load_topology(project_to)
    check_projectable(topology)
    return topology


def _project(project_to: str | None, topology: Topology | None, out: Path, code: int) -> int:
    """Project the saved results (after the profile's own report, whose exit code passes through)."""
    if project_to is None or not (out / HEADER_FILE).is_file():
        return code
    from orchestrator.report.projection_report import write_projection
    from orchestrator.run.profile_projection import project

    saved = _saved(out)
    if isinstance(saved, str):
        return fail_input(saved)
    _header, results = saved
    try:
        projections = project(results, project_to, topology)
    except ValueError as exc:
        return fail_input(str(exc))
    path = write_projection(projections, out)
    err = console(stderr=True)
    for p in projections:
        err.print(f"projection {p['label']} → {p['target']}: measured {p['measured_step_ms']:.1f} ms, projected "
                  f"{p['projected_step_ms']['same']:.1f} ms")
    log.info("projection: %s", path)
    return code


def _run_all(targets: list[ProfileTarget], sweep: Sweep, plan: Plan, cluster: Any, out: Path, steps: int,
             profile: ProfileSpec, replay: bool, err: Console, max_passes: int) -> list[ProfiledTarget]:
    results = []
    for i, target in enumerate(targets, 1):
        err.print(f"[bold]profile {i}/{len(targets)}[/]: {target.label} ({target.trial.ranks} rank(s) × "
                  f"{target.trial.threads_per_rank} thread(s), local batch {target.trial.local_batch})")
        results.append(_run_checked(target, sweep, plan, cluster, out, steps, profile, replay, err, max_passes))
    return results


def _run_checked(target: ProfileTarget, sweep: Sweep, plan: Plan, cluster: Any, out: Path, steps: int,
                 profile: ProfileSpec, replay: bool, err: Console, max_passes: int) -> ProfiledTarget:
    """Run a target until its own physical checks pass or `max_passes` runs are spent; the result keeps
    how many runs it took and what each disturbed one failed."""
    from orchestrator.core.profile.checks import check_target
    from orchestrator.run.profile_run import run_target, save_result

    disturbed_runs: list[tuple[str, ...]] = []
    for attempt in range(1, max_passes + 1):
        result = run_target(target, sweep, plan, cluster, out, steps=steps, warmup_steps=profile.warmup_steps,
                            replay=replay)
        reason = f": {result.reason}" if result.reason else ""
        err.print(f"  {result.status} in {result.wall_s:.0f} s{reason}")
        if result.status != "ok":
            break
        findings = check_target(result)
        if not findings:
            break
        disturbed_runs.append(tuple(f"{f.check}: {f.detail}" for f in findings))
        log.warning("disturbed (run %d of at most %d): %s", attempt, max_passes, disturbed_runs[-1][0])
    result = dataclasses.replace(result, passes=attempt, disturbed_passes=tuple(disturbed_runs))
    save_result(result, out)
    return result


def _command_line(sweep: Sweep, results: list[ProfiledTarget], steps: int) -> str:
    """The command that reproduces this profile (layouts as run, not as typed)."""
    layouts = dict.fromkeys(f"{r.ranks}x{r.threads}x{r.local_batch}" for r in results)
    parts = ["orch", "profile", str(sweep.path), *(f"--layout {lay}" for lay in layouts), f"--steps {steps}"]
    return " ".join(p if " " in p else shlex.quote(p) for p in parts)


def _report(results: list[ProfiledTarget], sweep: Sweep, plan: Plan, out: Path, steps: int, profile: ProfileSpec,
            err: Console) -> int:
    header = {"sweep": sweep.spec.name, "workload": sweep.spec.workload.name, "steps": steps,
              "warmup": profile.warmup_steps, "machine": plan.topology.describe(), "backend": plan.backend.note,
              "command": _command_line(sweep, results, steps)}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / HEADER_FILE, json.dumps({**header, "targets": [r.label for r in results]}, indent=1) + "\n")
    return _write(results, header, out, err)


def _saved(out: Path) -> tuple[dict[str, Any], list[ProfiledTarget]] | str:
    """The header and the targets' results an earlier `orch profile` saved in `out`, or why they cannot be
    used. Each target's label names its folder, so a label read back is checked as a name, never a path
    (a header that says `../../x` would read and write outside `out`)."""
    from orchestrator.core.spec import name_problem
    from orchestrator.io.files import UnreadableFile, read_json_input
    from orchestrator.run.profile_run import RESULT_FILE, load_result

    where = f"{out} holds no complete `orch profile` output to report from"
    try:
        header = read_json_input(out / HEADER_FILE)
    except UnreadableFile as exc:
        return f"{where} ({out / HEADER_FILE}: {exc})"
    labels = header.get("targets") if isinstance(header, dict) else None
    if not isinstance(labels, list) or not labels:
        return f"{where} ({out / HEADER_FILE}: no list of targets)"
    problem = next((p for label in labels if (p := name_problem(label, f"{HEADER_FILE} target")) is not None), None)
    if problem is not None:
        return f"{where} ({problem})"
    missing = [key for key in HEADER_KEYS if key not in header]
    if missing:
        return f"{where} ({out / HEADER_FILE}: no {', '.join(missing)})"
    try:
        results = [load_result(out / label / RESULT_FILE) for label in labels]
    except (ValueError, TypeError, KeyError) as exc:   # UnreadableFile, or not the shape orch writes
        return f"{where} ({exc})"
    for label, result in zip(labels, results):   # a result's own label and variant name files too (layers-<label>)
        file = out / label / RESULT_FILE
        named = [p for p in (name_problem(result.label, f"{file}: label"),
                             name_problem(result.variant, f"{file}: variant") if result.variant else None)
                 if p is not None]
        if result.label != label:
            named.append(f"{file}: label {str(result.label)[:40]!r} is not its folder's, {label!r}")
        if named:
            return f"{where} ({named[0]})"
    return header, results


def _report_only(out: Path, err: Console) -> int:
    saved = _saved(out)
    if isinstance(saved, str):
        return fail_input(saved)
    header, results = saved
    from orchestrator.run.profile_run import refresh_shapes

    results = [refresh_shapes(r, out) for r in results]
    return _write(results, header, out, err)


def _write(results: list[ProfiledTarget], header: dict[str, Any], out: Path, err: Console) -> int:
    from orchestrator.report.profile_report import PROFILE_FILE, write_profile_report

    paths = write_profile_report(results, out, header)
    log.info("profile: %s and %d more file(s)", out / PROFILE_FILE, len(paths) - 1)
    failed = [r for r in results if r.status != "ok"]
    for r in failed:
        log.error("%s: %s — %s", r.label, r.status, r.reason)
    return EXIT_RUN_FAILED if failed else EXIT_OK
