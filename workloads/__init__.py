"""orch's own workloads, written on the public door (`orch.workload`) like anyone's and found the same way:
as entry points of the `orch.workloads` group, declared in orch's pyproject.toml (`orch workloads` lists
them). Importing a workload's module (and asking it about its parameters, memory or epoch size) never
imports torch: only `build`, inside a rank process, does."""
