"""MLPerf RCP files (reference convergence points) as epochs-to-target points, read the way MLCommons'
checker reads them. Pure.

The rules, from mlcommons/logging `mlperf_logging/rcp_checker/rcp_checker.py` (read at 7bbf792, version
4.1.59; implemented here, not copied):

- **Units.** `_process_raw_rcp_data` takes the runs from "samples to converge" for llama2_70b_lora and
  flux1 and from "Epochs to converge" otherwise; but `read_submission_file` shows what those numbers are:
  `train_samples` for bert, `metadata.samples_count` for stable_diffusion and the LLM benchmarks
  (`metadata.step_num`, steps, in ruleset 3.1.0, whose file names the benchmark "sd"), `epoch_num` for the
  rest. So BERT's "Epochs to converge" are samples (about 2.8 million at batch 256), not epochs. Samples are
  converted with the dataset size of the training planned (epochs = samples ÷ samples per epoch), steps first
  to samples (× the batch). A file whose benchmark this table does not know, with numbers no epoch count
  reaches (`EPOCHS_PLAUSIBLE_MAX`), is refused with the reason rather than read as epochs.
- **Olympic mean.** `compute_rcp_stats` sorts the runs and drops one at each end (4 for unet3d) before the
  mean (`BatchPoint.mean`); its spread is the population standard deviation over every run.
- **Pruning.** `_prune_rcps`: drop every batch below the one with the fewest mean epochs, then walk the rest
  and drop a batch whose mean lies above the straight line between its two neighbours, stepping back one
  place after a drop so the next batch is checked against its new neighbours. (The checker's own comment
  says this is not a full lower convex envelope: a batch kept is not checked again after a later drop.)
  What is dropped converged slower than its neighbours imply: a less well tuned reference.
- **Duplicates.** The checker keys records by name and keeps every record of a pruned batch; a batch that
  appears in two entries is merged here: their runs are pooled, and the merge is reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from orchestrator.core.json.schema import load, opt
from orchestrator.core.json.values import JsonDict, JsonMapping, differing
from orchestrator.core.predict.epochs import BatchPoint
from orchestrator.errors import InputError

EPOCHS, SAMPLES, STEPS = "epochs", "samples", "steps"
EPOCHS_KEY, SAMPLES_KEY = "Epochs to converge", "samples to converge"
# read_submission_file: train_samples (bert) or metadata.samples_count (stable_diffusion, the LLMs)
SAMPLES_BENCHMARKS = frozenset({"bert", "stable_diffusion", "llama2_70b_lora", "flux1", "llama31_405b",
                                "llama31_8b", "gpt_oss_20b", "deepseekv3_671b", "qwen35_397b_grpo"})
STEPS_BENCHMARKS = frozenset({"sd"})          # training_3.1.0's stable diffusion file: metadata.step_num
# More epochs than any MLPerf reference needs (unet3d's, the most, stay below 5,000): a larger number in a
# file of a benchmark not listed above is a count of samples, steps or tokens, not of epochs.
EPOCHS_PLAUSIBLE_MAX = 10_000
FLOAT_SLACK = 1e-9   # a batch exactly on its neighbours' line is kept, whatever the last bit of the division says
UNET3D_DROPPED_EACH_END = 4                   # compute_rcp_stats: samples_rejected = 4 for unet3d, else 1


class RcpUnitError(InputError):
    """The RCP file's numbers cannot be turned into epochs; the message says why and what would."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NotConverged:
    """A seed of an exported batch that did not converge (`orch report`'s view, under "orch")."""

    seed: int | None = None
    status: str = ""
    max_epochs: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class OrchSection:
    """What `orch report` adds to each entry of the RCP file it exports, under "orch" (a key MLPerf's checker does
    not read): its own view of the batch, and the workload and parameters that ran, which `check_workload` compares
    with the workload planned. Every key optional: only `workload` and `params` are read."""

    metric: str | None = None
    target: float | None = None
    seeds: tuple[int | None, ...] = ()
    converged_seeds: tuple[int | None, ...] = ()
    not_converged: tuple[NotConverged, ...] = ()
    olympic_mean_epochs: float | None = None
    stdev_epochs: float | None = None
    method: str = ""
    layouts: tuple[str, ...] = ()
    workload: str | None = opt(None, "the orch workload that ran")
    params: JsonDict | None = opt(None, "its parameters")


