"""Step time of one rank, fitted to the measured cells: compute ⊕ communication.

    compute(T, b, k) = (a·U(T; σ_a) + c·b·U(T; σ)) · (1 + μ·(k − 1))
    U(T; σ)         = (1 + σ·(T − 1) + κ·T·(T − 1)) / T
    comm(R, link)   = ρ · Σ over DDP buckets of the ring all-reduce time (`comm`, from the calibration)
    step            = (compute^γ + comm^γ)^(1/γ)

Why each piece:
- a + c·b: a step costs a fixed part (optimizer update, framework dispatch, small kernels) plus a part
  proportional to the samples (McCandlish et al. 2018 and Pollux, OSDI'21, take per-step compute affine in
  the local batch).
- U(T): the time factor of T threads over one, the inverse of Gunther's Universal Scalability Law speed-up
  T / (1 + σ(T−1) + κT(T−1)); κ = 0 is Amdahl's law with serial fraction σ. The fixed part has its own
  serial fraction σ_a: the per-sample work is large GEMMs and convolutions that split well over threads,
  while the per-step part (optimizer update, Python dispatch, small kernels) often barely does.
- 1 + μ·(k − 1): k ranks on one socket share its memory bandwidth and last-level cache, which slows each
  of them even when their cores are disjoint (the "ranks sharing a socket" term).
- ρ: the calibration times all-reduce alone; in training Gloo's thread shares the rank's cores with the
  backward pass (on a 1-core rank it must take turns with it), so an all-reduce costs the step more than it
  costs alone. ρ is the ratio, fitted to the multi-rank cells (it scales with nothing but the communication,
  so the cells at several local batches separate it from μ, which scales with the compute).
- the γ-norm (Pollux): γ = 1 is no overlap (compute + comm), γ → ∞ is perfect overlap (the larger of the
  two). DDP overlaps bucket all-reduces with the backward pass, but on a CPU rank Gloo's thread also
  competes with the compute threads for cores, so γ is fitted, not assumed.

The fit is bounded least squares in log space (`lsq.solve`, numpy only): relative errors matter
equally at every batch size. A parameter the cells cannot determine is frozen at a stated value and the
model says so (`frozen`): σ needs two thread counts (else it comes from the GEMM peak's own thread scaling,
when measured), κ three, a two local batches, μ multi-rank cells sharing a socket at two local batches, γ a
multi-rank cell whose communication is modelled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from orchestrator.core.predict.comm import LinkFit, link_for
from orchestrator.core.predict.lsq import Fit, solve

PARAMS = ("a_s", "c_s", "sigma", "sigma_a", "kappa", "mu", "rho", "gamma")
BOUNDS: dict[str, tuple[float, float]] = {
    "a_s": (0.0, 1e4), "c_s": (1e-12, 1e3), "sigma": (0.0, 1.0), "sigma_a": (0.0, 1.0), "kappa": (0.0, 1.0),
    "mu": (0.0, 4.0), "rho": (0.5, 8.0), "gamma": (1.0, 8.0)}
# A parameter the cells cannot separate from another is tied to it rather than frozen at a number.
TIES = {"sigma_a": "sigma"}
# μ's bound in the socket-sharing reading (`fit_step_model(sharing_alone=True)`): ranks on disjoint cores of one
# socket slow each other through its memory bandwidth and last-level cache; at worst one rank already saturates the
# socket's bandwidth and k ranks split it, each k× slower (μ = 1): a socket's throughput does not fall as ranks are
# added, since sharing a bandwidth does not lose it.
SHARING_MU_MAX = 1.0


class StepParams(NamedTuple):
    """The step model's parameters by name (`PARAMS`, in its order), read once from the fitted mapping."""

    a_s: float
    c_s: float
    sigma: float
    sigma_a: float
    kappa: float
    mu: float
    rho: float
    gamma: float

    @classmethod
    def of(cls, params: Mapping[str, float]) -> StepParams:
        return cls(*(params[name] for name in PARAMS))


