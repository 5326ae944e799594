"""Find a workload by the name a sweep file gives it, the way torchx finds components: an installed entry
point in the `orch.workloads` group (orch's own workloads are entry points of orch's package), an import path
`package.module:attribute`, or a file `path/to/file.py:attribute` (relative to the sweep file).

The attribute may be a `Workload` instance, a `Workload` subclass (made with no arguments) or a function
returning one. Resolution happens in the driver before Ray starts, and again in each rank from the same
reference (a file path made absolute), so every node must hold the same package or file. A name that does
not resolve is bad input whose message lists what was tried.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from orch.workload import Workload
from orchestrator.core.json.schema import Problem, load
from orchestrator.core.planning.names import name_problem
from orchestrator.errors import InputError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ENTRY_POINT_GROUP = "orch.workloads"
_FOUND: dict[str, FoundWorkload] = {}
P = TypeVar("P", bound="DataclassInstance")   # a workload's parameter dataclass


class UnknownWorkload(InputError):
    """The name does not resolve to a usable workload; the message says what was tried."""


@dataclass(frozen=True, slots=True)
class FoundWorkload:
    workload: Workload[Any]
    ref: str        # the reference to resolve it again (in a rank): a file path made absolute
    source: str     # where it came from, for `orch workloads` and the record


@dataclass(frozen=True, slots=True)
class EntryPointInfo:
    name: str
    value: str      # module:attribute
    dist: str       # the installed distribution that declares it, with its version


def entry_points() -> list[EntryPointInfo]:
    """Every workload entry point installed, by name (the first declaration of a name wins, as
    importlib.metadata resolves it)."""
    seen: dict[str, EntryPointInfo] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "unknown distribution"
        seen.setdefault(ep.name, EntryPointInfo(ep.name, ep.value, dist))
    return sorted(seen.values(), key=lambda e: e.name)


def is_reference(name: str) -> bool:
    """Whether `name` is an import path or a file path (`x:y`) rather than an entry point's name."""
    return ":" in name


def absolute_ref(name: str, base: Path | None) -> str:
    """The reference with a file path made absolute against `base` (the sweep file's folder)."""
    target, sep, attr = name.rpartition(":")
    if sep and _is_file(target):
        path = Path(target).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        return f"{path.resolve()}:{attr}"
    return name


def find_workload(name: str, base: Path | None = None) -> FoundWorkload:
    """The workload `name` refers to. Raises UnknownWorkload with what was tried."""
    ref = absolute_ref(name, base)
    if ref not in _FOUND:
        obj, source = _resolve(ref)
        _FOUND[ref] = FoundWorkload(_as_workload(obj, ref), ref, source)
    return _FOUND[ref]


def _is_file(target: str) -> bool:
    return target.endswith(".py") or "/" in target


def _resolve(ref: str) -> tuple[object, str]:
    if not is_reference(ref):
        return _from_entry_point(ref)
    target, _, attr = ref.rpartition(":")
    if not target or not attr:
        raise UnknownWorkload(f"workload {ref!r}: expected 'package.module:attribute' or 'path/file.py:attribute'")
    module = _import_file(target, ref) if _is_file(target) else _import_module(target, ref)
    return _attribute(module, attr, ref), f"{'file' if _is_file(target) else 'import path'} {ref}"


def _from_entry_point(name: str) -> tuple[object, str]:
    found = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        known = ", ".join(e.name for e in entry_points()) or "none"
        raise UnknownWorkload(
            f"no workload named {name!r}: the entry points of group {ENTRY_POINT_GROUP} are: {known} "
            "(`orch workloads` lists them); a workload outside them is named by import path "
            "'package.module:attribute' or by file 'path/to/file.py:attribute'")
    ep = found[0]
    dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "unknown distribution"
    try:
        obj: object = ep.load()
    except Exception as err:   # a broken plug-in is bad input, not a traceback
        raise UnknownWorkload(f"workload {name!r}: entry point {ep.value} (from {dist}) failed to load: "
                              f"{type(err).__name__}: {err}") from err
    return obj, f"entry point {name} = {ep.value} ({dist})"


def _import_module(module_name: str, ref: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except Exception as err:
        raise UnknownWorkload(f"workload {ref!r}: importing module {module_name} failed: "
                              f"{type(err).__name__}: {err}") from err


def _import_file(target: str, ref: str) -> ModuleType:
    path = Path(target)
    if not path.is_file():
        raise UnknownWorkload(f"workload {ref!r}: file {path} does not exist")
    # One module name per file, stable across processes: a rank imports the same file under the same name.
    module_name = f"orch_user_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:10]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UnknownWorkload(f"workload {ref!r}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module   # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[module_name]
        raise UnknownWorkload(f"workload {ref!r}: importing {path} failed: {type(err).__name__}: {err}") from err
    return module


def _attribute(module: ModuleType, attr: str, ref: str) -> object:
    obj: object = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in dir(obj) if not n.startswith("_"))
            raise UnknownWorkload(f"workload {ref!r}: {getattr(obj, '__name__', obj)!s} has no attribute "
                                  f"{part!r} (it has: {', '.join(names[:20]) or 'nothing public'})")
        obj = getattr(obj, part)
    return obj


def _as_workload(obj: object, ref: str) -> Workload[Any]:
    """The Workload that `obj` is, makes or returns; UnknownWorkload if it is none of those."""
    try:
        if isinstance(obj, type) and issubclass(obj, Workload):
            obj = obj()
        elif callable(obj) and not isinstance(obj, Workload):
            obj = obj()
    except Exception as err:
        raise UnknownWorkload(f"workload {ref!r}: making it raised {type(err).__name__}: {err}") from err
    if not isinstance(obj, Workload):
        raise UnknownWorkload(f"workload {ref!r} is a {type(obj).__name__}, not an orch.workload.Workload "
                              "(nor a subclass or a function returning one)")
    problems = []
    # A workload's own name names files (report names, cache keys): the sweep name's rule.
    if name_problem(getattr(obj, "name", None), "name") is not None:
        problems.append(f"its name {getattr(obj, 'name', None)!r} must be letters, digits, '.', '_' or '-'")
    params_type = getattr(obj, "params_type", None)
    if not (isinstance(params_type, type) and dataclasses.is_dataclass(params_type)):
        problems.append(f"its params_type {params_type!r} must be a dataclass (fields made with orch.workload.param)")
    if problems:
        raise UnknownWorkload(f"workload {ref!r}: " + "; ".join(problems))
    return obj


def parse_params(workload: Workload[P], params: Mapping[str, object],
                 path: str = "workload.params") -> tuple[P | None, list[Problem]]:
    """Strictly build the workload's parameter dataclass (defaults filled in; None where there are problems)."""
    built: P | None
    built, problems = load(workload.params_type, params, path)
    return built, problems