@dataclass(frozen=True, kw_only=True, slots=True)
class Runs:
    """An entry's runs: under "samples to converge" (as llama2_70b_lora's and flux1's files give them) or under
    "Epochs to converge" (BERT's samples too: `_unit`)."""

    epochs_to_converge: tuple[float, ...] | None = opt(None, "the runs' epochs (BERT's: samples)",
                                                       exclusive_minimum=0, key=EPOCHS_KEY)
    samples_to_converge: tuple[float, ...] | None = opt(None, "the runs' samples", exclusive_minimum=0,
                                                        key=SAMPLES_KEY)

    @property
    def runs_key(self) -> str:
        """The key the runs are under: "samples to converge" where the entry has it, else "Epochs to converge"."""
        return SAMPLES_KEY if self.samples_to_converge is not None else EPOCHS_KEY

    @property
    def runs(self) -> tuple[float, ...]:
        return (self.samples_to_converge if self.samples_to_converge is not None else self.epochs_to_converge) or ()


RUNS_KEYS = (EPOCHS_KEY, SAMPLES_KEY)


@dataclass(frozen=True, kw_only=True, slots=True)
class RcpEntry(Runs):
    """One reference entry of an RCP file, by the keys MLCommons' files use (every ruleset in mlcommons/logging
    up to 6.1.0) and the "orch" section of the files `orch report` exports. Any other key is refused, with the
    list of these."""

    benchmark: str | None = opt(None, "the MLPerf benchmark the runs are of", key="Benchmark")
    creator: str | None = opt(None, "who measured the reference runs", key="Creator")
    when: str | None = opt(None, "when", key="When")
    platform: str | None = opt(None, "what they ran on", key="Platform")
    precision: str | None = opt(None, "in what precision", key="Precision")
    bs: int = opt(help="the global batch size", minimum=1, key="BS")
    hyperparams: JsonDict = opt(help="the reference runs' hyperparameters", factory=dict, key="Hyperparams")
    orch: OrchSection | None = None


@dataclass(frozen=True, slots=True)
class RcpFile:
    """An RCP file as read: one point per global batch (duplicates merged), in the file's own unit."""

    points: tuple[BatchPoint, ...]
    benchmark: str | None
    unit: str                        # EPOCHS, SAMPLES or STEPS
    unit_why: str                    # how the unit was decided
    notes: tuple[str, ...] = ()      # merged duplicates
    creators: tuple[str, ...] = ()   # who measured the reference runs (the entries' Creator)
    orch: OrchSection | None = None   # a file orch exported: its "orch" section (the workload it ran)


def read_entry(entry: object, where: str) -> tuple[RcpEntry | None, list[str]]:
    """One entry, strictly, and every problem in it, in the words the checker's keys call for.

    >>> for error in read_entry({"BS": True, "Epochs to converge": [3, 0], "Benchmark": 5, "Seeds": 3}, "x")[1]:
    ...     print(error)
    x: Seeds: unknown key; valid keys are: BS, Benchmark, Creator, Epochs to converge, Hyperparams, Platform, ...
    x: Benchmark: must be str or null, got 5
    x: BS must be a positive integer, got True
    x: 'Epochs to converge' must be a non-empty list of positive numbers
    """
    if not isinstance(entry, Mapping):
        return None, [f"{where}: expected an object, got {type(entry).__name__}"]
    read, problems = load(RcpEntry, entry)
    runs, _ = load(Runs, {k: v for k, v in entry.items() if k in RUNS_KEYS})   # also where another key is wrong
    others, bs, empty = [], [], []
    for p in problems:
        if p.path == "BS":
            bs.append(f"{where}: BS must be a positive integer, got {p.value!r}")
        elif p.path.startswith(RUNS_KEYS):
            empty.append(f"{where}: '{p.path.partition('[')[0]}' must be a non-empty list of positive numbers")
        else:
            others.append(f"{where}: {p}")
    if runs is not None and not runs.runs:
        empty.append(f"{where}: '{runs.runs_key}' must be a non-empty list of positive numbers")
    errors = list(dict.fromkeys([*others, *bs, *empty]))
    return (read if not errors else None), errors


