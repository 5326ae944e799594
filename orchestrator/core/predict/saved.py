"""A prediction as an artifact: what `orch predict --out DIR` saves in `DIR/prediction.json` so that it can be
scored later against what ran (`orch score`, `core.predict.score`). Pure.

The saved part is a stable, versioned contract (docs/validation.md#the-saved-prediction): the keys of
`SAVED_KEYS` at the top level of prediction.json, beside the display keys (tables, notes) that may change. It
holds every predicted layout (central value, both interval ends, the predictor, the axes it lies beyond and by
how many doublings, its notes, and the naive baselines' values computed from the same inputs), every predicted
global batch's epochs, and what the prediction was made from: the input folders with their content hashes, the
workload and its parameters, the precision, the target machine, and orch's version and commit.

A file from a newer orch (a larger `format_version`) is refused, never half read:

>>> try:
...     from_json({"format": FORMAT, "format_version": FORMAT_VERSION + 1}, "p.json")
... except SavedPredictionError as err:
...     print(str(err)[:78])
p.json: written by a newer orch (prediction format 2; this orch reads up to 1)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.core.json.jsonobject import JsonObject
from orchestrator.core.json.schema import Problem, load, opt, to_plain
from orchestrator.core.json.values import JsonDict, JsonValue
from orchestrator.errors import InputError

FORMAT = "orch-prediction"
FORMAT_VERSION = 1

# Baselines every saved cell carries (where they apply), by id: naive planners a user could have used instead (the
# first two are the registered predictors of the same ids, `predictors.PREDICTORS`).
LINEAR = "linear"            # linear scaling in cores from the 1-rank, fewest-threads cell at the same batch
AMDAHL = "amdahl"            # Amdahl's law in total cores, its serial fraction fitted to the measured cells
SAME_CORES = "same_cores"    # the fastest measured cell with as many cores in all (ranks × threads), any split
ONE_NODE = "one_node"        # across nodes: the same ranks × threads × batch on one node, the network ignored
# Epochs baselines: the nearest measured global batch's epochs (flat), and epochs proportional to the batch from it
FLAT = "flat"
PROPORTIONAL = "proportional"
BASELINE_WORDS = {
    LINEAR: "linear scaling in cores from the 1-rank, fewest-threads cell",
    AMDAHL: "Amdahl's law in total cores, fitted to the measured cells",
    SAME_CORES: "the fastest measured cell with as many cores in all",
    ONE_NODE: "the same layout on one node, the network ignored",
    FLAT: "the nearest measured global batch's epochs, unchanged",
    PROPORTIONAL: "the nearest measured global batch's epochs, scaled in proportion to the batch",
}


class SavedPredictionError(InputError):
    """A saved prediction that cannot be read: not one, malformed, or from a newer orch (exit 2)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Provenance:
    """Who made the prediction, and when: the code that made it is what a later score holds to account."""

    orch_version: str = opt(help="orch's version")
    commit: str | None = opt(None, "the git commit of orch's checkout (None: not a git checkout)")
    commit_dirty: bool | None = opt(None, "the checkout had uncommitted changes to tracked files")
    made_at: str = opt(help="UTC time, ISO 8601")
    command: tuple[str, ...] = opt((), "the command line, where it came from one")


@dataclass(frozen=True, kw_only=True, slots=True)
class InputFolder:
    """An input the prediction read, with the SHA-256 of each file that mattered."""

    role: str = opt(help="'results', 'calibration' or 'rcp'")
    path: str = opt(help="as given")
    sha256: dict[str, str] = opt(help="file name -> SHA-256 of its bytes")


