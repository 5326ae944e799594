"""What a CPU computes natively, and the training precision chosen from it.

bf16 is fast only where the CPU has bf16 instructions (AVX512-BF16, AMX-BF16). Elsewhere oneDNN and ATen
emulate it: on a 2-vCPU AMD EPYC Zen 3 (AVX2 only) a bf16 matmul ran 65× and a bf16 convolution 6× slower
than fp32. CPU flags alone mislead (``ONEDNN_MAX_CPU_ISA`` caps what oneDNN uses, VMs hide flags, a library
may skip a path), so the verdict comes from a probe where one ran: a small bf16 GEMM timed against fp32 on
one core (`orchestrator.io.isa`). Without a probe (``orch plan`` imports no torch) the flags decide, and the
verdict says so.

Pure: the probe's numbers come in from the edge.

    >>> isa = CpuIsa(features=("avx2",), fp32_gflops=90.0, bf16_gflops=3.0, source=PROBE)
    >>> isa.bf16_native, isa.verdict()
    (False, 'bf16 not native: a bf16 GEMM ran 30.0× slower than fp32 (probe: 3.0 against 90.0 GFLOP/s on one core)')
    >>> resolve_precision("auto", [isa]).chosen
    'fp32'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.core.json.jsonobject import JsonObject
from orchestrator.core.json.values import JsonReadable

# The ISA features that matter for training, as Linux names them in /proc/cpuinfo's flags.
ISA_FEATURES = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni", "amx_tile",
                "amx_bf16")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# bf16 counts as native when its GEMM is at least this fast relative to fp32 on the same core: with bf16
# instructions it is 2× or more (220 against 95 GFLOP/s on one Zen 4 core); emulated, 30-65× slower. A CPU
# where bf16 is no faster than fp32 gains nothing from it and loses precision, so it gets fp32.
BF16_NATIVE_MIN_SPEEDUP = 1.0
PROBE, FLAGS, FILE = "probe", "cpu flags", "topology file"
PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuIsa:
    """One node's CPU, as far as training precision cares."""

    features: tuple[str, ...] = ()        # those of ISA_FEATURES the CPU reports
    torch_capability: str | None = None   # the kernels ATen dispatches to: AVX512, AVX2, DEFAULT (None: not asked)
    isa_cap: str | None = None            # ONEDNN_MAX_CPU_ISA in force on the node, if any
    fp32_gflops: float | None = None      # the probe: a small GEMM on one core, each precision
    bf16_gflops: float | None = None
    native_bf16: bool | None = None       # stated by a topology file; otherwise derived below
    source: str = FLAGS                   # PROBE, FLAGS or FILE: where the verdict comes from
    cpu_model: str = ""
    # A CPU what-if for `orch predict` (stated by a topology file, never probed): one core's GEMM peak as orch
    # sweep's peak trial measures it at 1 thread (or a datasheet's), and one core's STREAM-triad bandwidth
    peak_fp32_gflops_per_core: float | None = None
    peak_bf16_gflops_per_core: float | None = None
    triad_gb_per_s_per_core: float | None = None

    @property
    def bf16_native(self) -> bool:
        if self.native_bf16 is not None:
            return self.native_bf16
        if self.fp32_gflops and self.bf16_gflops:
            return self.bf16_gflops >= BF16_NATIVE_MIN_SPEEDUP * self.fp32_gflops
        return any(flag in self.features for flag in BF16_FLAGS) and not self.capped_below_bf16

    @property
    def identity(self) -> str:
        """The CPU as far as a step time tells it apart: its model name, the ISA features it reports and a cap
        in force. The model name alone is not enough: a cloud VM's can be 'AMD EPYC' on a Zen 3 and a Zen 4.

        >>> CpuIsa(features=("avx2",), cpu_model="AMD EPYC").identity
        'AMD EPYC (avx2)'
        """
        cap = f", capped at {self.isa_cap}" if self.isa_cap else ""
        return f"{self.cpu_model or 'an unnamed CPU'} ({' '.join(self.features) or 'no listed ISA features'}{cap})"

    @property
    def capped_below_bf16(self) -> bool:
        """Whether ONEDNN_MAX_CPU_ISA keeps oneDNN below its bf16 code (AVX2, AVX512_CORE, ...; not
        AVX512_CORE_BF16, AVX512_CORE_AMX or ALL)."""
        cap = (self.isa_cap or "").upper()
        return bool(cap) and cap != "ALL" and "BF16" not in cap and "AMX" not in cap

    @property
    def bf16_slowdown(self) -> float | None:
        """fp32 GEMM rate over bf16's, from the probe (> 1: bf16 is slower); None without a probe."""
        if self.fp32_gflops and self.bf16_gflops:
            return self.fp32_gflops / self.bf16_gflops
        return None

    def gflops_per_core(self, precision: str) -> float | None:
        return self.bf16_gflops if precision == "bf16" else self.fp32_gflops

    def peak_gflops_per_core(self, precision: str) -> float | None:
        return self.peak_bf16_gflops_per_core if precision == "bf16" else self.peak_fp32_gflops_per_core

    def verdict(self) -> str:
        """The bf16 verdict with its evidence, one line."""
        word = "bf16 native" if self.bf16_native else "bf16 not native"
        slowdown = self.bf16_slowdown
        if self.source == PROBE and slowdown is not None:
            rates = f"{self.bf16_gflops:,.1f} against {self.fp32_gflops:,.1f} GFLOP/s on one core"
            speed = (f"{1 / slowdown:.1f}× as fast as fp32" if slowdown <= 1 else f"{slowdown:.1f}× slower than fp32")
            return f"{word}: a bf16 GEMM ran {speed} (probe: {rates})"
        if self.source == FILE:
            return f"{word} (as the topology file states)"
        flags = [f for f in BF16_FLAGS if f in self.features]
        evidence = f"flag {', '.join(flags)}" if flags else f"no {' or '.join(BF16_FLAGS)} flag"
        if flags and self.capped_below_bf16:
            evidence += f", but ONEDNN_MAX_CPU_ISA={self.isa_cap} keeps oneDNN below it"
        return f"{word}: {evidence} (CPU flags; not probed)"

    def to_dict(self) -> dict[str, JsonReadable]:
        return {"features": list(self.features), "torch_capability": self.torch_capability,
                "isa_cap": self.isa_cap, "fp32_gflops": self.fp32_gflops, "bf16_gflops": self.bf16_gflops,
                "bf16_native": self.bf16_native, "source": self.source, "cpu_model": self.cpu_model,
                "verdict": self.verdict(), **{k: v for k, v in self.what_if_figures().items() if v is not None}}

    def what_if_figures(self) -> dict[str, float | None]:
        return {"peak_fp32_gflops_per_core": self.peak_fp32_gflops_per_core,
                "peak_bf16_gflops_per_core": self.peak_bf16_gflops_per_core,
                "triad_gb_per_s_per_core": self.triad_gb_per_s_per_core}

    @staticmethod
    def from_dict(data: Mapping[str, object]) -> CpuIsa:
        """What `to_dict` wrote (a detected topology saved with `orch topology --json`, environment.json's `cpus`),
        read leniently: a figure that is not a number is unknown, absent keys take their defaults.

        >>> CpuIsa.from_dict({"features": ["avx2"], "fp32_gflops": 90, "bf16_gflops": "fast", "source": "probe"})
        CpuIsa(features=('avx2',), torch_capability=None, isa_cap=None, fp32_gflops=90.0, bf16_gflops=None, ...)
        """
        d = _IsaRecord.from_json(data)
        source = str(d.source or FILE)
        return CpuIsa(features=tuple(str(f) for f in d.features or ()), torch_capability=_text(d.torch_capability),
                      isa_cap=_text(d.isa_cap), fp32_gflops=_number(d.fp32_gflops), bf16_gflops=_number(d.bf16_gflops),
                      native_bf16=d.bf16_native if isinstance(d.bf16_native, bool) and source == FILE else None,
                      source=source, cpu_model=str(d.cpu_model or ""),
                      peak_fp32_gflops_per_core=_number(d.peak_fp32_gflops_per_core),
                      peak_bf16_gflops_per_core=_number(d.peak_bf16_gflops_per_core),
                      triad_gb_per_s_per_core=_number(d.triad_gb_per_s_per_core))


