"""The sweep specification: what to run, how to measure it, and under which constraints.

Each dataclass field is the single source of truth for its default and its help text (docs/sweep-files.md's
schema tables are generated from them by `schema_markdown`). Loading is strict: see `orchestrator.core.json.schema`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.core.json.schema import MISSING, Problem, load, opt
from orchestrator.core.json.values import JsonDict
from orchestrator.core.planning.layout import parse_layout
from orchestrator.core.planning.names import name_problem
from orchestrator.core.planning.script import PLACEHOLDERS, arg_problems, convergence_problems

Auto = Literal["auto"]
Backend = Literal["auto", "ccl", "gloo"]
# What a timing trial keeps to itself while trials run concurrently (orchestrator.core.execution.schedule).
Isolation = Literal["node", "socket", "none"]
LrRule = Literal["none", "linear", "sqrt"]
EdgeMode = Literal["auto", "full", "none"]
ProbeWhen = Literal["auto", "always"]

MAX_SEEDS = 100              # convergence runs per global batch
MAX_PROFILE_LAYOUTS = 32     # layouts one `orch profile` runs (each is a real run, minutes)
MAX_PROFILE_VARIANTS = 16    # variants profiled side by side (each multiplies the layouts)
# A timeout beyond this is no limit a watchdog can keep: a year; above about 4e13 s a rank's wait would overflow.
MAX_TIMEOUT_S = 365 * 24 * 3600.0


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkloadSpec:
    name: str | None = opt(None, "the workload: an installed one (`orch workloads` lists them), "
                                 "'package.module:attribute' or 'path/to/file.py:attribute'; with `script`, the label "
                                 "of its results (default: the script's file name)")
    params: JsonDict = opt(factory=dict, help="workload parameters; unknown ones are rejected")
    script: str | None = opt(None, "instead of a workload: a training script run as it is, one process per rank as "
                                   "torchrun starts it (path relative to the sweep file; docs/own-script.md)")
    args: tuple[str | int | float, ...] = opt(
        (), "script only: its arguments, with " + ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)
            + " filled in per trial (also given as ORCH_LOCAL_BATCH, ... in its environment)")
    flops_per_sample: float | None = opt(
        None, "script only: training FLOPs per sample (forward and backward), for the hardware-efficiency table; "
              "default: what the script reports (orch.script.flops), else unknown", exclusive_minimum=0)
    samples_per_epoch: int | None = opt(None, "script only: training samples in one epoch over all ranks, for "
                                              "time-to-train; default: unknown", minimum=1)
    script_sha256: str | None = opt(None, "script only: the script's SHA-256, filled in when the sweep is loaded (so "
                                          "a changed script refuses a resume); give it to accept only that version")
    script_sources: str | None = opt(None, "script only: a SHA-256 of the Python files in the script's folder (what "
                                           "it may import from there), filled in when the sweep is loaded: a changed "
                                           "helper refuses a resume, fails the ranks and misses the probe cache")

    def __post_init__(self) -> None:
        errors = []
        script_only = [key for key in ("args", "flops_per_sample", "samples_per_epoch", "script_sha256",
                                       "script_sources")
                       if getattr(self, key)]
        if self.script is None and self.name is None:
            errors.append("give the workload's name, or a script to run")
        if self.script is None and script_only:
            errors.append(f"{', '.join(script_only)}: for a script only (a workload declares its own)")
        if self.script is not None and self.params:
            errors.append("params: a script takes its settings as args, not params")
        if self.script is not None:
            errors += arg_problems(self.arg_texts)
        if errors:
            raise ValueError("\n".join(errors))

    @property
    def arg_texts(self) -> tuple[str, ...]:
        """The script's arguments as text: a number (`--lr, 0.1` unquoted in YAML) as the shell would pass it."""
        return tuple(str(a) for a in self.args)


@dataclass(frozen=True, kw_only=True, slots=True)
class GridSpec:
    ranks: Auto | tuple[int, ...] = opt(
        "auto", "data-parallel ranks, or auto: powers of two up to the usable cores", minimum=1)
    threads_per_rank: Auto | tuple[int, ...] = opt(
        "auto", "compute threads (cores) per rank, or auto: powers of two up to the cores of one socket",
        minimum=1)
    local_batch: tuple[int, ...] = opt(MISSING, "samples per rank per step", minimum=1)

    def __post_init__(self) -> None:
        errors = []
        for name in ("ranks", "threads_per_rank", "local_batch"):
            value = getattr(self, name)
            if value != "auto" and not value:
                errors.append(f"grid.{name}: must list at least one value")
            elif value != "auto" and len(set(value)) != len(value):
                errors.append(f"grid.{name}: {list(value)} lists a value twice")
        if errors:
            raise ValueError("\n".join(errors))


