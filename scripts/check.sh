#!/usr/bin/env bash
# The code-health gate, one command: lint (ruff), types (mypy, strict on orchestrator/core), layering
# (import-linter's contracts in pyproject.toml) and function length. Exits non-zero on any violation.
# Configuration lives in pyproject.toml; .ci/run calls this after setup and before the tests.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
status=0
run() {
  echo "check: $*" >&2
  "$@" || status=1
}
run "$bin/ruff" check orch orchestrator workloads tests benchmarks scripts examples
run "$bin/mypy"
run "$bin/lint-imports"
run "$bin/python" scripts/function_lengths.py orch orchestrator workloads benchmarks scripts
if [ "$status" -ne 0 ]; then
  echo "check: FAILED (see above)" >&2
else
  echo "check: all passed" >&2
fi
exit "$status"
