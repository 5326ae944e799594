"""Everything `orch predict` reads, checked up front so that bad input is one clear message (exit 2):
the results folder, the sweep it ran, the target topology, an RCP file, other calibration folders.

A results folder is data, maybe someone else's (docs/trust.md): everything here is built from what it
records. The workload's name is a label; no workload is found, imported or asked for a figure (its memory
per rank is the folder's recorded figure, `core.planning.facts.recorded_memory`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from orchestrator.core.json.schema import InvalidInput
from orchestrator.core.machine.topology import Topology
from orchestrator.core.measured import records as rec
from orchestrator.core.measured.peaks import peak_index
from orchestrator.core.planning.facts import MemoryFact, recorded_memory
from orchestrator.core.planning.grid import powers_of_two_up_to
from orchestrator.core.planning.spec import SweepSpec
from orchestrator.core.predict import rcp
from orchestrator.core.predict.epochs import BatchPoint
from orchestrator.core.predict.machine import SAME_MACHINE, MachineWhatIf, SourceCpu, what_if
from orchestrator.errors import InputError
from orchestrator.io.files import UnreadableFile, read_json_input
from orchestrator.io.store import NotAResultsFolder, Results, load_results


class PredictInputError(InputError):
    pass


class PredictRequest(Protocol):
    """What `read_inputs` reads of a prediction's options (app.options.PredictOptions has each of them): io/ stands
    below the use-cases and does not import their options."""

    @property
    def results(self) -> str: ...
    @property
    def topology(self) -> str | None: ...
    @property
    def nodes(self) -> tuple[int, ...] | None: ...
    @property
    def local_batch(self) -> tuple[int, ...] | None: ...
    @property
    def rcp(self) -> str | None: ...
    @property
    def samples_per_epoch(self) -> int | None: ...
    @property
    def calibration(self) -> tuple[str, ...]: ...
    @property
    def deadline_h(self) -> float | None: ...
    @property
    def budget_node_h(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class PredictInputs:
    results: Results
    spec: SweepSpec          # the sweep as it ran, read from spec.json (its workload only a name)
    memory: MemoryFact       # one rank's memory per local batch, as the folder recorded it
    workload: str            # the workload's name: a label
    topology: Topology
    same_machine: bool
    node_counts: tuple[int, ...]
    local_batches: tuple[int, ...]
    samples_per_epoch: int | None
    calibration: tuple[rec.Record, ...]   # all-reduce records of other folders (--calibration)
    rcp: RcpInput | None                  # the RCP file's epochs, instead of the sweep's convergence runs
    ccl_available: bool
    deadline_h: float | None
    budget_node_h: float | None
    warnings: tuple[str, ...]
    machine: MachineWhatIf = SAME_MACHINE
    sources: tuple[str, ...] = ()     # where epochs, samples per epoch and samples/s come from (with an RCP file)
    rcp_mismatch: str = ""            # the RCP file describes another workload: in short, for the recommendation
    source_cpu: SourceCpu | None = None   # the measured CPU: its name, precision and figures


def _results(path: str) -> Results:
    try:
        return load_results(path)
    except NotAResultsFolder as err:
        raise PredictInputError(str(err)) from None


@dataclass(frozen=True, slots=True)
class RcpInput:
    points: tuple[BatchPoint, ...]      # in epochs, after the checker's pruning: what the epochs model fits
    pruned: tuple[BatchPoint, ...]      # in epochs, dropped by the pruning: shown, not fitted
    source: str
    notes: tuple[str, ...]              # duplicates merged, units converted, batches pruned
    file: rcp.RcpFile | None = None     # the file as read: its benchmark, creators and (orch's export) workload


def _rcp(path: str, samples_per_epoch: int | None, from_option: bool, workload: str) -> RcpInput:
    """The RCP file as epochs points; PredictInputError (exit 2) for a malformed file or units that cannot be
    converted. A file in samples is converted with --samples-per-epoch, or with the sweep workload's dataset
    size only when the file is that workload's (another benchmark's dataset size is not the workload's)."""
    try:  # not there, a FIFO, too large, not UTF-8, not JSON, nested too deeply: one line each (io.files)
        data = read_json_input(path)
    except UnreadableFile as err:
        raise PredictInputError(f"RCP file {path}: {err}") from None
    where = f"RCP file {path}"
    read, errors = rcp.read_rcp(data, where)
    if read is None:
        raise PredictInputError("\n".join(errors))
    spe_source = "--samples-per-epoch" if from_option else f"the {workload} workload's dataset"
    if read.unit != rcp.EPOCHS and not from_option and read.benchmark not in (None, workload):
        raise PredictInputError(f"{where}: counts {read.unit} to converge ({read.unit_why}) for benchmark "
                                f"{read.benchmark}, but the sweep ran workload {workload}, whose dataset size is "
                                "not that benchmark's; give --samples-per-epoch N (the dataset size of the training "
                                "you plan) to convert them")
    try:
        points = rcp.to_epochs(read, samples_per_epoch, where)
    except rcp.RcpUnitError as err:
        raise PredictInputError(str(err)) from None
    kept, pruned = rcp.prune(points)
    notes = [*read.notes, rcp.conversion_note(read, samples_per_epoch, spe_source, where),
             rcp.pruning_note(pruned, where)]
    source = f"RCP file {Path(path).name}" + (f", benchmark {read.benchmark}" if read.benchmark else "")
    return RcpInput(kept, pruned, source, tuple(n for n in notes if n), read)


