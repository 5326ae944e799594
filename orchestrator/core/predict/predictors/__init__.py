"""Predictors of a layout's samples/s, found by name as trackers and workloads are: orch's step model and the naive
baselines it is scored against on held-out cells (`validate`) and may predict with (`bands.choose`, `interval`). Pure.

A predictor is a name and a fit. The name is what every table prints (a column of the validation table, `orch
predict`'s 'predictor') and the key of its scores; the fit takes the training cells with orch's step model fitted to
them (`Training`: the step fit is the costly part, done once per set of cells) and gives samples/s of any layout, nan
where the cells hold nothing to predict it from.

PREDICTORS, the registry, maps each name to the "module:attribute" of its `Predictor`, in the order the tables show
them (orch's model first: it wins ties). A new baseline is one module and one line there; `registered()` is every
predictor, `find(name)` one:

>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> cells = [Cell(Layout(1, t, b), t * b / (0.01 + 0.002 * b)) for t in (1, 2) for b in (8, 16)]
>>> training = Training(tuple(cells), fit_step_model(cells, {}, []))
>>> names()
('orch model', 'linear scaling', 'Amdahl (total cores)')
>>> {p.name: round(p.fit(training)(Layout(2, 2, 8))) for p in registered()}
{'orch model': 1231, 'linear scaling': 1231, 'Amdahl (total cores)': 1231}
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from orchestrator.core.predict.step import Cell, Layout, StepModel

# display name -> "module:attribute" of its Predictor, in table column order. A new one is a module and a line here.
PREDICTORS: dict[str, str] = {
    "orch model": "orchestrator.core.predict.predictors.step_model:PREDICTOR",
    "linear scaling": "orchestrator.core.predict.predictors.linear:PREDICTOR",
    "Amdahl (total cores)": "orchestrator.core.predict.predictors.amdahl:PREDICTOR",
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
    def name(self) -> str:
        """The display name: its key in PREDICTORS and in every score, as the tables print it."""
        ...

    def fit(self, training: Training) -> Callable[[Layout], float]:
        """samples/s of a layout from the training cells (nan where they hold nothing to predict it from)."""
        ...


def names() -> tuple[str, ...]:
    """Every registered predictor's name, in table column order (read at each call: a test may register one)."""
    return tuple(PREDICTORS)


def registered() -> tuple[Predictor, ...]:
    """Every registered predictor, in table column order."""
    return tuple(find(name) for name in PREDICTORS)


def find(name: str) -> Predictor:
    """The predictor registered under `name`; KeyError when none is, TypeError when what its line names is not a
    Predictor of that name."""
    if name not in PREDICTORS:
        raise KeyError(f"no predictor named {name!r}: the registered ones are {', '.join(PREDICTORS)}")
    found = _load(PREDICTORS[name])
    if not isinstance(found, Predictor) or found.name != name:
        raise TypeError(f"predictor {name!r} ({PREDICTORS[name]}) is not a Predictor named {name!r}")
    return found


@functools.cache
def _load(ref: str) -> object:
    """The object a "module:attribute" line names (imported once: value lookups run per predicted layout)."""
    module, _, attribute = ref.partition(":")
    found: object = getattr(importlib.import_module(module), attribute)
    return found
