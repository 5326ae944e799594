"""Learn what this machine's CPU computes natively: its ISA flags, the kernels torch dispatches to, and a
probe that times a small bf16 GEMM against fp32 on one core (orchestrator.core.machine.isa decides from them).

The probe takes about 0.1 s on a CPU with bf16 instructions and about 0.2 s on one that emulates bf16: each
precision multiplies 256×256 matrices for at most `PROBE_S` (at least `PROBE_MIN_MATMULS` times), on one
thread, so that its figure is one core's whatever the caller's thread settings.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from pathlib import Path
from typing import Any

from orchestrator.core.machine.isa import FLAGS, PROBE, CpuIsa, features_from_flags, resolve_precision

CPUINFO = Path("/proc/cpuinfo")
PROBE_SIZE = 256
PROBE_S = 0.03            # per precision
PROBE_MIN_MATMULS = 3
ISA_CAP_ENV_VARS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def cpu_flags(cpuinfo: Path = CPUINFO) -> tuple[str, str]:
    """(flags line, model name) of the first CPU in /proc/cpuinfo; empty strings where it cannot be read."""
    flags = model = ""
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        return flags, model
    for line in lines:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "flags" and not flags:
            flags = value.strip()
        elif key == "model name" and not model:
            model = value.strip()
        if flags and model:
            break
    return flags, model


def isa_cap() -> str | None:
    return next((os.environ[name] for name in ISA_CAP_ENV_VARS if os.environ.get(name)), None)


def from_flags(cpuinfo: Path = CPUINFO) -> CpuIsa:
    """The verdict from CPU flags alone: no torch, no probe (what `orch plan` uses)."""
    flags, model = cpu_flags(cpuinfo)
    return CpuIsa(features=features_from_flags(flags), isa_cap=isa_cap(), source=FLAGS, cpu_model=model)


def _gemm_gflops(dtype: object, size: int = PROBE_SIZE, seconds: float = PROBE_S) -> float:
    import torch

    a = torch.randn(size, size, dtype=dtype)  # type: ignore[call-overload]
    b = torch.randn(size, size, dtype=dtype)  # type: ignore[call-overload]
    torch.mm(a, b)   # the first call creates oneDNN's primitive: not timed
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < PROBE_MIN_MATMULS or time.perf_counter() < deadline:
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e9


def probe(cpuinfo: Path = CPUINFO) -> CpuIsa:
    """The flags, torch's CPU capability, and the bf16-against-fp32 GEMM probe on one thread."""
    import torch

    base = from_flags(cpuinfo)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fp32 = _gemm_gflops(torch.float32)
        bf16 = _gemm_gflops(torch.bfloat16)
    finally:
        torch.set_num_threads(threads)
    return CpuIsa(features=base.features, torch_capability=torch.backends.cpu.get_cpu_capability(),
                  isa_cap=base.isa_cap, fp32_gflops=round(fp32, 2), bf16_gflops=round(bf16, 2), source=PROBE,
                  cpu_model=base.cpu_model)


def with_precision(params: Any, chosen: str) -> tuple[Any, str | None]:
    """(`params` training in `chosen`, None), or (them in fp32, why not) when the workload's own checks rule
    `chosen` out (the RetinaNet's bf16 below 96 px): one rule for a sweep's decision and a lone trainer's."""
    try:
        return dataclasses.replace(params, precision=chosen), None
    except ValueError as err:
        return dataclasses.replace(params, precision="fp32"), str(err)


def decided_here(params: Any) -> Any:
    """Workload parameters with `precision: auto` decided on this process's own CPU, as a sweep decides it for
    its nodes (bf16 where native, else fp32; fp32 where the parameters rule bf16 out). A sweep's ranks get the
    precision decided already; this covers whatever builds a trainer without a sweep (benchmarks, tests)."""
    if getattr(params, "precision", None) != "auto":
        return params
    return with_precision(params, resolve_precision("auto", [probe()]).chosen)[0]