@dataclass(frozen=True, slots=True)
class Layout:
    """What the model needs to know of a layout: its shape and where its ranks sit."""

    ranks: int
    threads: int
    local_batch: int
    nodes: int = 1
    ranks_per_socket: int = 1     # the most ranks sharing one socket
    link: str | None = None       # slowest link class of the ring; None for one rank
    threads_per_core: int = 1     # hardware threads each of a rank's cores runs (2: its threads include SMT siblings)

    @property
    def global_batch(self) -> int:
        return self.ranks * self.local_batch

    @property
    def cores(self) -> int:
        return self.ranks * self.threads

    @property
    def label(self) -> str:
        nodes = f" on {self.nodes} nodes" if self.nodes > 1 else ""
        return f"{self.ranks}×{self.threads}×{self.local_batch}{nodes}"


@dataclass(frozen=True, slots=True)
class Cell:
    """A measured layout: median throughput over repeats and the repeats' coefficient of variation."""

    layout: Layout
    samples_per_s: float
    cv: float = 0.0

    @property
    def step_s(self) -> float:
        return self.layout.global_batch / self.samples_per_s


def thread_factor(threads: int, sigma: float, kappa: float = 0.0) -> float:
    """U(T), the time of T threads relative to one.

    >>> thread_factor(1, 0.3), thread_factor(2, 0.0), round(thread_factor(4, 0.2), 4)
    (1.0, 0.5, 0.4)
    """
    t = threads
    return (1 + sigma * (t - 1) + kappa * t * (t - 1)) / t


def combine(compute_s: float, comm_s: float, gamma: float) -> float:
    """The γ-norm of compute and communication.

    >>> combine(3.0, 4.0, 1.0), combine(3.0, 4.0, 2.0), combine(3.0, 0.0, 1.7)
    (7.0, 5.0, 3.0)
    """
    if comm_s <= 0:
        return compute_s
    return float((compute_s ** gamma + comm_s ** gamma) ** (1 / gamma))


def sigma_from_speedup(threads: int, speedup: float) -> float:
    """Amdahl's serial fraction that gives `speedup` on `threads` threads, clipped to [0, 1].

    >>> sigma_from_speedup(2, 2.0), round(sigma_from_speedup(2, 1.6), 4), sigma_from_speedup(1, 1.0)
    (0.0, 0.25, 0.0)
    """
    if threads <= 1 or speedup <= 0:
        return 0.0
    return min(1.0, max(0.0, (threads / speedup - 1) / (threads - 1)))


@dataclass(frozen=True, slots=True)
class StepModel:
    """Fitted parameters, the communication fits they were combined with, and what was frozen and why."""

    params: Mapping[str, float]
    links: Mapping[str, LinkFit]
    buckets: tuple[int, ...]                          # DDP bucket sizes in bytes
    frozen: Mapping[str, str] = field(default_factory=dict)   # parameter → why it was not fitted
    cells: int = 0
    rms_log_error: float = 0.0
    solver_note: str = ""                             # why the solver's answer is doubtful; "" when it converged
    compute_scale: float = 1.0                        # target's compute time ÷ measured (CPU what-if)
    values: StepParams = field(init=False, repr=False, compare=False)   # `params`, by attribute

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", StepParams.of(self.params))

    def at_bound(self) -> dict[str, float]:
        """Fitted parameters (not frozen) that ended at a bound of their range: the cells could not place them, and
        what they stand for may be something else the cells cannot tell apart (ρ soaking up a socket's sharing)."""
        out = {}
        for name in PARAMS:
            low, high = BOUNDS[name]
            value = self.params[name]
            if name in self.frozen or name == "a_s" or (name == "gamma" and value <= low * (1 + 1e-6)):
                continue          # a_s = 0 and γ = 1 are forms (no fixed part, a plain sum), not bounds hit
            if abs(value - high) <= 1e-6 * max(1.0, abs(high)) or (low > 0 and abs(value - low) <= 1e-6 * low):
                out[name] = value
        return out

    def compute_s(self, lay: Layout) -> float:
        p = self.values
        fixed = p.a_s * thread_factor(lay.threads, p.sigma_a, p.kappa)
        per_batch = p.c_s * lay.local_batch * thread_factor(lay.threads, p.sigma, p.kappa)
        return (fixed + per_batch) * (1 + p.mu * (lay.ranks_per_socket - 1)) * self.compute_scale

    def comm(self, lay: Layout) -> tuple[float, str]:
        """Communication seconds per step, and a note when it is not fully calibrated."""
        if lay.ranks <= 1 or lay.link is None:
            return 0.0, ""
        fit, note = link_for(lay.link, self.links)
        return (self.values.rho * fit.step_s(lay.ranks, self.buckets) if fit is not None else 0.0), note

    def step_s(self, lay: Layout) -> float:
        return combine(self.compute_s(lay), self.comm(lay)[0], self.values.gamma)

    def samples_per_s(self, lay: Layout) -> float:
        return lay.global_batch / self.step_s(lay)


