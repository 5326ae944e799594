#!/usr/bin/env bash
# Build oneCCL's PyTorch bindings (oneccl_bindings_for_pytorch) from a torch-ccl source tree you supply,
# against .venv-ipex's torch 2.8, linking the registry's oneCCL runtime and headers (pip packages oneccl,
# oneccl-devel, impi-rt, impi-devel) instead of building oneCCL, and install the wheel into .venv-ipex.
#
#   bash scripts/setup.sh --ipex
#   bash scripts/build_torch_ccl.sh /path/to/torch-ccl      # a checkout of intel/torch-ccl, tag v2.8.0+xpu
#
# The source is copied to a scratch folder and built there; nothing of it enters this repository. Two
# changes are made to the copy, both because of where the pieces come from here:
# - the registry's torch 2.8.0 is the CUDA build, whose CMake config (find_package(Torch)) insists on a CUDA
#   toolkit; the bindings need only torch's CPU headers and libraries, so they are named directly;
# - USE_SYSTEM_ONECCL=ON with CCL_ROOT and MPI_HOME pointing at the venv, where the pip packages put
#   include/oneapi/ccl.hpp, lib/libccl.so, include/mpi.h and lib/libmpi.so.
# The compile runs under `nice -n 19` and a time limit (TORCH_CCL_BUILD_TIMEOUT_S, default 2400 s).
set -euo pipefail
cd "$(dirname "$0")/.."

src=${1:?usage: bash scripts/build_torch_ccl.sh /path/to/torch-ccl (a checkout of intel/torch-ccl)}
[ -f "$src/setup.py" ] && [ -f "$src/CMakeLists.txt" ] || { echo "build_torch_ccl: $src is not a torch-ccl tree" >&2; exit 2; }
venv=$(pwd)/.venv-ipex
[ -x "$venv/bin/python" ] || { echo "build_torch_ccl: run 'bash scripts/setup.sh --ipex' first" >&2; exit 2; }
# intel-sycl-rt below 2026: libccl.so.1 of oneccl 2021.16.1 needs libsycl.so.8, and 2026.x ships libsycl.so.9.
ONECCL_PINS="oneccl==2021.16.1 oneccl-devel==2021.16.1 impi-rt==2021.16.1 impi-devel==2021.16.1 intel-sycl-rt<2026"

echo "build_torch_ccl: installing $ONECCL_PINS and cmake into $venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check $ONECCL_PINS cmake

work=$(mktemp -d /tmp/torch-ccl-build.XXXXXX)
cp -r "$src/." "$work/"
"$venv/bin/python" - "$work/CMakeLists.txt" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
old = ('find_package(Torch REQUIRED)\nlist(APPEND DEPENDS_LIB torch)\n'
       'set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} ${TORCH_CXX_FLAGS}")')
new = ('include_directories($ENV{TORCH_DIR}/include $ENV{TORCH_DIR}/include/torch/csrc/api/include '
       '$ENV{PYTHON_INCLUDE_DIR})\nlist(APPEND DEPENDS_LIB $ENV{TORCH_DIR}/lib/libtorch.so '
       '$ENV{TORCH_DIR}/lib/libtorch_cpu.so $ENV{TORCH_DIR}/lib/libc10.so)\n'
       'set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -D_GLIBCXX_USE_CXX11_ABI=1")')
if old not in text:
    sys.exit(f"build_torch_ccl: {path} has no find_package(Torch) block to replace; is this torch-ccl 2.x?")
open(path, "w").write(text.replace(old, new))
PY

export PATH="$venv/bin:$PATH" CCL_ROOT="$venv" MPI_HOME="$venv" I_MPI_ROOT="$venv" USE_SYSTEM_ONECCL=ON
TORCH_DIR=$("$venv/bin/python" -c "import os, torch; print(os.path.dirname(torch.__file__))" 2>/dev/null)
PYTHON_INCLUDE_DIR=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
export TORCH_DIR PYTHON_INCLUDE_DIR
echo "build_torch_ccl: building in $work (log: $work/build.log)" >&2
(cd "$work" && timeout "${TORCH_CCL_BUILD_TIMEOUT_S:-2400}" nice -n 19 "$venv/bin/python" setup.py bdist_wheel \
  >"$work/build.log" 2>&1) || { echo "build_torch_ccl: build failed; the end of $work/build.log:" >&2;
                                tail -30 "$work/build.log" >&2; exit 1; }
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$work"/dist/*.whl
"$venv/bin/python" -c "import torch, oneccl_bindings_for_pytorch as ccl; \
print('build_torch_ccl: ready:', ccl.__version__, 'ccl backend:', torch.distributed.is_backend_available('ccl'))"