def _rcp_workload(rcp_in: RcpInput, results: Results, workload: str, samples: int | None,
                  from_option: bool) -> tuple[list[str], tuple[str, ...]]:
    """(warnings, sources): whether the RCP file describes the measured workload, and where each figure of
    time-to-train comes from. A file that describes another model or data set is warned about, loudly: its
    epochs are that workload's, while samples/s (and, without --samples-per-epoch, the epoch's size) are the
    measured one's."""
    read = rcp_in.file
    params = dict(results.spec.workload.params)
    check = rcp.check_workload(read.benchmark if read else None, read.orch if read else None, workload, params)
    by = f", reference runs by {', '.join(read.creators)}" if read and read.creators else ""
    ref = rcp.MLPERF_REFERENCES.get(read.benchmark or "") if read else None
    keys = [*ref.params, ref.data_param] if ref is not None else []
    shown = ", ".join(f"{k} {params[k]}" for k in keys if k in params)
    measured = f"workload {workload}" + (f": {shown}" if shown else "")
    size = (f"{samples:,} samples" if samples else "unknown") + (
        " (--samples-per-epoch)" if from_option else f" (the measured {workload} workload's data set)")
    sources = (f"epochs from {rcp_in.source}: {check.describes}{by}",
               f"samples per epoch: {size}",
               f"samples/s: the measured cells of {results.path} ({measured})")
    if check.matches:
        return [], sources
    if check.unchecked:
        return [f"{rcp_in.source}: {check.unchecked}; time-to-train takes its epochs as the measured workload's"], \
            sources
    warning = (f"{rcp_in.source} describes {check.describes}, not the measured workload {workload}: "
               f"{'; '.join(check.differences)}. Time-to-train below multiplies that benchmark's epochs by the "
               "measured workload's samples per epoch and samples/s: it plans neither workload. To plan the "
               "benchmark, measure its model (the workload parameters above) and give --samples-per-epoch (its "
               "data set's size); to plan the measured workload, drop --rcp (its own convergence runs, or their "
               "exported RCP file)")
    return [warning], sources


def _target(path: str | None, results: Results) -> Topology:
    if path:
        from orchestrator.io.topofile import load_topology

        try:
            return load_topology(path)
        except InvalidInput as err:
            raise PredictInputError(str(err)) from None
    if results.topology is None:
        raise PredictInputError(f"{results.path}/topology.json: not there; give the target with --topology FILE")
    return results.topology


