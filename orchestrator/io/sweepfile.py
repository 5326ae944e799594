"""Load a sweep file: strict spec, workload looked up in the registry, its parameters checked, every
problem reported at once with its line."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import workloads
from orchestrator.core.isa import CpuIsa, PrecisionChoice, resolve_precision
from orchestrator.core.schema import InvalidInput, Problem, to_plain
from orchestrator.core.spec import SweepSpec, parse_spec
from orchestrator.core.topology import Topology
from orchestrator.io.isa import with_precision
from orchestrator.io.yamlfile import read_yaml, with_lines
from workloads.base import Workload


@dataclass(frozen=True, slots=True)
class Sweep:
    """A validated sweep: the spec with its workload resolved and parameters defaulted."""

    spec: SweepSpec
    workload: Workload
    params: Any          # the workload's params dataclass
    path: Path

    def frozen_spec(self) -> dict[str, Any]:
        """The spec as stored in results/<sweep>/spec.json: workload parameters with defaults filled in."""
        plain = to_plain(self.spec)
        plain["workload"]["params"] = to_plain(self.params)
        return plain

    def rank_memory_mib(self, local_batch: int) -> float:
        return self.workload.memory_estimate_mib(self.params, local_batch)

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
    data, lines = read_yaml(path, "sweep file")
    source = f"sweep file {path}"
    spec, problems = parse_spec(data)
    workload, params = None, None
    raw_workload = data.get("workload") if isinstance(data, dict) else None
    if isinstance(raw_workload, dict) and isinstance(raw_workload.get("name"), str):
        try:
            workload = workloads.get(raw_workload["name"])
        except workloads.UnknownWorkload as err:
            problems.append(Problem("workload.name", str(err)))
        if workload is not None:
            raw_params = raw_workload.get("params") or {}
            if isinstance(raw_params, dict):
                params, param_problems = workloads.parse_params(workload, raw_params)
                problems += param_problems
    if spec is not None and workload is not None and spec.convergence is not None:
        if spec.convergence.metric not in workload.metrics:
            problems.append(Problem("convergence.metric",
                                    f"{spec.convergence.metric!r} is not a metric of workload {workload.name}; "
                                    f"it reports: {', '.join(workload.metrics)}"))
    if problems or spec is None or workload is None or params is None:
        raise InvalidInput(source, with_lines(problems, lines))
    return Sweep(spec, workload, params, Path(path))


def sweep_from_frozen(frozen: dict[str, Any], path: Path) -> Sweep:
    """The sweep stored in a results folder's spec.json (as `Sweep.frozen_spec` wrote it). Raises
    InvalidInput when it no longer validates (a workload renamed or a parameter removed since)."""
    spec, problems = parse_spec(frozen)
    workload, params = None, None
    try:
        workload = workloads.get(str((frozen.get("workload") or {}).get("name")))
        params, param_problems = workloads.parse_params(workload, (frozen.get("workload") or {}).get("params") or {})
        problems += param_problems
    except workloads.UnknownWorkload as err:
        problems.append(Problem("workload.name", str(err)))
    if problems or spec is None or workload is None or params is None:
        raise InvalidInput(f"{path}", problems)
    return Sweep(spec, workload, params, path)