def read_rcp(data: object, source: str = "RCP file") -> tuple[RcpFile | None, list[str]]:
    """The file's points, benchmark and unit, and every problem in it (None with the problems when any).

    >>> rcp, errors = read_rcp({"x_ref_8": {"Benchmark": "x", "BS": 8, "Epochs to converge": [3, 4, 5]},
    ...                         "x_ref_8b": {"Benchmark": "x", "BS": 8, "Epochs to converge": [6]}})
    >>> rcp.points[0].epochs, rcp.unit, errors
    ((3.0, 4.0, 5.0, 6.0), 'epochs', [])
    >>> print(rcp.notes[0])
    RCP file: global batch 8 appears in entries 'x_ref_8', 'x_ref_8b': their 3 + 1 runs are pooled
    >>> for error in read_rcp({"x_ref_8": {"BS": -1}})[1]: print(error)
    RCP file: entry 'x_ref_8': BS must be a positive integer, got -1
    RCP file: entry 'x_ref_8': 'Epochs to converge' must be a non-empty list of positive numbers
    """
    if not isinstance(data, dict) or not data:
        return None, [f"{source}: expected a JSON object of reference entries (name → {{BS, Epochs to converge}})"]
    entries: dict[str, RcpEntry] = {}
    errors: list[str] = []
    for name, raw in data.items():
        entry, problems = read_entry(raw, f"{source}: entry {name!r}")
        errors += problems
        if entry is not None:
            entries[str(name)] = entry
    benchmarks = {e.benchmark for e in entries.values() if e.benchmark is not None}
    keys = {e.runs_key for e in entries.values()}
    runs: dict[int, list[float]] = {}
    names: dict[int, list[str]] = {}
    for name, e in entries.items():
        runs.setdefault(e.bs, []).extend(e.runs)
        names.setdefault(e.bs, []).append(name)
    if len(benchmarks) > 1:
        errors.append(f"{source}: entries of several benchmarks {sorted(benchmarks)}; give one benchmark's file")
    if len(keys) > 1:
        errors.append(f"{source}: some entries give '{EPOCHS_KEY}' and others '{SAMPLES_KEY}'; give one unit")
    benchmark = next(iter(benchmarks), None)
    unit, why, unit_error = _unit(benchmark, keys, max((max(v) for v in runs.values()), default=0.0), source)
    if unit_error:
        errors.append(unit_error)
    if errors:
        return None, errors
    drop = UNET3D_DROPPED_EACH_END if benchmark == "unet3d" else 1
    counts = {name: len(e.runs) for name, e in entries.items()}
    notes = tuple(f"{source}: global batch {bs} appears in entries {', '.join(repr(n) for n in names[bs])}: their "
                  f"{' + '.join(str(counts[n]) for n in names[bs])} runs are pooled"
                  for bs in sorted(runs) if len(names[bs]) > 1)
    points = tuple(BatchPoint(bs, tuple(runs[bs]), dropped_each_end=drop) for bs in sorted(runs))
    creators = tuple(sorted({e.creator for e in entries.values() if e.creator is not None}))
    orch = next((e.orch for e in entries.values() if e.orch is not None), None)
    return RcpFile(points, benchmark, unit, why, notes, creators, orch), []


def _unit(benchmark: str | None, keys: set[str], largest: float, source: str) -> tuple[str, str, str]:
    """(unit, why, error): the unit of the file's numbers, from its key, its benchmark or their size."""
    if SAMPLES_KEY in keys:
        return SAMPLES, f"its entries give '{SAMPLES_KEY}'", ""
    if benchmark in SAMPLES_BENCHMARKS:
        return SAMPLES, (f"benchmark {benchmark}: MLPerf's RCP checker reads its convergence point as samples "
                         "(train_samples or samples_count), whatever the key says"), ""
    if benchmark in STEPS_BENCHMARKS:
        return STEPS, f"benchmark {benchmark}: MLPerf's RCP checker reads its convergence point as steps", ""
    if largest > EPOCHS_PLAUSIBLE_MAX:
        name = f"benchmark {benchmark}" if benchmark else "a file that names no benchmark"
        return EPOCHS, "", (f"{source}: '{EPOCHS_KEY}' reaches {largest:.4g}, more than any epoch count "
                            f"({EPOCHS_PLAUSIBLE_MAX:,}), and orch does not know the unit of {name}: these look like "
                            f"samples, steps or tokens. Give the runs as epochs, or as '{SAMPLES_KEY}' (samples) to "
                            "have them converted with --samples-per-epoch")
    return EPOCHS, f"'{EPOCHS_KEY}', all within {EPOCHS_PLAUSIBLE_MAX:,}", ""