def source_cpu(results: Results) -> SourceCpu:
    """The measured CPU as the results keep it: its name, the precision trained in, its 1-rank 1-thread GEMM
    peak record, and its ISA figures (environment.json's probe, or topology.json's where a file stated them)."""
    env = results.environment
    precision = env.precision_chosen or str(results.spec.workload.params.get("precision") or "fp32")
    precision = precision if precision in ("fp32", "bf16") else "fp32"
    stated = [n.isa for n in results.topology.nodes if n.isa is not None] if results.topology is not None else []
    isa = next(iter([*env.cpu_isas(), *stated]), None)
    peak = peak_index(results.records).one_rank.get((1, precision))
    return SourceCpu(env.cpu_model or "CPU of the sweep", precision, peak, isa)


def _memory(results: Results) -> MemoryFact:
    """One rank's memory per local batch from the folder's figures: spec.json's `derived.memory_mib`, else the
    memory each record was planned with (a 0 there: not known when the sweep ran)."""
    libraries = results.derived.library_mib or max(
        (r.memory.library_mib or 0.0 for r in results.records if r.memory is not None), default=0.0)
    points = results.derived.memory_points()
    if points:
        return recorded_memory(points, f"{results.path.name}/spec.json's derived.memory_mib", libraries)
    planned = {r.local_batch: r.memory.estimate_mib for r in results.records
               if r.memory is not None and r.local_batch and r.memory.estimate_mib}
    return recorded_memory(planned, f"the memory {results.path.name}'s records were planned with", libraries)


def read_inputs(options: PredictRequest) -> PredictInputs:
    """Everything `options` name, read and checked (PredictInputError, with the option and the reason); nothing
    is fitted here (`app.predict` fits)."""
    results = _results(options.results)
    spec = results.spec   # the sweep as it ran: its workload section a name and parameters, never found
    workload = results.derived.workload or spec.workload.name or "workload"
    topology = _target(options.topology, results)
    nodes = len(topology.nodes)
    node_counts = tuple(sorted(set(options.nodes))) if options.nodes else powers_of_two_up_to(nodes)
    too_many = [n for n in node_counts if n > nodes]
    if too_many:
        raise PredictInputError(f"--nodes {','.join(map(str, too_many))}: the target has {nodes} node(s) "
                                f"({topology.describe()})")
    derived = results.derived
    local_batches = tuple(options.local_batch or derived.local_batches or ())
    if not local_batches:
        raise PredictInputError(f"{results.path}: no local batch recorded; give --local-batch")
    extra: list[rec.Record] = []
    for folder in options.calibration:
        extra += _results(folder).records.of_kind(rec.Kind.ALLREDUCE)
    samples = options.samples_per_epoch or derived.samples_per_epoch
    rcp_in = (_rcp(options.rcp, samples, bool(options.samples_per_epoch), workload) if options.rcp else None)
    warnings = list(results.errors) + list(rcp_in.notes if rcp_in else ())
    sources: tuple[str, ...] = ()
    short = ""
    if rcp_in is not None:
        mismatch, sources = _rcp_workload(rcp_in, results, workload, samples, bool(options.samples_per_epoch))
        warnings = mismatch + warnings
        short = (f"epochs from {rcp_in.source}, which describes another model or data set than the measured "
                 f"workload's (see the warning)") if mismatch else ""
    if options.calibration and not extra:
        warnings.append(f"no all-reduce calibration records in {', '.join(options.calibration)}")
    backend = results.environment.backend_chosen
    source = source_cpu(results)
    machine = what_if(source, [n.isa for n in topology.nodes]) if options.topology else SAME_MACHINE
    machine = replace(machine, node_link=topology.link)
    return PredictInputs(results, spec, _memory(results), workload, topology, not options.topology, node_counts,
                         local_batches, samples, tuple(extra), rcp_in, backend == "ccl", options.deadline_h,
                         options.budget_node_h, tuple(warnings), machine, sources, short, source)