@dataclass(frozen=True, kw_only=True, slots=True)
class _IsaRecord(JsonObject):
    """`CpuIsa.to_dict`'s keys, as JSON gave them (checked by `from_dict`, which reads them leniently)."""

    features: tuple[object, ...] | None = None
    torch_capability: object = None
    isa_cap: object = None
    fp32_gflops: object = None
    bf16_gflops: object = None
    bf16_native: object = None
    source: object = None
    cpu_model: object = None
    peak_fp32_gflops_per_core: object = None
    peak_bf16_gflops_per_core: object = None
    triad_gb_per_s_per_core: object = None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def features_from_flags(flags: str) -> tuple[str, ...]:
    """The training-relevant features among /proc/cpuinfo's `flags` line.

    >>> features_from_flags("fpu avx2 avx512f avx512_bf16 sse4_2")
    ('avx2', 'avx512f', 'avx512_bf16')
    """
    present = set(flags.split())
    return tuple(f for f in ISA_FEATURES if f in present)


@dataclass(frozen=True, slots=True)
class PrecisionChoice:
    """What a sweep trains in, and why: `requested` as the sweep says it, `chosen` as the ranks run it.
    `error` is set when the request is refused (explicit bf16 on a CPU that emulates it, not opted in)."""

    requested: str
    chosen: str
    reason: str
    error: str | None = None
    per_node: tuple[str, ...] = field(default=(), compare=False)   # each node's verdict, for the record

    def to_dict(self) -> dict[str, JsonReadable]:
        return {"requested": self.requested, "chosen": self.chosen, "reason": self.reason, "error": self.error,
                "per_node": list(self.per_node)}


