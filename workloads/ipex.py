"""Intel Extension for PyTorch (IPEX), applied the same way by every workload that offers `ipex: auto`.

IPEX is optional and pinned to one torch release (IPEX 2.8 imports only with torch 2.8.x; `scripts/setup.sh
--ipex` makes such an environment). `apply_ipex` calls `ipex.optimize(module, optimizer, dtype=...)` for
training, in place, and returns a note of what took effect, read back from the objects it changed:

- weight prepacking: convolution and linear modules become IPEX modules holding oneDNN-blocked weights;
- conv weights in channels-last (IPEX does this to every conv on CPU; the images follow only with the
  workload's own `memory_format: channels_last`);
- the optimizer's update step replaced by IPEX's fused kernel, which IPEX 2.8 has on CPU for SGD, Adagrad,
  Adam, Lamb and Lars only (AdamW keeps torch's step, whatever `optimizer_impl` says);
- with bf16, the weights held in bf16 and IPEX's master-weight handling for the update.

How it composes with the other switches is the caller's order (see `workloads/retinanet/trainer.py`): the
model's own rewrites (fused frozen batch-norm, which IPEX leaves alone in training; memory format) first,
then the optimizer, then IPEX, then `torch.compile` on the result, with `weights_prepack=False` then, since
IPEX's prepacked modules are opaque custom ops to the compiler.

Imports torch only inside functions: the workload modules import this one, and `orch plan` stays torch-free.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

IPEX_MODULE = "intel_extension_for_pytorch"
IpexMode = Literal["auto", "off"]
# Unique memory per rank that ipex.optimize adds (IPEX's runtime, its oneDNN primitive and prepacked-weight
# caches), measured in .venv-ipex (torch 2.8.0, IPEX 2.8.0) with `benchmarks/calibrate_memory.py --quick --ipex
# auto` against `--ipex off`: +57/+72 MiB (classifier, batch 64/1024), +106/+81 (small RetinaNet fp32, batch
# 2/8), +66 (bf16), +86 (SGD, reference loss and frozen BN). Rounded up from the mean (78); the estimates add it
# where IPEX will apply, which leaves them -0.2% to +9% off the measured peaks.
IPEX_USS_MIB = 80.0
# The `ipex` parameter's meaning, the same in every workload that offers it.
IPEX_OPTION_HELP = ("auto: ipex.optimize(model, optimizer) when intel_extension_for_pytorch is installed for this "
                    "torch release, else a note says why not; off: never")


def release(version: str) -> str:
    """'2.8.0+cpu' -> '2.8': the part that IPEX and torch must share."""
    return ".".join(version.split("+")[0].split(".")[:2])


def ipex_unavailable_reason() -> str | None:
    """Why IPEX cannot be used here, or None when it can. Read from package metadata, importing neither
    (so the planner may ask, and an IPEX built for another torch release, which exits the process on
    import, is never imported)."""
    if importlib.util.find_spec(IPEX_MODULE) is None:
        return f"{IPEX_MODULE} is not installed"
    ipex_version, torch_version = importlib.metadata.version(IPEX_MODULE), importlib.metadata.version("torch")
    if release(ipex_version) != release(torch_version):
        return f"{IPEX_MODULE} {ipex_version} is built for torch {release(ipex_version)}, this is torch {torch_version}"
    return None


# IPEX 2.8 prepacks bf16 weights only on CPUs with these flags, and asserts otherwise ("BF16 weight prepack
# needs the cpu support avx_ne_convert or avx512bw, avx512vl and avx512dq"): seen on an AVX2-only AMD EPYC.
IPEX_BF16_FLAG_SETS = (("avx512bw", "avx512vl", "avx512dq"), ("avx_ne_convert",))


def ipex_bf16_unsupported_reason(flags: str | None = None, isa_cap: str | None = None) -> str | None:
    """Why IPEX cannot train in bf16 on this CPU (its flags, or an ONEDNN_MAX_CPU_ISA cap below AVX-512, which
    makes a newer CPU behave like an AVX2 one), or None when it can."""
    from orch.measure import cpu_flags
    from orch.measure import isa_cap as current_cap

    present = set(flags.split()) if flags is not None else cpu_flags()
    cap = (isa_cap if isa_cap is not None else current_cap() or "").upper()
    if not any(all(f in present for f in needed) for needed in IPEX_BF16_FLAG_SETS):
        return ("IPEX's bf16 weight prepack needs avx512bw, avx512vl and avx512dq, or avx_ne_convert, which this "
                "CPU lacks")
    if cap and not cap.startswith(("AVX512", "AVX10", "ALL")):
        return f"ONEDNN_MAX_CPU_ISA={cap} keeps oneDNN below the AVX-512 code IPEX's bf16 weights need"
    return None


def ipex_applies(mode: IpexMode) -> bool:
    """Whether `ipex: mode` will apply ipex.optimize in this environment (for memory estimates)."""
    return mode == "auto" and ipex_unavailable_reason() is None


def _what_took_effect(module: torch.nn.Module, optimizer: torch.optim.Optimizer, dtype_name: str) -> str:
    """Read back from the optimized objects: which modules IPEX replaced (prepacked weights), the conv
    weights' layout where they were not prepacked, and which update step the optimizer now runs."""
    import torch

    prepacked = sum(1 for m in module.modules() if type(m).__module__.startswith(IPEX_MODULE))
    plain_convs = [m for m in module.modules() if isinstance(m, torch.nn.Conv2d)]
    channels_last = sum(1 for m in plain_convs if m.weight.is_contiguous(memory_format=torch.channels_last))
    if getattr(optimizer, "fused", None) is True:    # set by IPEX's optimizer_fusion when it patches step
        step = "IPEX fused update step"
    elif hasattr(optimizer, "_original_step"):       # bf16 weights: IPEX wraps step for the fp32 master copy
        step = f"{dtype_name} weights with an unfused fp32 master-weight update ({type(optimizer).__name__})"
    else:
        step = f"torch's update step (IPEX fuses no {type(optimizer).__name__} on CPU)"
    layout = f"{prepacked} modules prepacked (oneDNN-blocked weights)"
    if plain_convs:
        layout += f", {channels_last}/{len(plain_convs)} other conv weights channels-last"
    return f"{layout}, {step}"


