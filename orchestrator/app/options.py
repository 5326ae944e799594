"""What each command takes: one frozen options object per command, read in one place (`orchestrator.app`).

The same object is filled by the command line (`orchestrator.cli` builds each subcommand's argparse options
from these fields: a field's `Flag` says its flag, help, metavar and how its text is parsed) and by the
Python API (`orch.sweep("sweeps/x.yaml", max_concurrent=1)` builds `SweepOptions(sweep=..., max_concurrent=1)`;
`orch.sweep(orch.SweepOptions(...))` takes one built by hand). A new option is one field here: its flag, its
help and its default come with it, and the use-case that reads it (orchestrator/app/) is the only other place
it appears. Options that change only how a command prints (`--json`, `--validate`) are the CLI's own.

Paths are kept as given (text), so messages name them as the user wrote them. Validation that needs no file
is here (`__post_init__` raises `InputError`); the rest, where the files are read.

>>> options = SweepOptions(sweep="sweeps/classifier.yaml", max_concurrent=1)
>>> options.max_concurrent, options.convergence, options.nodes_timeout_s
(1, True, 300.0)
>>> flag_of(fields_of(SweepOptions)["convergence"]).flag, flag_of(fields_of(SweepOptions)["convergence"]).switch
('--no-convergence', False)
>>> PredictOptions(results="results/x", nodes=(0,))
Traceback (most recent call last):
...
orchestrator.errors.InputError: nodes=[0]: expected positive whole numbers
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.constants import DEFAULT_RESULTS_ROOT, RESULTS_ROOT_ENV_VAR
from orchestrator.core.machine.emulation import DEFAULT_NAME as DEFAULT_CLUSTER_NAME
from orchestrator.core.machine.emulation import DEFAULT_RAY_PORT as DEFAULT_CLUSTER_RAY_PORT
from orchestrator.core.machine.emulation import DEFAULT_SUBNET as DEFAULT_CLUSTER_SUBNET
from orchestrator.core.text.units import (
    SECONDS_PER_HOUR,
    parse_duration,
    parse_node_hours,
    parse_rate,
    positive_duration,
)
from orchestrator.errors import InputError

FLAG = "orch.flag"   # the dataclass field's metadata key for its `Flag`

# Nodes of a batch job start within seconds of each other; minutes mean one of them failed to start Ray.
DEFAULT_NODES_TIMEOUT_S = 300.0
DEFAULT_MAX_PASSES = 3   # `orch profile`: a disturbed target is run again up to this many times in all
REPORT_FORMATS = ("terminal", "md", "csv", "json", "png", "all")
# What one prediction may be asked for: each value is a planned cluster (every layout of it predicted), so the
# lists and their values are bounded; beyond them the plan alone would take minutes.
MAX_LIST_VALUES = 32
MAX_NODES = 100_000
MAX_LOCAL_BATCH = 1 << 20


@dataclass(frozen=True, slots=True)
class Alias:
    """An old spelling of a flag, kept for one release: it still works, read as it always was (`parse`: its own
    unit, hours for `--deadline-h`), and the command says once what to write instead."""

    flag: str
    parse: Callable[[str], object] | None = None


@dataclass(frozen=True, slots=True)
class Flag:
    """How an options field is given on the command line.

    `flag`: "--max-concurrent"; "" derives it from the field's name; None makes the field positional.
    `parse`: the text to the value, raising InputError with a one-line reason (argparse prints it).
    `switch`: the flag takes no value and sets the field to this (True for `--rerun`, False for `--no-report`).
    `bare`: the flag alone sets the field to `bare` (`--mlflow`: True); its value is given as `--mlflow-uri URI`
    or `--mlflow=URI`, never as the next word (which is the command's own: `orch sweep --mlflow SWEEP`).
    `repeat`: the flag may be given several times, the values kept in order (a tuple).
    `exclusive`: fields with the same word here exclude one another.
    `remainder`: a positional that takes every word after it (`-- CMD ...`).
    `aliases`: old spellings that still work and say what replaces them.
    """

    help: str
    flag: str | None = ""
    metavar: str | None = None
    parse: Callable[[str], object] | None = None
    switch: bool | None = None
    bare: bool | None = None
    repeat: bool = False
    choices: tuple[str, ...] = ()
    exclusive: str = ""
    remainder: bool = False
    aliases: tuple[Alias, ...] = ()


def option(default: object, help: str, *, flag: str | None = "", metavar: str | None = None,
           parse: Callable[[str], object] | None = None, switch: bool | None = None, bare: bool | None = None,
           repeat: bool = False, choices: tuple[str, ...] = (), exclusive: str = "", remainder: bool = False,
           aliases: tuple[Alias, ...] = (), required: bool = False) -> Any:
    """An options field: its default (none when `required`) and how the command line gives it (`Flag`).

    >>> @dataclass(frozen=True, kw_only=True, slots=True)
    ... class Demo:
    ...     steps: int = option(3, "steps per pass", parse=int)
    >>> Demo().steps, flag_of(dataclasses.fields(Demo)[0]).help
    (3, 'steps per pass')
    """
    meta = {FLAG: Flag(help, flag, metavar, parse, switch, bare, repeat, choices, exclusive, remainder, aliases)}
    if required:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def flag_of(field: dataclasses.Field[object]) -> Flag:
    """The field's `Flag` (every options field has one)."""
    found: Flag = field.metadata[FLAG]
    return found


def fields_of(cls: type) -> dict[str, dataclasses.Field[object]]:
    """An options class's fields by name, in their order."""
    return {f.name: f for f in dataclasses.fields(cls)}


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

OptionsT = TypeVar("OptionsT", bound="DataclassInstance")


def options_of(cls: type[OptionsT], given: Mapping[str, object]) -> OptionsT:
    """`cls` built from keyword arguments as the Python API takes them: a path (`pathlib.Path`) becomes its text,
    a list a tuple. An unknown name raises TypeError listing every valid one with its default.

    >>> options_of(PlanOptions, {"sweep": "s.yaml"}).sweep
    's.yaml'
    >>> options_of(PlanOptions, {"sweep": "s.yaml", "topolgy": "t.yaml"})
    Traceback (most recent call last):
    ...
    TypeError: PlanOptions has no option 'topolgy'; its options: sweep (required), topology=None
    """
    known = fields_of(cls)
    unknown = [name for name in given if name not in known]
    if unknown:
        listed = ", ".join(f"{n} (required)" if f.default is dataclasses.MISSING else f"{n}={f.default!r}"
                           for n, f in known.items())
        raise TypeError(f"{cls.__name__} has no option {', '.join(map(repr, unknown))}; its options: {listed}")
    return cls(**{name: _plain(value) for name, value in given.items()})


def _plain(value: object) -> object:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    return value


# --- how a flag's text is read (each raises InputError: argparse prints it as the option's error) -------------

def positive_number(text: str) -> float:
    """A finite number > 0 (`inf` is no deadline, budget or timeout: it is refused, as NaN is).

    >>> positive_number("2.5")
    2.5
    """
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{text!r}: expected a positive number") from None
    if not (value > 0 and math.isfinite(value)):
        raise InputError(f"{text!r}: expected a finite positive number")
    return value


def positive_int(text: str) -> int:
    """A whole number > 0, with a one-line error naming the input.

    >>> positive_int("4")
    4
    """
    value = positive_number(text)
    if not value.is_integer():
        raise InputError(f"{text!r}: expected a positive whole number")
    return int(value)


def _int_list(text: str, most: int) -> tuple[int, ...]:
    shown = text if len(text) <= 40 else text[:40] + "..."
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{shown!r}: expected comma-separated positive integers, e.g. 1,2,4") from None
    if not values or any(v <= 0 for v in values):
        raise InputError(f"{shown!r}: expected comma-separated positive integers, e.g. 1,2,4")
    if len(set(values)) > MAX_LIST_VALUES:
        raise InputError(f"{shown!r}: {len(set(values))} values, more than {MAX_LIST_VALUES}")
    if max(values) > most:
        raise InputError(f"{shown!r}: {max(values)} is more than {most:,}")
    return tuple(values)


def node_list(text: str) -> tuple[int, ...]:
    """Node counts, comma-separated: `1,2,4` (at most MAX_LIST_VALUES of them, each at most MAX_NODES).

    >>> node_list("1,2,4")
    (1, 2, 4)
    """
    return _int_list(text, MAX_NODES)


def batch_list(text: str) -> tuple[int, ...]:
    """Local batches, comma-separated: `8,16` (at most MAX_LIST_VALUES, each at most MAX_LOCAL_BATCH)."""
    return _int_list(text, MAX_LOCAL_BATCH)


def hours(text: str) -> float:
    """Hours of a duration given with its unit ('8h', '90m', '1h30m'; core.text.units).

    >>> hours("90m")
    1.5
    """
    return positive_duration(text) / SECONDS_PER_HOUR


# --- the options every command of a kind shares (each a function: the help differs a little by command) --------

TOPOLOGY_HELP = ("topology file (YAML/JSON, compact or detailed form: docs/topologies.md) describing the machine to "
                 "plan for or to emulate; default: detect this machine")
SWEEP_HELP = "sweep file (YAML), e.g. sweeps/retinanet.yaml"


def _topology() -> str | None:
    field: str | None = option(None, TOPOLOGY_HELP, metavar="FILE")   # the field, typed as its default
    return field


def _min_nodes() -> int | None:
    # A job script starts the workers and the sweep together, and Ray nodes join one by one; without waiting, the
    # plan would see only the nodes that joined first.
    field: int | None = option(
        None, "with --address: wait until the Ray cluster has at least N alive nodes before planning "
              "(a job script that starts Ray on every node sets it to the node count)",
        metavar="N", parse=positive_int)
    return field


def _nodes_timeout_s() -> float:
    field: float = option(DEFAULT_NODES_TIMEOUT_S, f"give up waiting for --min-nodes after this long, with exit "
                                                   f"status 2 (default {DEFAULT_NODES_TIMEOUT_S:g}s)",
                          flag="--nodes-timeout", metavar="DURATION", parse=positive_duration,
                          aliases=(Alias("--nodes-timeout-s", positive_number),))
    return field


def _mlflow(what: str) -> str | bool | None:
    field: str | bool | None = option(
        None, f"{what}; --mlflow-uri URI (or --mlflow=URI) names the server, else $MLFLOW_TRACKING_URI. Needs "
              "the tracking extra (docs/tracking.md)", metavar="URI", bare=True)
    return field


TENSORBOARD_HELP = ("write TensorBoard event files, one run per trial, into RESULTS/tensorboard/. Needs the tracking "
                    "extra (docs/tracking.md)")


def _trackers() -> tuple[str, ...]:
    field: tuple[str, ...] = option(
        (), "also log to the tracker registered as NAME (orch's: mlflow, tensorboard; or an orch.trackers entry "
            "point), with its SETTING; repeatable (docs/tracking.md)", flag="--track", metavar="NAME[=SETTING]",
        repeat=True)
    return field


# --- the commands --------------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class PlanOptions:
    """`orch plan` / `orch.plan`: the sweep file's grid checked against a machine."""

    sweep: str = option(None, SWEEP_HELP, flag=None, metavar="SWEEP", required=True)
    topology: str | None = _topology()


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeOptions:
    """`orch probe`: one rank's memory, FLOPs and epoch size measured where the workload does not declare them."""

    sweep: str = option(None, "sweep file (YAML)", flag=None, metavar="SWEEP", required=True)
    topology: str | None = _topology()
    force: bool = option(False, "measure again, even with a cached probe or a workload that declares every figure",
                         switch=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepOptions:
    """`orch sweep` / `orch.sweep`: every feasible grid point run as a pinned torch.distributed job on Ray."""

    sweep: str = option(None, SWEEP_HELP, flag=None, metavar="SWEEP", required=True)
    topology: str | None = _topology()
    address: str | None = option(None, "join an existing Ray cluster (e.g. 10.0.0.1:6379 or 'auto'); default: "
                                       "$RAY_ADDRESS, else start an embedded local Ray bound to loopback with the "
                                       "dashboard off", metavar="ADDR")
    min_nodes: int | None = _min_nodes()
    nodes_timeout_s: float = _nodes_timeout_s()
    results: str | None = option(None, f"results folder of this sweep; default: ${RESULTS_ROOT_ENV_VAR} or "
                                       f"'{DEFAULT_RESULTS_ROOT}', plus /<sweep name>", metavar="DIR")
    rerun: bool = option(False, "run again trials already recorded as ok (default: skip them, i.e. resume)",
                         switch=True)
    convergence: bool = option(True, "skip the convergence runs even if the sweep has a convergence section",
                               flag="--no-convergence", switch=False)
    max_concurrent: int | None = option(None, "at most N trials in flight at once (1: one after another); default: "
                                              "as many as measure.isolation allows", metavar="N", parse=positive_int)
    report: bool = option(True, "do not write the report at the end (`orch report` can write it later)",
                          flag="--no-report", switch=False)
    budget_s: float | None = option(None, "run adaptively (docs/adaptive.md) and stop before a trial that would not "
                                          "fit in DURATION of wall-clock time (30m, 2h, 1h30m); overrides "
                                          "adaptive.budget_s", flag="--budget", metavar="DURATION",
                                    parse=positive_duration)
    target_width: float | None = option(None, "run adaptively and stop once the answer's interval is this narrow: "
                                              "(high - low) / answer, so 0.2 is about ±10%; overrides "
                                              "adaptive.target_rel_width", flag="--target-rel-width", metavar="W",
                                        parse=positive_number, aliases=(Alias("--target-width"),))
    full: bool = option(False, "run every feasible trial even if the sweep file has an adaptive section",
                        switch=True)
    replay: str | None = option(None, "no trial runs: replay the adaptive policy against FOLDER, a results folder "
                                      "measured in full, reading each chosen trial's record as if measured now; "
                                      "print each choice and where it would have stopped", metavar="FOLDER")
    mlflow: str | bool | None = _mlflow("log the sweep to MLflow as it runs (a run per trial)")
    tensorboard: bool | None = option(None, TENSORBOARD_HELP, switch=True)
    trackers: tuple[str, ...] = _trackers()


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportOptions:
    """`orch report`: the report regenerated from a results folder, and the folder logged after the fact."""

    results: str = option(None, "results folder, e.g. results/classifier", flag=None, metavar="RESULTS_DIR",
                          required=True)
    formats: tuple[str, ...] = option((), "terminal (print the tables), md, csv, json, png, or all "
                                          "(md+csv+json+png); repeatable; default: terminal and all files",
                                      flag="--format", metavar="FORMAT", repeat=True, choices=REPORT_FORMATS)
    out: str | None = option(None, "folder for the report files; default: RESULTS_DIR/report", metavar="DIR")
    mlflow: str | bool | None = _mlflow("log what the sweep did not to MLflow, and the report's files")
    tensorboard: bool = option(False, TENSORBOARD_HELP, switch=True)
    trackers: tuple[str, ...] = _trackers()


@dataclass(frozen=True, kw_only=True, slots=True)
class TrackOptions:
    """`orch.track` (`orch report --mlflow / --tensorboard / --track`): a results folder logged after the fact.
    `report_files`: the files uploaded, else those of `report_dir` (default RESULTS/report) that `orch report`
    writes, each a regular file, never a link."""

    folder: str = option(None, "results folder", flag=None, metavar="RESULTS_DIR", required=True)
    mlflow: str | bool | None = option(None, "a tracking URI, or True for $MLFLOW_TRACKING_URI (else MLflow's "
                                             "default); never the URI the folder's spec.json names", bare=True)
    tensorboard: bool = option(False, TENSORBOARD_HELP, switch=True)
    trackers: tuple[str, ...] = _trackers()
    report_dir: str | None = option(None, "the report folder whose files are uploaded; default RESULTS/report")
    report_files: tuple[str, ...] | None = option(None, "the files uploaded (instead of report_dir's)", repeat=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class PredictOptions:
    """`orch predict` / `orch.predict`: time-to-train for layouts, batches and clusters not run."""

    results: str = option(None, "results folder of a sweep, e.g. results/classifier", flag=None,
                          metavar="RESULTS_DIR", required=True)
    topology: str | None = option(None, "target machine or cluster (topology file); default: the one the sweep ran "
                                        "on", metavar="FILE")
    nodes: tuple[int, ...] | None = option(None, f"node counts to consider, e.g. 1,2,4,8 (at most {MAX_LIST_VALUES} "
                                                 f"values, each at most {MAX_NODES:,}); default: powers of two up to "
                                                 "the target's nodes", metavar="LIST", parse=node_list)
    local_batch: tuple[int, ...] | None = option(None, f"local batches to consider, e.g. 8,16 (at most "
                                                       f"{MAX_LIST_VALUES} values, each at most {MAX_LOCAL_BATCH:,}); "
                                                       "default: the sweep's", metavar="LIST", parse=batch_list)
    rcp: str | None = option(None, "MLPerf RCP JSON (rcps_<benchmark>.json, as MLCommons publishes and `orch "
                                   "report` exports) as the convergence data, instead of the sweep's convergence "
                                   "runs", metavar="FILE")
    samples_per_epoch: int | None = option(None, "samples in one epoch of the training you plan; default: the "
                                                 "sweep workload's", metavar="N", parse=positive_int)
    calibration: tuple[str, ...] = option((), "also use the all-reduce calibration of another results folder (e.g. "
                                              "a sweep run on the target cluster); repeatable", metavar="DIR",
                                          repeat=True)
    deadline_h: float | None = option(None, "recommend the fewest node-hours that train within DURATION (8h, 90m)",
                                      flag="--deadline", metavar="DURATION", parse=hours, exclusive="limit",
                                      aliases=(Alias("--deadline-h", positive_number),))
    budget_node_h: float | None = option(None, "recommend the fastest layout within this many node-hours "
                                               "(200node-h)", flag="--budget", metavar="NODE-HOURS",
                                         parse=parse_node_hours, exclusive="limit",
                                         aliases=(Alias("--budget-node-h", positive_number),))

    def __post_init__(self) -> None:
        for name, values in (("nodes", self.nodes), ("local_batch", self.local_batch)):
            if values is not None and (not values or any(int(v) != v or v <= 0 for v in values)):
                raise InputError(f"{name}={list(values)}: expected positive whole numbers")
        for name, value in (("deadline_h", self.deadline_h), ("budget_node_h", self.budget_node_h)):
            if value is not None and not value > 0:
                raise InputError(f"{name}={value}: expected a positive number")
        if self.deadline_h is not None and self.budget_node_h is not None:
            raise InputError("give deadline_h or budget_node_h, not both")


@dataclass(frozen=True, kw_only=True, slots=True)
class ScoreOptions:
    """`orch score` / `orch.score`: a saved prediction scored against results folders measured later."""

    prediction: str = option(None, "a saved prediction: the prediction.json `orch predict --out DIR` wrote (or DIR)",
                             flag=None, metavar="PREDICTION", required=True)
    results: tuple[str, ...] = option((), "results folder(s) measured later, e.g. the sweep run on the real cluster",
                                      flag=None, metavar="RESULTS_DIR", repeat=True)

    def __post_init__(self) -> None:
        if not self.results:
            raise InputError("give at least one results folder to score the prediction against")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileOptions:
    """`orch profile`: where a training step's time goes, for one or more layouts side by side."""

    sweep: str = option(None, "sweep file (YAML): its workload, backend, constraints and profile section are used; "
                              "its grid is not", flag=None, metavar="SWEEP", required=True)
    layouts: tuple[str, ...] = option((), "ranks x threads per rank x local batch, e.g. 1x2x8; repeatable; default: "
                                          "the sweep file's profile.layouts", flag="--layout", metavar="RxTxB",
                                      repeat=True)
    steps: int | None = option(None, "profiled steps per pass (default: profile.steps, 3)", metavar="N", parse=int)
    out: str | None = option(None, f"output folder; default: the sweep's results folder (${RESULTS_ROOT_ENV_VAR} or "
                                   f"'{DEFAULT_RESULTS_ROOT}')/<name>/profile", metavar="DIR")
    report_only: bool = option(False, "run nothing: rewrite profile.md, the tables and the plots from the results "
                                      "already in the output folder (after a report change, or to restore an "
                                      "edited file)", switch=True)
    replay: bool | None = option(None, "skip replaying primitives alone (no efficiency ratio)", flag="--no-replay",
                                 switch=False)
    max_passes: int = option(DEFAULT_MAX_PASSES, "run a target whose physical checks fail (above its roof, a rank "
                                                 "short of its CPUs, ...) again, up to N runs in all (default "
                                                 f"{DEFAULT_MAX_PASSES})", metavar="N", parse=int)
    project_to: str | None = option(None, "also project each step onto another CPU from its primitives: 'avx2' (this "
                                          "CPU capped to AVX2) or a topology file stating per-core peaks; works "
                                          "with --report-only", metavar="avx2|TOPOLOGY")
    topology: str | None = _topology()
    address: str | None = option(None, "join an existing Ray cluster (as in orch sweep)", metavar="ADDR")


@dataclass(frozen=True, kw_only=True, slots=True)
class TopologyOptions:
    """`orch topology`: the machine model planning uses, of this machine, a file or every node of a Ray cluster."""

    topology: str | None = _topology()
    address: str | None = option(None, "show every node of this Ray cluster (e.g. 10.0.0.1:6379 or 'auto'), each "
                                       "detected on that node itself, as `orch sweep --address` plans on them",
                                 metavar="ADDR")
    min_nodes: int | None = _min_nodes()
    nodes_timeout_s: float = _nodes_timeout_s()

    def __post_init__(self) -> None:
        if self.address and self.topology:
            raise InputError("--address and --topology: give one (a Ray cluster to ask, or a file to read)")
        if self.min_nodes and not self.address:
            raise InputError("--min-nodes needs --address (it waits for nodes of a Ray cluster)")


# --- `orch cluster`: an emulated cluster (docs/clusters.md#emulate-your-cluster) ------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterUpOptions:
    """`orch cluster up`: the nodes and links made, Ray started in each, each link measured. The fields that
    `core.machine.emulation.ClusterRequest` has carry its names and are checked there."""

    nodes: int = option(None, "Ray nodes (the first is the head)", metavar="N", parse=positive_int, required=True)
    cores_per_node: int = option(None, "physical cores per node, with their hardware threads, disjoint", metavar="C",
                                 parse=positive_int, required=True)
    rate_bits_per_s: float | None = option(None, "each node's link, both ways, in tc's units: 25gbit, 1gbit, 200mbit "
                                                 "(default: unshaped)", flag="--rate", metavar="RATE", parse=parse_rate)
    latency_s: float = option(0.0, "one-way node-to-node latency (1ms, 250us), where the kernel has netem; said when "
                                   "not", flag="--latency", metavar="TIME", parse=parse_duration)
    name: str = option(DEFAULT_CLUSTER_NAME, f"the cluster's name (namespaces orch-NAME-*; default "
                                             f"{DEFAULT_CLUSTER_NAME})")
    subnet: str = option(DEFAULT_CLUSTER_SUBNET, f"private IPv4 network of the nodes (default "
                                                 f"{DEFAULT_CLUSTER_SUBNET})")
    ray_port: int = option(DEFAULT_CLUSTER_RAY_PORT, "the Ray head's port", flag="--port", metavar="PORT",
                           parse=positive_int)
    share_cores: bool = option(False, "let nodes share cores when there are too few (an all-reduce calibration on "
                                      "a slow link; never for throughput)", switch=True)
    detach: bool = option(False, "leave the cluster up and return; `orch cluster down --name NAME` removes it",
                          switch=True)
    command: tuple[str, ...] = option((), "-- CMD...: run in the head's namespace, then tear down", flag=None,
                                      metavar="command", remainder=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterDownOptions:
    """`orch cluster down`: the emulated clusters whose owner is gone removed (a killed owner's leftovers); a live
    owner's cluster only by name or with `--all`."""

    name: str | None = option(None, "this cluster, whatever its owner (default: every cluster whose owner is gone)",
                              exclusive="which")
    all_clusters: bool = option(False, "every emulated cluster on this machine, live owners' and detached ones too",
                                flag="--all", switch=True, exclusive="which")


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterExecOptions:
    """`orch cluster exec`: a command run in the head's namespace, with the cluster's Ray token."""

    name: str = option(DEFAULT_CLUSTER_NAME, f"the cluster (default {DEFAULT_CLUSTER_NAME})")
    command: tuple[str, ...] = option((), "-- CMD...", flag=None, metavar="command", remainder=True)