def free_parameters(cells: Sequence[Cell], comm_modelled: bool, thread_prior: Mapping[int, float],
                    sharing_alone: bool = False) -> tuple[list[str], dict[str, float], dict[str, str]]:
    """Which parameters the cells determine; the others frozen at a stated value with the reason. `sharing_alone`
    is the other reading of multi-rank cells that share a socket at one local batch (there μ and ρ cannot be told
    apart): the all-reduce costs as calibrated (ρ = 1) and the rest of their slowdown is the socket's sharing."""
    batches = {c.layout.local_batch for c in cells}
    threads = {c.layout.threads for c in cells}
    shared = {c.layout.local_batch for c in cells if c.layout.ranks_per_socket > 1}
    multi = [c for c in cells if c.layout.ranks > 1]
    frozen: dict[str, float] = {}
    why: dict[str, str] = {}

    def freeze(name: str, value: float, reason: str) -> None:
        frozen[name], why[name] = value, reason

    if len(batches) < 2:
        freeze("a_s", 0.0, "one local batch only: compute taken as proportional to the batch")
    if len(threads) < 2:
        t, s = max(thread_prior.items(), default=(1, 1.0))
        freeze("sigma", sigma_from_speedup(t, s),
               f"one thread count only: thread scaling taken from the GEMM peak ({s:.2f}× on {t} threads)"
               if t > 1 else "one thread count only and no GEMM peak: perfect thread scaling assumed")
    if len(threads) < 2 or len(batches) < 2:
        freeze("sigma_a", math.nan,   # tied to σ (TIES) by the fit
               "the fixed part's thread scaling needs 2 thread counts at 2 local batches: tied to σ")
    if len(threads) < 3:
        freeze("kappa", 0.0, "fewer than 3 thread counts: USL contention κ = 0 (Amdahl)")
    if sharing_alone and shared:
        freeze("rho", 1.0, "the socket-sharing reading: the all-reduce as calibrated (ρ = 1), the rest of the "
               "multi-rank cells' slowdown the socket's sharing (μ)")
    elif len(shared) < 2:
        freeze("mu", 0.0, "no ranks sharing a socket at 2 local batches: socket sharing not modelled")
    if not multi or not comm_modelled:
        freeze("rho", 1.0, "no multi-rank cell with calibrated communication: all-reduce as calibrated (ρ = 1)")
        freeze("gamma", 1.0, "no multi-rank cell: no overlap assumed (γ = 1)" if not multi else
               "no all-reduce calibration: overlap not fitted (γ = 1)")
    return [p for p in PARAMS if p not in frozen], frozen, why


