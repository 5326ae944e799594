"""Load a sweep file: strict spec, workload found (an entry point, an import path or a file: see
`orchestrator.io.workload_finder`), its parameters checked, every problem reported at once with its line."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orch.workload import ModelWorkload, Workload
from orchestrator.core.execution.eta import probed_steps
from orchestrator.core.json.schema import InvalidInput, Problem, to_plain
from orchestrator.core.json.values import JsonDict, JsonMapping
from orchestrator.core.machine.isa import CpuIsa, PrecisionChoice, resolve_precision
from orchestrator.core.machine.topology import Topology
from orchestrator.core.planning.facts import WorkloadFacts, workload_facts
from orchestrator.core.planning.probe import ProbeResult, probe_key
from orchestrator.core.planning.spec import SweepSpec, parse_spec
from orchestrator.core.planning.spec import script_problems as spec_script_problems
from orchestrator.io.isa import with_precision
from orchestrator.io.probe_cache import PROBE_FILE, cached_probe, probe_key_fields, read_probe
from orchestrator.io.scriptfile import NoParams, ScriptWorkload, label_of, script_problems
from orchestrator.io.workload_finder import FoundWorkload, UnknownWorkload, find_workload, parse_params
from orchestrator.io.yamlfile import read_yaml, with_lines

log = logging.getLogger(__name__)

Found = tuple[FoundWorkload, object]   # a workload found, and its parameters (None where they did not load)


@dataclass(frozen=True, slots=True)
class Sweep:
    """A validated sweep: the spec with its workload found (`spec.workload.name` is the reference a rank finds
    it by again: a file path made absolute) and its parameters defaulted."""

    spec: SweepSpec
    workload: Workload[Any]
    params: object       # the workload's params dataclass (its `params_type`), or a script's NoParams
    path: Path
    workload_source: str = ""   # where the workload came from (an entry point, an import path, a file)
    probe: ProbeResult | None = None   # the probe of these parameters, where one has run (`with_cached_probe`)
    _facts: list[WorkloadFacts] = field(default_factory=list, init=False, repr=False, compare=False)

    def frozen_spec(self) -> JsonDict:
        """The spec as stored in results/<sweep>/spec.json: workload parameters with defaults filled in."""
        plain = to_plain(self.spec)
        plain["workload"]["params"] = to_plain(self.params)
        return plain

    @property
    def facts(self) -> WorkloadFacts:
        """Memory per rank, FLOPs per sample and samples per epoch, each with its source (core.planning.facts): the
        sweep file's figure, else the workload's declaration, else the probe's. Made once per sweep (a `replace`d
        sweep, in another precision or with another probe, makes its own)."""
        if not self._facts:
            self._facts.append(self._make_facts())
        return self._facts[0]

    def _make_facts(self) -> WorkloadFacts:
        workload, params, w = self.workload, self.params, self.spec.workload
        if w.script is not None:   # the sweep file's figures for its script, and the probe's memory
            flops = w.flops_per_sample
            return workload_facts(precision="", sweep_memory_mib=self.spec.constraints.rank_memory_mib,
                                  declared_flops=(lambda: flops) if flops is not None else None,
                                  declared_samples=w.samples_per_epoch, probe=self.probe, script=True)
        declares_memory = workload.memory_estimate_mib(params, min(self.spec.grid.local_batch)) is not None
        return workload_facts(
            precision=self.requested_precision or "the workload’s precision",
            sweep_memory_mib=self.spec.constraints.rank_memory_mib,
            declared_memory=(lambda b: workload.memory_estimate_mib(params, b)) if declares_memory else None,
            declared_flops=self._declared_flops if _declares_flops(workload) else None,
            declared_samples=workload.samples_per_epoch(params), probe=self.probe)

    def _declared_flops(self) -> float | None:
        try:
            return self.workload.train_flops_per_sample(self.params)
        except Exception as err:   # a courtesy figure (the ETA, a report's fallback): it must not stop a sweep
            log.warning("workload %s: train_flops_per_sample raised %s: %s", self.workload.name,
                        type(err).__name__, err)
            return None

    def with_probe(self, probe: ProbeResult | None) -> Sweep:
        return replace(self, probe=probe)

    @property
    def probes_always(self) -> bool:
        """`measure.probe: always`: probed for its step time although every figure is declared."""
        return self.spec.measure.probe == "always"

    def needs_probe(self, cpu: str) -> bool:
        """Whether a probe would tell something not known: a figure (`WorkloadFacts.needs_probe`), or, with
        `measure.probe: always`, the step time on `cpu` (`CpuIsa.identity`; a probe from another CPU has none)."""
        if self.probes_always:
            return probed_steps(self.probe, cpu) is None
        return self.facts.needs_probe()

    def with_cached_probe(self, backend: str) -> Sweep:
        """This sweep (its precision chosen) with the cached probe of its parameters on `backend`, where a figure
        is not known without one (or `measure.probe: always`) and one has run; itself when it holds that probe."""
        if not self.probes_always and (not self.facts.probeable or (self.probe is None and not self.facts.unknown())):
            return self
        fields = probe_key_fields(self, backend)
        if self.probe is not None and self.probe.key == probe_key(fields):
            return self
        return replace(self, probe=cached_probe(self.workload.name, fields))

    @property
    def requested_precision(self) -> str | None:
        """The workload's `precision` parameter (auto, fp32 or bf16), None for a workload without one."""
        value = getattr(self.params, "precision", None)
        return value if isinstance(value, str) else None

    def resolve_precision(self, topology: Topology) -> tuple[Sweep, PrecisionChoice | None]:
        """This sweep with its precision decided for `topology` (auto: bf16 where every node computes it
        natively, else fp32), and the decision with its reason. The ranks, the memory estimate, the GEMM peak
        and spec.json all see the chosen precision, never `auto`."""
        requested = self.requested_precision
        if requested is None:
            return self, None
        isas: dict[CpuIsa | None, str] = {}
        for node in topology.nodes:   # one verdict per distinct CPU: a compact topology shares one object
            isas.setdefault(node.isa, node.name)
        choice = resolve_precision(requested, list(isas), names=list(isas.values()),
                                   allow_slow_bf16=self.spec.constraints.allow_slow_bf16)
        params, ruled_out = with_precision(self.params, choice.chosen)
        if ruled_out is not None:   # auto chose bf16, which these parameters cannot run (the workload says why)
            choice = PrecisionChoice(requested, "fp32", f"auto: fp32, because bf16 is ruled out: {ruled_out}", None,
                                     choice.per_node)
        return replace(self, params=params), choice

    def with_choice(self, choice: PrecisionChoice | None) -> Sweep:
        """This sweep training in the precision a plan chose (`resolve_precision` made the choice)."""
        return self if choice is None else replace(self, params=with_precision(self.params, choice.chosen)[0])


