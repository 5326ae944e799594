#!/usr/bin/env bash
# Set up orch on a fresh machine: a virtual environment in .venv with orch and its pinned dependencies
# (torch and torchvision as a matching pair), plus numactl when the system package manager allows it.
# Idempotent: a second run only checks. `--dev` adds the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
[ "${1:-}" = "--dev" ] && extras="[dev]"

# numactl binds each rank's memory to its socket's NUMA node; without it ranks are pinned with taskset.
if ! command -v numactl >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing numactl" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq numactl >/dev/null) \
      || echo "setup: warning: numactl could not be installed; ranks will be pinned with taskset" >&2
  else
    echo "setup: note: numactl not found (install it to bind rank memory to NUMA nodes)" >&2
  fi
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($python --version)" >&2
  "$python" -m venv .venv
fi
echo "setup: installing orch${extras} and its dependencies into .venv (torch is large: the first run takes minutes)" >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extras}"
echo "setup: ready: $(.venv/bin/orch --version)" >&2