@dataclass(frozen=True, kw_only=True, slots=True)
class Subject:
    """What was predicted: the workload, its parameters and the precision the target computes in."""

    workload: str = opt(help="the workload's name")
    params: dict[str, JsonValue] = opt(help="its parameters, as the measured sweep ran them")
    precision: str = opt(help="'fp32' or 'bf16': what the target computes in")
    source_precision: str = opt(help="what the measured cells computed in")
    source_cpu: str = opt(help="the measured CPU's model name")


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeShape:
    """Nodes of one shape in the target (a topology's node group, without its CPU ids)."""

    count: int = opt(minimum=1)
    sockets: int = opt(minimum=1)
    cores_per_socket: int = opt(minimum=1, help="the largest socket's cores")
    threads_per_core: int = opt(minimum=1)
    memory_gib: float = opt(minimum=0)
    cpu: str = opt("", "the CPU's model name, where the topology says")

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.sockets, self.cores_per_socket, self.threads_per_core


@dataclass(frozen=True, kw_only=True, slots=True)
class Machine:
    """The target the layouts were planned on."""

    words: str = opt(help="the target in words")
    same_machine: bool = opt(help="the target is the machine the cells were measured on")
    node_groups: tuple[NodeShape, ...] = opt(help="its nodes, by shape")
    network: dict[str, object] | None = opt(None, "the link between nodes the target states")
    node_counts: tuple[int, ...] = opt(help="the node counts predicted")
    local_batches: tuple[int, ...] = opt(help="the local batches predicted")


@dataclass(frozen=True, kw_only=True, slots=True)
class Beyond:
    """One axis a predicted layout lies beyond the measured cells, and how far."""

    axis: str = opt(help="ranks, threads, nodes, local batch, ranks per socket or cores")
    doublings: float = opt(help="log2 of the distance from the nearest measured level", minimum=0)


@dataclass(frozen=True, kw_only=True, slots=True)
class CellForecast:
    """One predicted layout's samples/s."""

    ranks: int = opt(minimum=1)
    threads: int = opt(minimum=1)
    local_batch: int = opt(minimum=1)
    nodes: int = opt(minimum=1)
    samples_per_s: float = opt(help="the central prediction", exclusive_minimum=0)
    low: float | None = opt(None, "the interval's low end (None: no interval, see no_interval)")
    high: float | None = opt(None, "the interval's high end")
    no_interval: str = opt("", "why there is no interval")
    predictor: str = opt(help="which predictor gave the central value, by its label (as `orch predict` prints it)")
    beyond: tuple[Beyond, ...] = opt((), "the axes beyond the measured cells ([]: inside them)")
    baselines: dict[str, float] = opt(help="baseline id -> its samples/s", factory=dict)
    notes: tuple[str, ...] = opt((), "every assumption the row rests on")
    in_inputs: bool = opt(False, "the layout was measured in the inputs: data, not a prediction (not scored)")

    @property
    def key(self) -> tuple[int, int, int, int]:
        return self.ranks, self.threads, self.local_batch, self.nodes

    @property
    def label(self) -> str:
        return f"{self.ranks}×{self.threads}×{self.local_batch}" + (f" on {self.nodes} nodes" if self.nodes > 1
                                                                     else "")


@dataclass(frozen=True, kw_only=True, slots=True)
class EpochsForecast:
    """One predicted global batch's epochs to the target."""

    global_batch: int = opt(minimum=1)
    epochs: float | None = opt(None, "the central prediction (None: none is printed, see status and note)")
    low: float | None = opt(None, "the interval's low end")
    high: float | None = opt(None, "the interval's high end")
    status: str = opt(help="measured, interpolated, extrapolated, not converged or past the edge")
    p_converge: float | None = opt(None, "P(a seed converges within max_epochs); None: not predicted", minimum=0,
                                   maximum=1)
    doublings: float = opt(0.0, "log2 of the distance beyond the measured global batches (0: inside)", minimum=0)
    baselines: dict[str, float] = opt(help="baseline id -> its epochs", factory=dict)
    note: str = opt("", "what the row rests on")
    in_inputs: bool = opt(False, "the batch's epochs were measured in the inputs: data, not a prediction")