def resolve_precision(requested: str, isas: Sequence[CpuIsa | None], *, allow_slow_bf16: bool = False,
                      names: Sequence[str] = ()) -> PrecisionChoice:
    """The precision every rank of a sweep trains in. One precision for the whole sweep, so that its cells
    compare: auto gives bf16 only when every node computes bf16 natively, else fp32.

    >>> slow = CpuIsa(features=("avx2",), fp32_gflops=90.0, bf16_gflops=3.0, source=PROBE)
    >>> resolve_precision("bf16", [slow], names=["vm"]).error.split(":")[:2]
    ['precision bf16 on node vm', ' bf16 not native']
    >>> resolve_precision("bf16", [slow], allow_slow_bf16=True).chosen
    'bf16'
    """
    names = list(names) or [f"node {i}" for i in range(len(isas))]
    per_node = tuple(f"{name}: {isa.verdict() if isa else 'unknown (no ISA information)'}"
                     for name, isa in zip(names, isas))
    slow = [(name, isa) for name, isa in zip(names, isas) if isa is None or not isa.bf16_native]
    if requested == "fp32":
        return PrecisionChoice(requested, "fp32", "fp32 (requested)", None, per_node)
    if requested == "bf16":
        if not slow:
            return PrecisionChoice(requested, "bf16", "bf16 (requested; native on every node)", None, per_node)
        name, isa = slow[0]
        why = isa.verdict() if isa else "nothing says whether it computes bf16 natively"
        if allow_slow_bf16:
            return PrecisionChoice(requested, "bf16", f"bf16 (requested, constraints.allow_slow_bf16: true) although "
                                                      f"on {name}: {why}", None, per_node)
        return PrecisionChoice(requested, "bf16", "bf16 (requested)",
                               f"precision bf16 on node {name}: {why}; use precision auto or fp32, or set "
                               "constraints.allow_slow_bf16: true to measure it anyway", per_node)
    if not isas or slow:
        name, isa = slow[0] if slow else ("the machine", None)
        why = isa.verdict() if isa else "nothing says whether it computes bf16 natively (state isa: in the topology)"
        return PrecisionChoice(requested, "fp32", f"auto: fp32, because on {name}: {why}", None, per_node)
    first = isas[0]
    return PrecisionChoice(requested, "bf16", f"auto: bf16, native on every node ({names[0]}: "
                                              f"{first.verdict() if first else ''})", None, per_node)