@dataclass(frozen=True, slots=True)
class Design:
    """The cells as arrays, for evaluating the model over all of them at once in a fit: threads T, local batch
    b, ranks per socket k, the calibrated communication of each (ρ = 1; 0 for one rank or no calibration),
    the measured log step time, and the factors of T and k the model multiplies by (computed once per fit)."""

    batch: np.ndarray
    comm_s: np.ndarray
    log_step_s: np.ndarray
    t_minus_1: np.ndarray
    t_t_minus_1: np.ndarray
    inv_t: np.ndarray
    k_minus_1: np.ndarray
    has_comm: np.ndarray
    any_comm: bool

    @staticmethod
    def of(cells: Sequence[Cell], links: Mapping[str, LinkFit], buckets: tuple[int, ...]) -> Design:
        probe = StepModel({**dict.fromkeys(PARAMS, 0.0), "rho": 1.0, "gamma": 1.0}, links, buckets)
        t = np.array([c.layout.threads for c in cells], dtype=float)
        comm = np.array([probe.comm(c.layout)[0] for c in cells], dtype=float)
        return Design(np.array([c.layout.local_batch for c in cells], dtype=float), comm,
                      np.log([c.step_s for c in cells]), t - 1, t * (t - 1), 1 / t,
                      np.array([c.layout.ranks_per_socket - 1 for c in cells], dtype=float), comm > 0,
                      bool(np.any(comm > 0)))

    def log_step_s_of(self, p: StepParams) -> np.ndarray:
        """log of `StepModel.step_s` at every cell, for parameters `p` (the same arithmetic, vectorised)."""
        return self._terms(p)[0]

    def _terms(self, p: StepParams) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(log step, compute, the two thread factors U(T; σ_a), U(T; σ), compute's weight C^γ ÷ (C^γ + M^γ))
        per cell; the γ-norm in log space (no overflow at large γ)."""
        u_a = (1 + p.sigma_a * self.t_minus_1 + p.kappa * self.t_t_minus_1) * self.inv_t
        u = (1 + p.sigma * self.t_minus_1 + p.kappa * self.t_t_minus_1) * self.inv_t
        compute = (p.a_s * u_a + p.c_s * self.batch * u) * (1 + p.mu * self.k_minus_1)
        log_step = np.log(compute)
        weight = np.ones_like(compute)
        if self.any_comm and p.rho > 0:
            m = self.has_comm
            log_c, log_m = log_step[m], np.log(p.rho * self.comm_s[m])
            both = np.logaddexp(p.gamma * log_c, p.gamma * log_m) / p.gamma
            log_step[m] = both
            weight[m] = np.exp(p.gamma * (log_c - both))
        return log_step, compute, u_a, u, weight

    def jacobian(self, p: StepParams) -> np.ndarray:
        """∂ log step / ∂ parameter at every cell, one column per name in PARAMS (analytic: a fit evaluates it
        once per iteration instead of once per parameter by finite differences)."""
        log_step, compute, u_a, u, weight = self._terms(p)
        share = 1 + p.mu * self.k_minus_1
        d = weight / compute * share                      # ∂ log step / ∂ (compute before sharing)
        spread = self.t_minus_1 * self.inv_t
        out = np.zeros((len(compute), len(PARAMS)))
        out[:, 0] = d * u_a
        out[:, 1] = d * self.batch * u
        out[:, 2] = d * p.c_s * self.batch * spread
        out[:, 3] = d * p.a_s * spread
        out[:, 4] = d * (p.a_s + p.c_s * self.batch) * self.t_minus_1
        out[:, 5] = weight / compute * (p.a_s * u_a + p.c_s * self.batch * u) * self.k_minus_1
        if self.any_comm and p.rho > 0:
            m = self.has_comm
            w = weight[m]
            out[m, 6] = (1 - w) / p.rho
            log_m = np.log(p.rho * self.comm_s[m])
            out[m, 7] = (w * np.log(compute[m]) + (1 - w) * log_m - log_step[m]) / p.gamma
        return out


def _solve(residuals: Callable[[np.ndarray], np.ndarray], jacobian: Callable[[np.ndarray], np.ndarray],
           x0: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> Fit:
    """One bounded least-squares run (every step-model fit goes through here: tests count the calls)."""
    return solve(residuals, jacobian, x0, lower, upper)


def fit_step_model(cells: Sequence[Cell], links: Mapping[str, LinkFit], buckets: Sequence[int],
                   thread_prior: Mapping[int, float] | None = None, *, starts: int = 1,
                   start_from: Mapping[str, float] | None = None, sharing_alone: bool = False) -> StepModel:
    """Fit the model to measured cells (at least one). `thread_prior` maps threads → GEMM-peak speed-up
    over one thread, used only when the cells hold a single thread count. `starts` > 1 also tries other
    starting points (the log-space objective has shallow valleys between σ, μ and γ) and keeps the lowest
    cost among the runs the solver says converged; `start_from` starts at given parameters (the bootstrap
    starts at the full fit); `sharing_alone` fits the socket-sharing reading (`free_parameters`), μ ≤ SHARING_MU_MAX."""
    if not cells:
        raise ValueError("no measured cell to fit")
    buckets = tuple(buckets)
    comm_modelled = bool(links) and bool(buckets)
    free, frozen, why = free_parameters(cells, comm_modelled, thread_prior or {}, sharing_alone)
    skeleton = StepModel({**dict.fromkeys(PARAMS, 0.0), **frozen}, links, buckets, why, len(cells))
    design = Design.of(cells, links, buckets)
    index = [PARAMS.index(p) for p in free]
    base = np.array([skeleton.params[p] for p in PARAMS])

    def params_of(theta: np.ndarray) -> np.ndarray:
        full = base.copy()
        full[index] = theta
        for tied, to in TIES.items():
            if math.isnan(full[PARAMS.index(tied)]):
                full[PARAMS.index(tied)] = full[PARAMS.index(to)]
        return full

    tied = [(index.index(PARAMS.index(to)), PARAMS.index(name)) for name, to in TIES.items()
            if math.isnan(base[PARAMS.index(name)]) and PARAMS.index(to) in index]

    def residuals(theta: np.ndarray) -> np.ndarray:
        out: np.ndarray = design.log_step_s_of(StepParams(*params_of(theta))) - design.log_step_s
        return out

    def jacobian(theta: np.ndarray) -> np.ndarray:
        full = design.jacobian(StepParams(*params_of(theta)))
        out = full[:, index]
        for column, name in tied:          # a tied parameter moves with the one it is tied to
            out[:, column] = out[:, column] + full[:, name]
        return out

    def model_with(theta: np.ndarray) -> StepModel:
        return replace(skeleton, params=dict(zip(PARAMS, (float(v) for v in params_of(theta)))))

    if not free:
        model = model_with(np.array([]))
        return replace(model, rms_log_error=float(math.sqrt(np.mean(residuals(np.array([])) ** 2))))
    lower = np.array([BOUNDS[p][0] for p in free])
    upper = np.array([SHARING_MU_MAX if p == "mu" and sharing_alone else BOUNDS[p][1] for p in free])
    firsts = [np.array([start_from[p] for p in free])] if start_from else []
    runs = [_solve(residuals, jacobian, x0, lower, upper)
            for x0 in firsts + [np.array([_start(p, cells, k) for p in free]) for k in range(starts)]]
    good = [r for r in runs if r.success]
    result = min(good or runs, key=lambda r: r.cost)
    note = "" if good else f"the least-squares solver did not converge ({result.message}): parameters doubtful"
    rms = float(math.sqrt(np.mean(result.fun ** 2)))
    return replace(model_with(result.x), rms_log_error=rms, solver_note=note)


def _start(param: str, cells: Sequence[Cell], which: int = 0) -> float:
    """Starting points inside the bounds: per-sample time from the cells, neutral values elsewhere (which = 0);
    then a start with no fixed part, strong serial fractions and full overlap, and one in between."""
    per_sample = min(c.step_s / c.layout.local_batch for c in cells)
    starts = ({"a_s": per_sample, "c_s": per_sample / 2, "sigma": 0.1, "sigma_a": 0.5, "kappa": 0.0, "mu": 0.05,
               "rho": 1.0, "gamma": 1.5},
              {"a_s": 0.0, "c_s": per_sample, "sigma": 0.4, "sigma_a": 0.8, "kappa": 0.01, "mu": 0.3,
               "rho": 2.0, "gamma": 4.0},
              {"a_s": 2 * per_sample, "c_s": per_sample / 4, "sigma": 0.02, "sigma_a": 0.2, "kappa": 0.001,
               "mu": 0.0, "rho": 1.5, "gamma": 1.0})
    return starts[which % len(starts)][param]