def apply_ipex(module: torch.nn.Module, optimizer: torch.optim.Optimizer, *, mode: IpexMode,
               dtype: torch.dtype, weights_prepack: bool = True
               ) -> tuple[torch.nn.Module, torch.optim.Optimizer, str]:
    """`ipex.optimize` for training when `mode` is auto and IPEX imports here; else the inputs unchanged.
    The note starts with `on:` or `off:` and says why or what took effect, e.g.
    'on: ipex 2.8.0+cpu optimize(dtype=float32): 38 modules prepacked (oneDNN-blocked weights), IPEX fused
    update step'."""
    if mode == "off":
        return module, optimizer, "off: ipex=off"
    reason = ipex_unavailable_reason()
    if reason is None and str(dtype) == "torch.bfloat16":
        reason = ipex_bf16_unsupported_reason()
    if reason is not None:
        return module, optimizer, f"off: {reason}"
    import intel_extension_for_pytorch as ipex

    # inplace: the default deep-copies model and optimizer, which would double the weights' memory at build.
    module, optimizer = ipex.optimize(module, optimizer=optimizer, dtype=dtype, inplace=True,
                                      weights_prepack=weights_prepack)
    dtype_name = str(dtype).removeprefix("torch.")
    prepack_note = "" if weights_prepack else ", weights_prepack=False"
    note = (f"on: ipex {ipex.__version__} optimize(dtype={dtype_name}{prepack_note}): "
            f"{_what_took_effect(module, optimizer, dtype_name)}")
    return module, optimizer, note
