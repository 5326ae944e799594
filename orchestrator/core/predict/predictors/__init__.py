"""Predictors of a layout's samples/s, found by id as trackers and workloads are found by name: orch's step model,
the naive baselines it is scored against on held-out cells (`validate`) and may predict with (`bands.choose`,
`interval`), and the GEMM proxy that gives the central estimate where an axis has one measured level
(`interval`). Pure.

A predictor has an id and a label. The id is how code and data name it: its key in PREDICTORS, in every score
and in a prediction (`CellPrediction.predictor`). The label is what the tables and `orch predict` print (a column
of the validation table, the 'predictor' of a layout, the JSON's `predictor`); `label(id)` gives it. Two kinds:

- `FromCells`, fitted to the training cells with orch's step model fitted to them (`Training`: the step fit is
  the costly part, done once per set of cells), gives samples/s of any layout (nan where the cells hold nothing to
  predict it from). Every one is scored on held-out cells and may be chosen where it validated best
  (`validated()`).
- `FromAnchor` scales a measured anchor layout to another (`interval`'s bounds, where no held-out error exists):
  the GEMM proxy.

PREDICTORS, the registry, maps each id to the "module:attribute" of its predictor, in the order the tables show
them (orch's model first: it wins ties). A new baseline is one module and one line there; `registered()` is every
predictor, `validated()` those scored on held-out cells, `find(id)` one:

>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> cells = [Cell(Layout(1, t, b), t * b / (0.01 + 0.002 * b)) for t in (1, 2) for b in (8, 16)]
>>> training = Training(tuple(cells), fit_step_model(cells, {}, []))
>>> ids(), [p.label for p in registered()]
(('model', 'linear', 'amdahl'), ['orch model', 'linear scaling', 'Amdahl (total cores)', 'GEMM peak (bias-corrected)'])
>>> {p.id: round(p.fit(training)(Layout(2, 2, 8))) for p in validated()}
{'model': 1231, 'linear': 1231, 'amdahl': 1231}
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from orchestrator.core.predict.step import Cell, Layout, StepModel

if TYPE_CHECKING:
    from orchestrator.core.predict.evidence import Evidence

# id -> "module:attribute" of its predictor, in table column order. A new one is a module and a line here.
PREDICTORS: dict[str, str] = {
    "model": "orchestrator.core.predict.predictors.step_model:PREDICTOR",
    "linear": "orchestrator.core.predict.predictors.linear:PREDICTOR",
    "amdahl": "orchestrator.core.predict.predictors.amdahl:PREDICTOR",
    "gemm_proxy": "orchestrator.core.predict.predictors.gemm_proxy:PREDICTOR",
}


@dataclass(frozen=True, slots=True)
class Training:
    """What a predictor is fitted to: the training cells, and orch's step model already fitted to them (a baseline
    may ignore it)."""

    cells: tuple[Cell, ...]
    model: StepModel


@runtime_checkable
class Predictor(Protocol):
    @property
    def id(self) -> str:
        """Its key in PREDICTORS, in every score and in a prediction."""
        ...

    @property
    def label(self) -> str:
        """What the tables and `orch predict` print for it."""
        ...


@runtime_checkable
class FromCells(Predictor, Protocol):
    """A predictor fitted to the training cells: scored on held-out cells, chosen where it validated best."""

    def fit(self, training: Training) -> Callable[[Layout], float]:
        """samples/s of a layout from the training cells (nan where they hold nothing to predict it from)."""
        ...


@runtime_checkable
class FromAnchor(Predictor, Protocol):
    """A predictor that scales a measured anchor to a layout beyond it, where an axis has one measured level."""

    def scale(self, evidence: Evidence, model: StepModel, lay: Layout, anchor: Layout,
              anchor_samples_per_s: float) -> tuple[float, str] | None:
        """samples/s of `lay` from the anchor's, and how (words that follow the label); None where it cannot."""
        ...


def ids() -> tuple[str, ...]:
    """The ids of the predictors scored on held-out cells, in table column order (read at each call: a test may
    register one)."""
    return tuple(p.id for p in validated())


def registered() -> tuple[Predictor, ...]:
    """Every registered predictor, in table column order."""
    return _registered(tuple(PREDICTORS.items()))


def validated() -> tuple[FromCells, ...]:
    """The predictors fitted to the training cells and scored on held-out cells, in table column order."""
    return _validated(tuple(PREDICTORS.items()))


def label(predictor: str) -> str:
    """What the tables print for the predictor of this id."""
    return find(predictor).label


def find(predictor: str) -> Predictor:
    """The predictor registered under this id; KeyError when none is, TypeError when what its line names is not a
    Predictor of that id."""
    if predictor not in PREDICTORS:
        raise KeyError(f"no predictor with id {predictor!r}: the registered ones are {', '.join(PREDICTORS)}")
    return _found(predictor, PREDICTORS[predictor])


@functools.cache
def _registered(lines: tuple[tuple[str, str], ...]) -> tuple[Predictor, ...]:
    """The predictors these registry lines name (once per registry: `choose` asks per predicted layout)."""
    return tuple(_found(predictor, ref) for predictor, ref in lines)


@functools.cache
def _validated(lines: tuple[tuple[str, str], ...]) -> tuple[FromCells, ...]:
    return tuple(p for p in _registered(lines) if isinstance(p, FromCells))


@functools.cache
def _found(predictor: str, ref: str) -> Predictor:
    module, _, attribute = ref.partition(":")
    found: object = getattr(importlib.import_module(module), attribute)
    if not isinstance(found, Predictor) or found.id != predictor:
        raise TypeError(f"predictor {predictor!r} ({ref}) is not a Predictor with id {predictor!r}")
    return found
