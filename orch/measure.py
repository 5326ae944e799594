"""What a workload may measure of the machine it runs on and of its own model, as orch measures them: the CPU's
flags and any oneDNN ISA cap in force (to decide what an optional library can do here), and orch's FLOP counter
(to count a step as a trial counts it).

    from orch.measure import cpu_flags, flop_counter

    if "avx512bw" in cpu_flags(): ...
    with torch.device("meta"):
        counter = flop_counter()
        with counter:
            model(torch.empty(1, 3, 224, 224))
    flops = counter.get_total_flops()

A module of its own, outside `orch.workload`, because both read the machine or need torch (the public workload
door, which `orch plan` imports, reads nothing and imports torch only inside the functions a rank calls). orch's
own model families use it, as anyone's would: they import nothing of `orchestrator`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.utils.flop_counter import FlopCounterMode


def cpu_flags() -> frozenset[str]:
    """The flags of this machine's first CPU, as /proc/cpuinfo lists them (`avx2`, `avx512bw`, `amx_bf16`, ...);
    empty where it cannot be read."""
    from orchestrator.io.isa import cpu_flags as read

    return frozenset(read()[0].split())


def isa_cap() -> str | None:
    """The ISA oneDNN is capped to in this process (ONEDNN_MAX_CPU_ISA, or oneDNN 2.x's DNNL_MAX_CPU_ISA), or None:
    a cap below AVX-512 makes a newer CPU run as an AVX2 one."""
    from orchestrator.io.isa import isa_cap as read

    return read()


def flop_counter() -> FlopCounterMode:
    """torch's `FlopCounterMode` counting as orch counts (a convolution's taps inside the input, as benchdnn and
    the compute roof count them; matmuls and attention by torch's formulas): `with counter: ...`, then
    `counter.get_total_flops()`. Imports torch."""
    from orchestrator.run.rank.flops import flop_counter as counter

    return counter()
