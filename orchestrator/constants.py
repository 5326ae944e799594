"""Environment variables orch reads, each paired with its default (one source of truth)."""

RESULTS_ROOT_ENV_VAR = "ORCH_RESULTS"
DEFAULT_RESULTS_ROOT = "results"

# Set by the launcher in each rank's environment: the rank exits if this process is no longer its parent.
LAUNCHER_PID_ENV_VAR = "ORCH_LAUNCHER_PID"

# Set by the launcher in rank 0's environment: the file descriptor of the listening socket it reserved for the
# trial's rendezvous (run.driver.launcher.reserve_rendezvous), which rank 0's TCPStore serves on.
RENDEZVOUS_FD_ENV_VAR = "ORCH_RENDEZVOUS_FD"

# Put in the driver's environment before it starts an embedded Ray, so that every process of that Ray
# session (and every rank it launches) inherits it: how orchestrator.run.driver.reaper finds them after a driver
# SIGKILL. Not RAY_-prefixed: the ranks' environment drops those.
RAY_SESSION_TOKEN_ENV_VAR = "ORCH_RAY_SESSION_TOKEN"

# Ray reads this when it is imported: "0" makes an embedded Ray use 127.0.0.1 as its node address, so every
# one of its servers (GCS, raylet, workers, agents) listens on loopback only.
RAY_LOOPBACK_ENV_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
RAY_LOOPBACK_VALUE = "0"

# An embedded Ray shares the cores it is measuring: its periodic background work (resource reports at
# 10 Hz, its memory monitor, metrics, pre-started idle workers) cost ~4% of a rank that fills a 2-core
# machine, and ~0.4% with these settings (benchmarks/bench_orch_vs_direct.py). Ray's memory monitor is
# redundant here: every rank has orch's own memory watchdog. A cluster you join keeps its own settings.
EMBEDDED_RAY_ENV = {
    "RAY_memory_monitor_refresh_ms": "0",
    "RAY_enable_metrics_collection": "0",
    "RAY_raylet_report_resources_period_milliseconds": "1000",
    "RAY_event_stats": "0",
    "RAY_num_prestart_python_workers": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}

# What of the driver's environment a rank does not get: variables whose name says they hold a secret (an MLflow,
# cloud or Hugging Face token, a password) reach no rank on any node, unless named in $ORCH_RANK_ENV_KEEP
# (comma-separated: a script that needs HF_TOKEN to download its model). orch's own ORCH_ variables always pass.
RANK_ENV_KEEP_ENV_VAR = "ORCH_RANK_ENV_KEEP"
SECRET_ENV_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "ACCESS_KEY", "PRIVATE_KEY",
                    "AUTH")
SECRET_ENV_PREFIXES = ("MLFLOW_TRACKING_", "AWS_", "AZURE_", "GOOGLE_APPLICATION_", "DATABRICKS_")

# Where orch caches what it measured once for a workload (its probe: memory per rank, FLOPs, samples per
# epoch), per workload, parameters, precision and torch version: $ORCH_CACHE_DIR, else $XDG_CACHE_HOME/orch,
# else ~/.cache/orch (the XDG base-directory default).
CACHE_DIR_ENV_VAR = "ORCH_CACHE_DIR"
XDG_CACHE_HOME_ENV_VAR = "XDG_CACHE_HOME"
DEFAULT_CACHE_SUBDIR = "orch"
DEFAULT_XDG_CACHE_HOME = "~/.cache"
# MLflow's own client settings (it reads them from the environment), which orch sets for its own calls where the
# environment does not: with MLflow's defaults (7 retries, a growing back-off, 120 s per request) a tracking
# server that is down would hold a sweep for minutes before orch could say so and go on without it.
MLFLOW_RETRIES_ENV_VAR = "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
DEFAULT_MLFLOW_RETRIES = "1"
MLFLOW_TIMEOUT_ENV_VAR = "MLFLOW_HTTP_REQUEST_TIMEOUT"
DEFAULT_MLFLOW_TIMEOUT_S = "10"
# How long the end of a sweep (or `orch report --mlflow`) waits for its trackers to log what is queued: tracker
# calls run on a thread of their own (io.tracking), so a slow or unanswering server never holds a trial; past
# this wait orch goes on and says what was not logged (`orch report --mlflow` catches up later).
TRACKING_WAIT_ENV_VAR = "ORCH_TRACKING_WAIT_S"
DEFAULT_TRACKING_WAIT_S = "300"
# The most pages of runs one MLflow search reads (1,000 runs a page), and the most time it takes: a server that
# hands out page tokens for ever must not hold the sweep.
MLFLOW_MAX_SEARCH_PAGES = 100
MLFLOW_SEARCH_S = 120.0
# The MLflow experiment a sweep's runs go to when its sweep file's tracking section names none (MLflow's own
# variable); unset: the sweep's name.
MLFLOW_EXPERIMENT_ENV_VAR = "MLFLOW_EXPERIMENT_NAME"

# orch's diagnostics (warnings, notes, errors; not a command's output) go through Python's logging, which the
# CLI shows on stderr at this level: DEBUG, INFO, WARNING or ERROR. -v (DEBUG) and -q (WARNING) override it.
LOG_LEVEL_ENV_VAR = "ORCH_LOG_LEVEL"
DEFAULT_LOG_LEVEL = "INFO"
# A file that also gets every diagnostic, DEBUG included, with its time and module; empty: none.
LOG_FILE_ENV_VAR = "ORCH_LOG_FILE"
DEFAULT_LOG_FILE = ""

# Where `orch cluster up` records what it made (one file per emulated cluster: its namespaces, links, qdiscs,
# processes), for `orch cluster down` after a driver was killed. Root's: under /run, emptied at boot with the
# namespaces themselves.
CLUSTER_STATE_DIR_ENV_VAR = "ORCH_CLUSTER_STATE_DIR"
DEFAULT_CLUSTER_STATE_DIR = "/run/orch-cluster"