def to_epochs(rcp: RcpFile, samples_per_epoch: int | None, source: str) -> tuple[BatchPoint, ...]:
    """The points in epochs: samples ÷ samples per epoch, steps × batch ÷ samples per epoch. RcpUnitError when
    the file counts samples or steps and no dataset size is known.

    >>> rcp = RcpFile((BatchPoint(256, (2_560_000.0,)),), "bert", SAMPLES, "bert")
    >>> to_epochs(rcp, 1_280_000, "f")[0].epochs
    (2.0,)
    """
    if rcp.unit == EPOCHS:
        return rcp.points
    if not samples_per_epoch:
        raise RcpUnitError(f"{source}: counts {rcp.unit} to converge, not epochs ({rcp.unit_why}); give "
                           "--samples-per-epoch N, the dataset size of the training you plan, to convert them")

    def convert(p: BatchPoint) -> BatchPoint:
        per_run = p.global_batch if rcp.unit == STEPS else 1
        return replace(p, epochs=tuple(v * per_run / samples_per_epoch for v in p.epochs))
    return tuple(convert(p) for p in rcp.points)


def conversion_note(rcp: RcpFile, samples_per_epoch: int | None, spe_source: str, source: str) -> str:
    """What the conversion did, in words ('' when the file was in epochs)."""
    if rcp.unit == EPOCHS or not samples_per_epoch:
        return ""
    return (f"{source}: its figures are {rcp.unit} to converge ({rcp.unit_why}); converted to epochs of "
            f"{samples_per_epoch:,} samples ({spe_source}); time-to-train (samples ÷ samples/s) does not depend on "
            "that size")


def prune(points: Sequence[BatchPoint]) -> tuple[tuple[BatchPoint, ...], tuple[BatchPoint, ...]]:
    """(kept, dropped) by the checker's `_prune_rcps` rule, on the olympic means.

    >>> pts = [BatchPoint(b, (e,)) for b, e in ((64, 5.0), (128, 4.0), (256, 6.0), (512, 6.0), (1024, 9.0))]
    >>> kept, dropped = prune(pts)
    >>> [p.global_batch for p in kept], [p.global_batch for p in dropped]
    ([128, 512, 1024], [64, 256])
    """
    ordered = sorted(points, key=lambda p: p.global_batch)
    if not ordered:
        return (), ()
    fastest = min(ordered, key=lambda p: (p.mean, p.global_batch))
    kept = [p for p in ordered if p.global_batch >= fastest.global_batch]
    i = 1
    while i < len(kept) - 1:
        low, mid, high = kept[i - 1], kept[i], kept[i + 1]
        line = float(np.interp(mid.global_batch, [low.global_batch, high.global_batch], [low.mean, high.mean]))
        if mid.mean > line * (1 + FLOAT_SLACK):
            del kept[i]
            i -= 1
        i += 1
    dropped = tuple(p for p in ordered if p not in kept)
    return tuple(kept), dropped


def pruning_note(dropped: Sequence[BatchPoint], source: str) -> str:
    if not dropped:
        return ""
    batches = ", ".join(f"{p.global_batch} ({p.mean:.3g} epochs)" for p in dropped)
    return (f"{source}: global batch(es) {batches} dropped by the RCP checker's pruning (below the fastest-converging "
            "batch, or slower than the line between their neighbours): not fitted, shown apart")


