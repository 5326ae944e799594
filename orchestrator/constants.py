"""Environment variables orch reads, each paired with its default (one source of truth)."""

RESULTS_ROOT_ENV_VAR = "ORCH_RESULTS"
DEFAULT_RESULTS_ROOT = "results"