def load_sweep(path: str | Path) -> Sweep:
    """Raises InvalidInput listing every problem in the file."""
    raw: dict[str, str] = {}
    data, lines = read_yaml(path, "sweep file", raw)
    _args_as_written(data, raw)
    spec, problems = parse_spec(data)
    raw_workload = data.get("workload") if isinstance(data, dict) else None
    if _is_script(raw_workload):
        spec, found = _script(spec, Path(path).resolve().parent, problems, need_file=True)
    else:
        found = _found(raw_workload, Path(path).resolve().parent, problems)
        if spec is not None and found is not None:
            spec = replace(spec, workload=replace(spec.workload, name=found[0].ref))
    return _sweep(spec, found, problems, f"sweep file {path}", Path(path), lines)


def _args_as_written(data: object, raw: dict[str, str]) -> None:
    """A script's unquoted arguments as the sweep file writes them: YAML 1.1 reads `010` as 8, `1.10` as 1.1 and
    `12:30` as 750, none of which a shell would give the script: such a number stays the text written."""
    workload = data.get("workload") if isinstance(data, dict) else None
    args = workload.get("args") if isinstance(workload, dict) else None
    if not isinstance(args, list):
        return
    for i, value in enumerate(args):
        text = raw.get(f"workload.args[{i}]")
        if text is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and str(value) != text:
            args[i] = text   # as written; a number that reads back as written stays one (older folders kept it)


