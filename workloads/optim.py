"""What orch's own workloads share beyond the public door (`orch.workload`): torch.optim's constructor
switches for each `optimizer_impl` they offer."""

from __future__ import annotations

# The per-tensor loop, the multi-tensor foreach kernels, or one fused kernel.
OPTIMIZER_IMPL_KWARGS: dict[str, dict[str, bool]] = {
    "loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