@dataclass(frozen=True, kw_only=True, slots=True)
class SavedPrediction:
    """The scored part of a saved prediction."""

    format: str = opt(FORMAT, "always 'orch-prediction'")
    format_version: int = opt(FORMAT_VERSION, "the layout of this contract", minimum=1)
    provenance: Provenance = opt(help="who made it, and when")
    inputs: tuple[InputFolder, ...] = opt(help="what it was made from")
    subject: Subject = opt(help="what it predicts")
    target_machine: Machine = opt(help="where")
    cells: tuple[CellForecast, ...] = opt((), "every predicted layout")
    epochs_by_batch: tuple[EpochsForecast, ...] = opt((), "every predicted global batch")


SAVED_KEYS = tuple(f.name for f in dataclasses.fields(SavedPrediction))


def to_json(saved: SavedPrediction) -> JsonDict:
    """The saved part as JSON (the top-level keys of prediction.json that `SAVED_KEYS` names); a baseline that
    had nothing to predict from (nan) is left out."""
    clean = dataclasses.replace(
        saved, cells=tuple(dataclasses.replace(c, baselines=_finite(c.baselines)) for c in saved.cells),
        epochs_by_batch=tuple(dataclasses.replace(e, baselines=_finite(e.baselines)) for e in saved.epochs_by_batch))
    plain: JsonDict = to_plain(clean)
    return plain


def _finite(values: Mapping[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in values.items() if v is not None and math.isfinite(v)}


@dataclass(frozen=True, kw_only=True, slots=True)
class _Header(JsonObject):
    """What says a file is a saved prediction, and of which format, read before the rest (a file of a newer format
    is refused whatever else it holds): as the file gives them, checked by `from_json`."""

    format: JsonValue = None
    format_version: JsonValue = None


def from_json(data: object, source: str) -> SavedPrediction:
    """The saved part of a prediction.json, strictly checked (every problem listed at once); keys outside
    `SAVED_KEYS` are the display's and are not read. SavedPredictionError for a file that is not a saved
    prediction, a newer format, or a malformed one."""
    if not isinstance(data, Mapping):
        raise SavedPredictionError(f"{source}: not a saved prediction (a JSON object is expected)")
    header = _Header.from_json(data)
    if header.format != FORMAT:
        raise SavedPredictionError(f"{source}: not a saved prediction (no \"format\": \"{FORMAT}\"); make one with "
                                   "`orch predict RESULTS_DIR --out DIR` (it writes DIR/prediction.json)")
    version = header.format_version
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SavedPredictionError(f"{source}: format_version must be a whole number ≥ 1, got {version!r}")
    if version > FORMAT_VERSION:
        raise SavedPredictionError(f"{source}: written by a newer orch (prediction format {version}; this orch reads "
                                   f"up to {FORMAT_VERSION}): score it with that orch, or predict again with this one")
    saved, problems = load(SavedPrediction, {k: data[k] for k in SAVED_KEYS if k in data})
    if saved is None:
        raise SavedPredictionError(_problems(source, problems))
    bad = [f"cells: {c.label}: interval [{c.low}, {c.high}] does not hold {c.samples_per_s}" for c in saved.cells
           if c.low is not None and c.high is not None and not c.low <= c.samples_per_s <= c.high]
    bad += [f"{where}: baseline {k!r} is not a number: {v!r}" for where, values in
            [*((c.label, c.baselines) for c in saved.cells),
             *((f"global batch {e.global_batch}", e.baselines) for e in saved.epochs_by_batch)]
            for k, v in values.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
    if bad:
        raise SavedPredictionError(f"{source}: " + "; ".join(bad[:3]))
    return saved


def _problems(source: str, problems: list[Problem]) -> str:
    shown = "\n".join(f"  - {p}" for p in problems[:10])
    more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
    return f"{source}: a malformed saved prediction, {len(problems)} problem(s):\n{shown}{more}"