def sweep_from_frozen(frozen: JsonMapping, path: Path) -> Sweep:
    """The sweep stored in a results folder's spec.json (as `Sweep.frozen_spec` wrote it). Raises
    InvalidInput when it no longer validates (a workload renamed or a parameter removed since). A script
    need not be there any more: its path and hash are in the spec. It finds and imports the workload, so it runs
    the workload's code: for a folder of the user's own only (a benchmark that reruns it), never for one someone
    handed over (docs/trust.md); `orch predict` reads a folder without it (io.predict_inputs)."""
    spec, problems = parse_spec(frozen)
    if _is_script(frozen.get("workload")):
        spec, found = _script(spec, None, problems, need_file=False)
    else:
        found = _found(frozen.get("workload"), None, problems)
    return _sweep(spec, found, problems, f"{path}", path, None).with_probe(read_probe(path.parent / PROBE_FILE))


def _declares_flops(workload: Workload[Any]) -> bool:
    """Whether the workload may give its own FLOPs per sample, known without asking it (its answer may need
    torch, and `orch plan` must not import it): a `model_workload` given `flops_per_sample`, or a class that
    overrides `train_flops_per_sample`. Asked later, a None still lets the probe's count stand in."""
    if isinstance(workload, ModelWorkload):
        return workload._flops is not None
    return type(workload).train_flops_per_sample is not Workload.train_flops_per_sample


def _is_script(raw: object) -> bool:
    return isinstance(raw, dict) and raw.get("script") is not None


def _script(spec: SweepSpec | None, base: Path | None, problems: list[Problem],
            need_file: bool) -> tuple[SweepSpec | None, Found | None]:
    """A script sweep's spec with its script made absolute, hashed and labelled, and its stand-in workload
    (`scriptfile.ScriptWorkload`); (spec, None) with the problem added when the script cannot be read."""
    if spec is None or spec.workload.script is None:
        return spec, None   # parse_spec reports the problem
    w, named = spec.workload, spec.workload.script
    script = None
    if need_file:
        problems += spec_script_problems(spec)
        script, found_problems = script_problems(named, w.script_sha256, base)
        problems += found_problems
        if script is None:
            return spec, None
    path = str(script.path) if script is not None else str(w.script)
    w = replace(w, name=w.name or label_of(path), script=path,
                script_sha256=script.sha256 if script is not None else w.script_sha256,
                script_sources=script.sources if script is not None else w.script_sources)
    workload = ScriptWorkload(w.name or "", script, w.flops_per_sample, w.samples_per_epoch, path)
    source = f"script {path} (sha256 {w.script_sha256})"
    return replace(spec, workload=w), (FoundWorkload(workload, path, source), NoParams())


def _found(raw: object, base: Path | None, problems: list[Problem]) -> Found | None:
    """(the found workload, its parameters) from the spec's raw workload section; None (with the problem
    added) when either fails."""
    if not (isinstance(raw, dict) and isinstance(raw.get("name"), str)):
        return None   # parse_spec reports the missing or mistyped name
    try:
        found = find_workload(raw["name"], base)
    except UnknownWorkload as err:
        problems.append(Problem("workload.name", str(err)))
        return None
    raw_params = raw.get("params") or {}
    if not isinstance(raw_params, dict):
        return None   # parse_spec reports it
    params, param_problems = parse_params(found.workload, raw_params)
    problems += param_problems
    return found, params


def _sweep(spec: SweepSpec | None, found: Found | None, problems: list[Problem], source: str, path: Path,
           lines: dict[str, int] | None) -> Sweep:
    if spec is not None and found is not None and spec.convergence is not None and spec.workload.script is None:
        metrics = found[0].workload.metrics
        if spec.convergence.metric not in metrics:
            problems.append(Problem("convergence.metric",
                                    f"{spec.convergence.metric!r} is not a metric of workload "
                                    f"{found[0].workload.name}; it reports: {', '.join(metrics) or 'none'}"))
    if problems or spec is None or found is None or found[1] is None:
        raise InvalidInput(source, with_lines(problems, lines) if lines is not None else problems)
    return Sweep(spec, found[0].workload, found[1], path, found[0].source)