@dataclass(frozen=True, slots=True)
class Reference:
    """The model and data set an MLPerf benchmark's reference convergence points were measured on, and the
    orch workload and parameters that build that model."""

    workload: str
    model: str
    dataset: str
    params: JsonMapping
    data_param: str                  # the workload parameter that says which data it trains on
    synthetic: tuple[str, ...]       # the values of it that mean orch's own synthetic data


# MLPerf Training's references, for the benchmarks orch has a workload family for (docs/workloads.md).
MLPERF_REFERENCES: dict[str, Reference] = {
    "retinanet": Reference("retinanet", "RetinaNet with a ResNeXt50-32x4d FPN at 800×800 px, 264 classes",
                           "OpenImages (MLPerf's 264-class subset)",
                           {"backbone": "resnext50_32x4d", "image_size": 800, "classes": 264}, "dataset",
                           ("synthetic", "coco")),
    "resnet": Reference("torchvision", "ResNet-50 at 224×224 px, 1,000 classes", "ImageNet",
                        {"arch": "resnet50", "image_size": 224, "classes": 1000}, "data_path", ("",)),
}


@dataclass(frozen=True, slots=True)
class WorkloadCheck:
    """Whether an RCP file describes the measured workload: what it describes, and each difference in words."""

    describes: str
    differences: tuple[str, ...]
    unchecked: str = ""              # why nothing could be compared ("" when it was)

    @property
    def matches(self) -> bool:
        return not self.differences and not self.unchecked


def _params_words(params: JsonMapping, keys: Sequence[str]) -> str:
    return ", ".join(f"{k} {params.get(k)!r}" for k in keys)


def check_workload(benchmark: str | None, meta: OrchSection | None, workload: str,
                   params: JsonMapping) -> WorkloadCheck:
    """Compare the RCP's benchmark (or, for a file orch exported, the workload it recorded in its "orch" section,
    `meta`) with the measured workload and its parameters.

    >>> c = check_workload("retinanet", None, "retinanet", {"backbone": "resnet18", "image_size": 128,
    ...                                                     "classes": 4, "dataset": "synthetic"})
    >>> print(c.describes.replace(", on ", ",\\n  on "))
    MLPerf's retinanet: RetinaNet with a ResNeXt50-32x4d FPN at 800×800 px, 264 classes,
      on OpenImages (MLPerf's 264-class subset)
    >>> for d in c.differences: print(d.replace("; ", ";\\n  "))
    model: backbone 'resnext50_32x4d', image_size 800, classes 264 in the reference;
      backbone 'resnet18', image_size 128, classes 4 measured
    data set: OpenImages (MLPerf's 264-class subset) in the reference;
      dataset 'synthetic' measured
    """
    if meta is not None and meta.workload:
        theirs = meta.params or {}
        differences = ([f"workload: {meta.workload} in the file; {workload} measured"]
                       if meta.workload != workload else [])
        diff = differing(theirs, params)
        if diff:
            differences.append(f"parameters: {', '.join(f'{k} {a!r}' for k, a, _ in diff)} in the file; "
                               f"{', '.join(f'{k} {b!r}' for k, _, b in diff)} measured")
        return WorkloadCheck(f"orch's workload {meta.workload} ({benchmark or 'no benchmark named'})",
                             tuple(differences))
    ref = MLPERF_REFERENCES.get(benchmark or "")
    if ref is None:
        why = ("it names no benchmark" if not benchmark else
               f"orch does not know the reference model of benchmark {benchmark!r}")
        return WorkloadCheck(f"benchmark {benchmark}" if benchmark else "an unnamed benchmark", (),
                             f"{why}: nothing says it describes the measured workload {workload}")
    out = []
    if workload != ref.workload:
        out.append(f"workload: {ref.workload} builds the reference; {workload} measured")
    keys = [k for k, v in ref.params.items() if params.get(k) != v]
    if keys:
        out.append(f"model: {_params_words(ref.params, keys)} in the reference; {_params_words(params, keys)} "
                   "measured")
    data = params.get(ref.data_param, ref.synthetic[0])
    if data in ref.synthetic:
        out.append(f"data set: {ref.dataset} in the reference; {ref.data_param} {data!r} measured")
    return WorkloadCheck(f"MLPerf's {benchmark}: {ref.model}, on {ref.dataset}", tuple(out))
