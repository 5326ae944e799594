"""Environment variables orch reads, each paired with its default (one source of truth)."""

RESULTS_ROOT_ENV_VAR = "ORCH_RESULTS"
DEFAULT_RESULTS_ROOT = "results"

# Set by the launcher in each rank's environment: the rank exits if this process is no longer its parent.
LAUNCHER_PID_ENV_VAR = "ORCH_LAUNCHER_PID"

# Ray reads this when it is imported: "0" makes an embedded Ray use 127.0.0.1 as its node address, so every
# one of its servers (GCS, raylet, workers, agents) listens on loopback only.
RAY_LOOPBACK_ENV_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
RAY_LOOPBACK_VALUE = "0"
