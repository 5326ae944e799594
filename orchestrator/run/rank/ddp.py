"""The DDP wrapper every training rank uses, with the workload's switches (`orch.workload.DdpOptions`): the
bucket size, gradients as views into the buckets, and a communication hook that all-reduces each bucket in
16 bits. What took effect goes into the record's `applied`; what goes on the wire into its throughput section,
for `orch predict` (with a 16-bit hook a bucket of fp32 gradients moves half its bytes).

Imported inside rank processes only (it imports torch); the benchmarks use it too, so that a direct launch
wraps the model exactly as a sweep does.
"""

from __future__ import annotations

from typing import Any

import torch

from orch.workload import DdpOptions

# The dtype a bucket is all-reduced in under each hook; None: the gradients' own dtype.
WIRE_DTYPES: dict[str, torch.dtype | None] = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}
_HOOK_NOTES = {"none": "none (buckets all-reduced in the gradients' dtype)",
               "bf16": "bf16 (bf16_compress_hook: buckets all-reduced as bfloat16)",
               "fp16": "fp16 (fp16_compress_hook: buckets all-reduced as float16)"}


def applied(options: DdpOptions, *, world_size: int) -> dict[str, str]:
    """The `applied` entries of the DDP switches. With one rank there is no DDP: each says so after its value,
    so records still group by the setting.

    >>> applied(DdpOptions(comm_hook="bf16"), world_size=2)["ddp_comm_hook"]
    'bf16 (bf16_compress_hook: buckets all-reduced as bfloat16)'
    >>> applied(DdpOptions(), world_size=1)["ddp_bucket_mb"]
    '25 (inactive: 1 rank, no DDP)'
    """
    values = {"ddp_comm_hook": options.comm_hook, "ddp_bucket_mb": f"{options.bucket_mb:g}",
              "ddp_grad_as_bucket_view": str(options.grad_as_bucket_view).lower()}
    if world_size < 2:
        return {key: f"{value} (inactive: 1 rank, no DDP)" for key, value in values.items()}
    return {**values, "ddp_comm_hook": _HOOK_NOTES[options.comm_hook]}


def wrap(module: torch.nn.Module, options: DdpOptions, *, init_sync: bool = True,
         noise_scale: bool = False) -> torch.nn.Module:
    """`module` in DistributedDataParallel with `options` (the process group must exist, 2 ranks or more).
    `init_sync=False` skips DDP's start-up broadcast (see `protocol.wrap_ddp`). `noise_scale`: the workload's
    hook (or the plain all-reduce) runs inside the gradient noise scale's per-bucket hook
    (`run.rank.noise_scale`), which measures the local and the averaged gradient's squared norms."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(module, bucket_cap_mb=options.bucket_mb,
                                  gradient_as_bucket_view=options.grad_as_bucket_view, init_sync=init_sync)
    hooks = {"none": default_hooks.allreduce_hook, "bf16": default_hooks.bf16_compress_hook,
             "fp16": default_hooks.fp16_compress_hook}
    if noise_scale:
        from orchestrator.run.rank.noise_scale import register

        register(ddp, hooks[options.comm_hook])
    elif options.comm_hook != "none":
        ddp.register_comm_hook(state=None, hook=hooks[options.comm_hook])
    return ddp


def wire_sizes(sizes: dict[str, Any], options: DdpOptions | None) -> dict[str, Any]:
    """What the gradient all-reduce puts on the wire, from `protocol.gradient_sizes`' report: the dtype, and
    each bucket's bytes in it (DDP reports its buckets in the gradients' dtype). None without DDP.

    >>> wire_sizes({"gradient_dtype": "float32", "ddp_bucket_bytes": [4096, 400]}, DdpOptions(comm_hook="bf16"))
    {'ddp_wire_dtype': 'bfloat16', 'ddp_wire_bucket_bytes': [2048, 200]}
    """
    if options is None:
        return {"ddp_wire_dtype": None, "ddp_wire_bucket_bytes": None}
    gradient_dtype = getattr(torch, sizes.get("gradient_dtype") or "float32")
    wire = WIRE_DTYPES[options.comm_hook] or gradient_dtype
    ratio = torch.tensor([], dtype=wire).element_size() / torch.tensor([], dtype=gradient_dtype).element_size()
    buckets = sizes.get("ddp_bucket_bytes")
    return {"ddp_wire_dtype": str(wire).removeprefix("torch."),
            "ddp_wire_bucket_bytes": [round(b * ratio) for b in buckets] if buckets else None}
