"""Environment variables orch reads, each paired with its default (one source of truth)."""

RESULTS_ROOT_ENV_VAR = "ORCH_RESULTS"
DEFAULT_RESULTS_ROOT = "results"

# Set by the launcher in each rank's environment: the rank exits if this process is no longer its parent.
LAUNCHER_PID_ENV_VAR = "ORCH_LAUNCHER_PID"