@dataclass(frozen=True, kw_only=True, slots=True)
class MeasureSpec:
    warmup_steps: int = opt(3, "training steps run before timing, excluded from throughput", minimum=1)
    timed_steps: int = opt(10, "training steps in one timed repeat", minimum=1)
    repeats: int = opt(3, "timed repeats per trial; the median is reported, the spread as CV", minimum=1)
    data: Literal["memory", "stream"] = opt(
        "memory", "memory: batches prepared before timing; stream: the workload's loader runs inside "
                  "the timed region and its wait is reported as data_wait_share")
    peak: bool = opt(True, "time a large GEMM and the compute roof (more GEMM sizes, convolutions in both memory "
                           "formats) on each layout at sweep start, all its ranks at once and pinned as in the "
                           "trial, for the hardware-efficiency table")
    allreduce: bool = opt(True, "time all_reduce at sweep start (4 KiB to 64 MiB, each multi-rank count of the "
                                "grid, within a socket, across sockets and across nodes), for orch predict")
    isolation: Isolation = opt(
        "node", "what a timing trial (throughput, GEMM peak, all-reduce) keeps to itself while trials run "
                "concurrently: node (default: nothing else runs on its nodes, so its figure is as if alone; only "
                "trials on disjoint nodes overlap), socket (other trials may use its nodes' other sockets: a faster "
                "sweep, but they share the inter-socket link, the network and the node's memory), none (only its "
                "own cores: fastest, and its figures are disturbed by its neighbours' memory and cache traffic). "
                "Convergence runs measure epochs, not time: they always pack onto free cores")
    timeout_s: float = opt(900.0, "wall-clock limit for one throughput trial, start-up included",
                           exclusive_minimum=0, maximum=MAX_TIMEOUT_S)
    step_timeout_s: float = opt(
        180.0, "a rank that makes no progress for this long (hung collective, stuck step) ends the trial "
               "as timeout; judged from the rank's first training step on (start-up has its own budget)",
        exclusive_minimum=0, maximum=MAX_TIMEOUT_S)
    startup_timeout_s: float = opt(
        600.0, "a rank not ready to step this long after its process started (importing torch, the rendezvous, "
               "building the model, DDP) ends the trial as timeout: start-up is one long phase without steps, and "
               "on a slow or loaded CPU it can take minutes, so it is not judged by step_timeout_s",
        exclusive_minimum=0, maximum=MAX_TIMEOUT_S)
    probe: ProbeWhen = opt(
        "auto", "when the sweep probes its workload (one rank at local batches 2 and 8, cached; docs/probe.md): "
                "auto (default: when a figure the plan needs is not declared: memory per rank, FLOPs or epoch "
                "size), always (also when every figure is declared, for the probe's timed steps on this CPU, which "
                "the sweep's time estimate then rests on instead of a share of the GEMM rate; docs/costs.md)")


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergenceSpec:
    metric: str = opt(MISSING, "the workload metric to reach (for example accuracy or map)")
    target: float = opt(MISSING, "value of the metric that counts as converged")
    max_epochs: float = opt(10.0, "epoch cap; a seed that has not converged by then is recorded as such",
                            exclusive_minimum=0)
    seeds: tuple[int, ...] = opt((0, 1, 2), f"one run per seed and global batch (at most {MAX_SEEDS} seeds)")
    eval_every_epochs: float = opt(1.0, "evaluation interval in epochs (<= 1; fractions give finer "
                                        "epochs-to-target)", exclusive_minimum=0, maximum=1)
    lr_rule: LrRule = opt("linear", "learning-rate scaling in global batch relative to base_batch")
    base_lr: float = opt(MISSING, "learning rate at base_batch", exclusive_minimum=0)
    base_batch: int = opt(MISSING, "global batch that base_lr is tuned for", minimum=1)
    warmup_epochs: float = opt(0.0, "linear learning-rate warm-up from base_lr to the scaled rate",
                               minimum=0)
    timeout_s: float = opt(3600.0, "wall-clock limit for one convergence run", exclusive_minimum=0,
                           maximum=MAX_TIMEOUT_S)
    edge: EdgeMode = opt("auto", "measure the learning rate past which training stops improving (the stability "
                                 "edge) after warm-up: auto, a short range test on the first seed of each global batch "
                                 "(a few % of the runs' time); full, on every seed at the global batch, with "
                                 "Hessian-vector products for SGD; none")

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("convergence.seeds: must list at least one seed")
        if len(self.seeds) > MAX_SEEDS:
            raise ValueError(f"convergence.seeds: {len(self.seeds)} seeds, more than {MAX_SEEDS}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"convergence.seeds: {list(self.seeds)} lists a seed twice")
        if self.warmup_epochs >= self.max_epochs:
            raise ValueError(f"convergence.warmup_epochs({self.warmup_epochs}) >= "
                             f"max_epochs({self.max_epochs}): training would end during warm-up")


@dataclass(frozen=True, kw_only=True, slots=True)
class ConstraintsSpec:
    hyperthreads: bool = opt(False, "count hardware threads (SMT siblings) as cores")
    memory_headroom: float = opt(0.9, "fraction of a node's memory that its ranks (their private memory, and the "
                                      "libraries once) may use together", exclusive_minimum=0, maximum=1)
    rank_memory_mib: float | None = opt(
        None, "memory one rank needs, all of it (no libraries are added beside it); default: the workload's "
              "estimate for the local batch", exclusive_minimum=0)
    memory_budget_mib: float | None = opt(
        None, "per-rank limit on private memory enforced by the watchdog (status oom); default: the node's memory "
              "× headroom less the libraries, shared by the ranks on it", exclusive_minimum=0)
    ccl_workers: int = opt(1, "cores reserved per rank for oneCCL progress threads (ccl backend only)",
                           minimum=0)
    allow_slow_bf16: bool = opt(False, "run an explicit precision: bf16 on CPUs that emulate it (no AVX512-BF16 "
                                       "or AMX: 6-65× slower than fp32) instead of refusing the plan")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileSpec:
    layouts: tuple[str, ...] = opt((), "layouts `orch profile` runs when no --layout is given: RxTxB strings "
                                       "(ranks x threads per rank x local batch), e.g. 1x2x8; at most "
                                       f"{MAX_PROFILE_LAYOUTS}")
    warmup_steps: int = opt(3, "training steps before profiling, excluded from every profile", minimum=1)
    steps: int = opt(3, "training steps per profiling pass (timed, oneDNN verbose, torch.profiler)", minimum=1)
    variants: JsonDict = opt(factory=dict, help="named workload-parameter overrides profiled side by "
                                                "side, e.g. {reference: {focal_loss: reference}}; at most "
                                                f"{MAX_PROFILE_VARIANTS}, each name a folder name (letters, "
                                                "digits, '.', '_' or '-')")
    replay: bool = opt(True, "replay each distinct convolution, matmul and reorder problem alone, pinned like "
                             "the rank, for the efficiency ratio")

    def __post_init__(self) -> None:
        errors = []
        for text in self.layouts:
            try:
                parse_layout(text)
            except ValueError as err:
                errors.append(f"profile.layouts: {err}")
        if len(self.layouts) > MAX_PROFILE_LAYOUTS:
            errors.append(f"profile.layouts: {len(self.layouts)} layouts, more than {MAX_PROFILE_LAYOUTS}")
        if len(self.variants) > MAX_PROFILE_VARIANTS:
            errors.append(f"profile.variants: {len(self.variants)} variants, more than {MAX_PROFILE_VARIANTS}")
        errors += [problem for name in self.variants
                   if (problem := name_problem(name, "profile.variants")) is not None]
        if errors:
            raise ValueError("\n".join(errors))


Question = Literal["fastest_time_to_train", "scalability_table"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AdaptiveSpec:
    question: Question = opt(
        "fastest_time_to_train", "what the sweep is for: fastest_time_to_train (the fastest layout's time-to-train, "
                                 "or time per sample without convergence runs) or scalability_table (every "
                                 "layout's samples/s)")
    target_topology: str | None = opt(None, "topology file of the machine or cluster the question is about "
                                            "(relative to the working directory); default: the machine the sweep "
                                            "runs on, over its grid")
    nodes: int = opt(1, "nodes of target_topology the layouts use", minimum=1)
    budget_s: float | None = opt(None, "wall-clock seconds the sweep may spend, its calibration included; "
                                       "`orch sweep --budget` overrides", exclusive_minimum=0)
    target_rel_width: float | None = opt(None, "stop once the answer's interval is this narrow: (high - low) / "
                                               "the answer, so 0.2 is about ±10%; `orch sweep --target-rel-width` "
                                               "overrides", exclusive_minimum=0)


@dataclass(frozen=True, kw_only=True, slots=True)
class TrackingSpec:
    """Where a sweep is logged besides its results folder. Never changes what is measured: a changed section
    never refuses a resume (io.store's RESULT_AFFECTING leaves it out)."""

    mlflow: str | None = opt(None, "MLflow tracking URI the sweep logs to as it runs (http://host:5000, "
                                   "sqlite:///mlflow.db, ...); `--mlflow-uri URI` overrides it; docs/tracking.md")
    experiment: str | None = opt(None, "MLflow experiment of the sweep's runs; default: $MLFLOW_EXPERIMENT_NAME, "
                                       "else the sweep's name")
    tensorboard: bool = opt(False, "write TensorBoard event files (one run per trial, the grid as hyperparameters) "
                                   "into RESULTS/tensorboard/ as the sweep runs")


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepSpec:
    name: str = opt(MISSING, "sweep name; results go to results/<name>/")
    workload: WorkloadSpec = opt(MISSING, "the workload to train")
    grid: GridSpec = opt(MISSING, "the ranks × threads × local batch grid")
    backend: Backend = opt("auto", "torch.distributed backend: auto picks ccl when oneCCL's bindings "
                                   "import, else gloo")
    measure: MeasureSpec = opt(factory=MeasureSpec, help="throughput measurement protocol")
    convergence: ConvergenceSpec | None = opt(None, "epochs-to-target runs per global batch (optional)")
    constraints: ConstraintsSpec = opt(factory=ConstraintsSpec, help="hardware rules")
    profile: ProfileSpec | None = opt(None, "what `orch profile` runs when its options do not say (optional)")
    adaptive: AdaptiveSpec | None = opt(None, "measure only the cells a question needs, chosen one at a time "
                                              "(optional; docs/adaptive.md)")
    tracking: TrackingSpec | None = opt(None, "where the sweep is logged besides its results folder: MLflow, "
                                              "TensorBoard (optional; never changes results)")

    def __post_init__(self) -> None:
        problem = name_problem(self.name, "name")
        if problem is not None:
            raise ValueError(f"{problem} (it names the results folder)")


def script_problems(spec: SweepSpec) -> list[Problem]:
    """What a sweep file that names a script cannot ask for: {lr} and {max_epochs} without the convergence section
    they come from, or a convergence warm-up (orch cannot change a script's learning rate step by step). Checked
    when a sweep file is loaded, not in `__post_init__`: orch's own code derives specs without convergence (a
    capacity plan, a profile) from ones that have it."""
    if spec.workload.script is None:
        return []
    if spec.convergence is None:
        return [Problem("workload", line) for line in convergence_problems(spec.workload.arg_texts)]
    if spec.convergence.warmup_epochs > 0:
        return [Problem("convergence.warmup_epochs", "orch cannot set a script's learning rate step by step; give the "
                                                     "script its own warm-up and leave warmup_epochs at 0")]
    return []


SECTIONS: dict[str, type] = {
    "": SweepSpec, "workload": WorkloadSpec, "grid": GridSpec, "measure": MeasureSpec,
    "convergence": ConvergenceSpec, "constraints": ConstraintsSpec, "profile": ProfileSpec,
    "adaptive": AdaptiveSpec,
    "tracking": TrackingSpec,
}


def parse_spec(data: object) -> tuple[SweepSpec | None, list[Problem]]:
    """Strictly build a SweepSpec from parsed YAML. Workload parameters are checked by the caller,
    which knows the workload registry.

    >>> spec, problems = parse_spec({"name": "demo", "workload": {"name": "classifier"}, "grid": {"local_batch": [8]}})
    >>> spec.grid.local_batch, spec.grid.ranks, spec.measure.repeats, problems
    ((8,), 'auto', 3, [])
    """
    return load(SweepSpec, data)


def _default_text(default: str) -> str:
    if default.startswith(("MeasureSpec(", "ConstraintsSpec(")):
        return "(section)"
    return default.replace("'", "")


def schema_markdown() -> str:
    """The schema tables of docs/sweep-files.md, generated from the dataclasses so the docs cannot drift."""
    from orchestrator.core.json.schema import field_help

    out = []
    for section, cls in SECTIONS.items():
        out += [f"**{'top level' if not section else section}**", "", "| key | default | meaning |", "|---|---|---|"]
        for name, default, text in field_help(cls):
            out.append(f"| `{name}` | {_default_text(default)} | {text} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
