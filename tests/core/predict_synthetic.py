"""A known step-time model and the synthetic cells it generates, for the prediction tests."""

from __future__ import annotations

from orchestrator.core.predict import comm
from orchestrator.core.predict.step import Cell, Layout, StepModel

TRUE = {"a_s": 2e-3, "c_s": 1e-4, "sigma": 0.15, "sigma_a": 0.6, "kappa": 0.0, "mu": 0.08, "rho": 1.3,
        "gamma": 1.6}
LINKS = {"socket": comm.LinkFit("socket", 20e-6, 1e-9, 16, 0.0), "nodes": comm.LinkFit("nodes", 60e-6, 4e-9, 16, 0.0)}
BUCKETS = tuple(comm.ddp_buckets(6 * 2**20))


def truth() -> StepModel:
    return StepModel(TRUE, LINKS, BUCKETS)


def cells_from(model: StepModel, layouts, noise=None):
    cells = []
    for i, lay in enumerate(layouts):
        factor = 1.0 if noise is None else 1 + noise[i % len(noise)]
        cells.append(Cell(lay, model.samples_per_s(lay) * factor, cv=0.01))
    return cells


GRID = [Layout(r, t, b, 1, r, "socket" if r > 1 else None)
        for r, t in ((1, 1), (1, 2), (2, 1), (1, 4), (2, 2), (4, 1)) for b in (8, 16, 32, 64, 128)]
