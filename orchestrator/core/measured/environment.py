"""What a sweep ran with (a results folder's environment.json): orch's and its libraries' versions, the host and
its CPU, the Ray nodes, the backend and precision chosen and why, each node's CPU verdict, and when it started.
Typed, read by attribute: a folder written by an older orch lacks keys added since (None, or empty), and one
written by a newer orch may hold keys this one does not know, kept as they were (core.json.jsonobject).

>>> env = Environment.from_json({"cpu_model": "AMD EPYC", "backend": {"chosen": "gloo"}, "new_key": 1})
>>> env.cpu_model, env.backend_chosen, env.torch, env.to_json()["new_key"]
('AMD EPYC', 'gloo', None, 1)
>>> Environment.from_json({"cpu_model": 5, "backend": {"chosen": ["gloo"]}}).wrong_types()
['cpu_model: must be a string or null, not int', 'backend.chosen: must be a string or null, not list']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.core.json.jsonobject import JsonObject, wrong_types
from orchestrator.core.json.values import JsonReadable
from orchestrator.core.machine.isa import CpuIsa, PrecisionChoice

DEFAULT_BACKEND = "gloo"   # what a folder that does not say ran with (orch's fallback)
# The versions a report lists first, by key, with the name it shows.
VERSIONS = {"orch": "orch", "python": "Python", "torch": "torch", "torchvision": "torchvision", "ray": "Ray"}


@dataclass(frozen=True, kw_only=True, slots=True)
class BackendRecord(JsonObject):
    """The torch.distributed backend asked for (auto, ccl, gloo), the one chosen, and why."""

    requested: str | None = None
    chosen: str | None = None
    note: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PrecisionRecord(JsonObject):
    """The precision asked for and chosen for every rank, and why (core.machine.isa.PrecisionChoice, recorded)."""

    requested: str | None = None
    chosen: str | None = None
    reason: str | None = None
    error: str | None = None
    per_node: tuple[str, ...] = ()

    @staticmethod
    def of(choice: PrecisionChoice) -> PrecisionRecord:
        return PrecisionRecord(requested=choice.requested, chosen=choice.chosen, reason=choice.reason,
                               error=choice.error, per_node=choice.per_node)


@dataclass(frozen=True, kw_only=True, slots=True)
class Environment(JsonObject):
    """environment.json, in the order orch writes it."""

    orch: str | None = None
    python: str | None = None
    torch: str | None = None
    torchvision: str | None = None
    ray: str | None = None
    oneccl_bindings_for_pytorch: str | None = None     # None: not installed
    oneccl: str | None = None
    intel_extension_for_pytorch: str | None = None
    hostname: str | None = None
    cpu_model: str | None = None
    ray_nodes: int | None = None
    backend: BackendRecord | None = None
    precision: PrecisionRecord | None = None
    cpus: tuple[Mapping[str, JsonReadable] | None, ...] = ()   # each node's CPU verdict (CpuIsa.to_dict), <= 64
    started_at: str | None = None                       # records.utc_timestamp

    @property
    def backend_chosen(self) -> str:
        """The backend the ranks ran with (gloo where the folder does not say)."""
        return (self.backend.chosen if self.backend is not None else None) or DEFAULT_BACKEND

    @property
    def precision_chosen(self) -> str | None:
        """The precision every rank trained in, where the sweep chose one (None: a workload without one, or an
        older folder)."""
        return self.precision.chosen if self.precision is not None else None

    def cpu_isas(self) -> list[CpuIsa]:
        """Each node's CPU as recorded (nodes without a verdict left out)."""
        return [CpuIsa.from_dict(cpu) for cpu in self.cpus if cpu is not None]

    def wrong_types(self) -> list[str]:
        """Values whose JSON type is not the field's, `path: why` each (a malformed environment.json)."""
        return wrong_types(self)
