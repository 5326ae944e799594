#!/usr/bin/env bash
# Set up orch on a fresh machine: a virtual environment in .venv with orch and its pinned dependencies
# (torch and torchvision as a matching pair), plus numactl when the system package manager allows it.
# Idempotent: a second run only checks. `--hf` adds Hugging Face transformers (the `mlm` workload's extra, `hf`);
# `--dev` adds the test tools and everything the tests need (`hf` too; in .venv also `notebook`, `tracking` and
# `test-tracking`: pandas for the Python API, MLflow and TensorBoard, MLflow's server for the tests). `--ipex`
# sets up the optional Intel stack instead, in .venv-ipex (see ipex_env below); .venv is left as it is. `--ccl`
# (implies --ipex) then
# builds oneCCL's PyTorch bindings from source into .venv-ipex (scripts/build_torch_ccl.sh says what it pins;
# minutes on two cores, once: the wheel is cached).
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
hf=0
ipex=0
ccl=0
for arg in "$@"; do
  case "$arg" in
    --dev) dev=1; hf=1 ;;
    --hf) hf=1 ;;
    --ipex) ipex=1 ;;
    --ccl) ipex=1; ccl=1 ;;
    *) echo "setup: unknown option '$arg' (valid: --dev, --hf, --ipex, --ccl)" >&2; exit 2 ;;
  esac
done
# pyproject.toml's optional extras, as pip spells them: "", "[hf]" or "[dev,hf]".
names=()
[ "$dev" = 1 ] && names+=(dev)
[ "$hf" = 1 ] && names+=(hf)
extras=""
if [ "${#names[@]}" -gt 0 ]; then
  extras="[$(IFS=,; echo "${names[*]}")]"
fi
# .venv's tests also use what the IPEX venv's do not need: the notebook API's pandas, MLflow (its server too:
# the tests start one) and TensorBoard.
venv_extras=$extras
if [ "$dev" = 1 ]; then
  venv_extras="[$(IFS=,; echo "${names[*]},notebook,tracking,test-tracking")]"
fi

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

# The Intel stack: Intel Extension for PyTorch 2.8 imports only with torch 2.8.x, and torchvision 0.23.0 is
# the torchvision built for torch 2.8.0. pyproject.toml pins the main pair (torch 2.14.1), so this venv gets
# orch's other dependencies read from pyproject.toml (one source of truth) with the torch pair swapped, and
# then orch itself with --no-deps, which keeps pip from "fixing" torch back to 2.14.1. Without the `hf` extra:
# IPEX 2.8 imports transformers when it is installed, and its own model code names classes that transformers 5
# (the mlm workload's) removed, so `import intel_extension_for_pytorch` fails (NameError MoeModelOutputWithPast).
# The mlm workload runs in .venv; nothing the Intel stack's tests run needs it.
IPEX_PINS="torch==2.8.0 torchvision==0.23.0 intel-extension-for-pytorch==2.8.0"
ipex_env() {
  local venv=.venv-ipex requirements
  if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv with $($python --version)" >&2
    "$python" -m venv "$venv"
  fi
  requirements=$(mktemp)
  trap 'rm -f "$requirements"' RETURN
  "$venv/bin/python" - "$extras" "$IPEX_PINS" >"$requirements" <<'PY'
import sys, tomllib
extras, pins = sys.argv[1].strip("[]").split(",") if sys.argv[1] else [], sys.argv[2].split()
extras = [name for name in extras if name != "hf"]   # IPEX 2.8 cannot import beside transformers 5 (above)
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = project["dependencies"] + [d for name in extras for d in project["optional-dependencies"][name]]
swapped = {pin.split("==")[0] for pin in pins}
print("\n".join([d for d in deps if d.split("=")[0].split(">")[0].strip() not in swapped] + pins))
PY
  echo "setup: installing $IPEX_PINS and orch's other dependencies into $venv (the first run downloads ~4 GB)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e .
  if "$venv/bin/python" -m pip show --quiet transformers >/dev/null 2>&1; then   # an older setup put it there
    echo "setup: removing transformers from $venv: IPEX 2.8 does not import beside it" >&2
    "$venv/bin/python" -m pip uninstall --quiet --disable-pip-version-check -y transformers
  fi
  "$venv/bin/python" -c "import torch, intel_extension_for_pytorch as ipex; \
print(f'setup: ready: $venv: torch {torch.__version__}, intel_extension_for_pytorch {ipex.__version__}')" >&2
}

if [ "$ipex" = 1 ]; then
  ipex_env
  if [ "$ccl" = 1 ]; then
    bash scripts/build_torch_ccl.sh
  fi
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($python --version)" >&2
  "$python" -m venv .venv
fi
echo "setup: installing orch${venv_extras} and its dependencies into .venv (torch is large: the first run takes minutes)" >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${venv_extras}"
echo "setup: ready: $(.venv/bin/orch --version)" >&2
