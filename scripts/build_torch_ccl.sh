#!/usr/bin/env bash
# Build oneCCL's PyTorch bindings (oneccl_bindings_for_pytorch) from intel/torch-ccl's source, CPU only,
# against .venv-ipex's torch 2.8 and the registry's CPU-only oneCCL, and install the wheel into .venv-ipex.
# Called by `bash scripts/setup.sh --ipex --ccl`; it can be run alone once .venv-ipex exists:
#
#   TORCH_CCL_SRC=/path/to/torch-ccl bash scripts/build_torch_ccl.sh
#
# What is pinned (each torch-ccl tag supports exactly one torch release; the project is deprecated upstream):
# - source: intel/torch-ccl tag v2.8.0+xpu, commit 3b4b1dc3 (the tag for torch 2.8; no v2.8 "+cpu" tag
#   exists). TORCH_CCL_SRC names a git repository holding that tag (bare or not; the tag is checked against
#   the commit) or a plain source tree (not checkable: said so); without it the tag is cloned from GitHub and
#   checked. The source is not kept in this repository (it is intel's code, not ours). Without GitHub access
#   and without TORCH_CCL_SRC, a wheel built earlier on this machine (the cache below) is still installed; with
#   neither, the script exits 3, which .ci/run reports as "ccl tests not run" with the reason.
# - oneCCL: oneccl-cpu(-devel) 2022.1.2 + impi-rt 2021.18.1, the newest CPU-only set whose dependencies the
#   registry has (2022.2.0 wants libfabric>=2.6); no SYCL runtime. Its libccl.so.1 names a library
#   "libccl.so.2" that no package ships; the only symbols it lacks are Intel's compiler runtime
#   (_intel_fast_memcpy, __intel_cpu_features_init_x), so libintlc.so.5 of intel-cmplr-lib-rt 2025.2.1 is
#   shipped in the wheel under that name.
# Changes made to a scratch copy of the source (nothing of it enters this repository):
# - torch's CMake config (the registry's torch 2.8.0 is the CUDA build) insists on a CUDA toolkit: torch's
#   CPU headers and libraries are named directly instead;
# - find_package(MPI) is dropped: the bindings call no MPI function (oneCCL loads libmpi itself at run
#   time), and the registry has no MPI compiler wrapper for CMake to find;
# - `make -j<all CPUs>` becomes `make -j$MAX_JOBS` (default 2), and version.txt says +cpu.
# The build has a time limit (TORCH_CCL_BUILD_TIMEOUT_S, default 1800 s) and logs its wall time. The wheel
# is installed only after it built and a one-rank ccl all-reduce ran in a fresh process; if that check
# fails, the wheel is uninstalled again. Built wheels are kept in TORCH_CCL_CACHE (default
# ~/.cache/orch/torch-ccl), keyed by everything pinned above: a second run installs the cached wheel.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG="v2.8.0+xpu"
COMMIT=3b4b1dc338e5b5cd67a58d9041fc9bbfce8fbaf3
UPSTREAM=https://github.com/intel/torch-ccl
ONECCL_PINS="oneccl-cpu==2022.1.2 oneccl-cpu-devel==2022.1.2 impi-rt==2021.18.1 intel-cmplr-lib-rt==2025.2.1"
BUILD_TOOLS="wheel==0.45.1"  # setup.py bdist_wheel; .venv-ipex's setuptools 65 has no bdist_wheel of its own
WHEEL_VERSION="2.8.0+cpu"
venv=$(pwd)/.venv-ipex
say() { echo "build_torch_ccl: $*" >&2; }
die() { say "$*"; exit 1; }

[ -x "$venv/bin/python" ] || { say "run 'bash scripts/setup.sh --ipex' first (no $venv)"; exit 2; }
torch_version=$("$venv/bin/python" -c "import torch; print(torch.__version__.split('+')[0])")
case "$torch_version" in 2.8.*) ;; *) say "$TAG needs torch 2.8, $venv has $torch_version"; exit 2 ;; esac
command -v make >/dev/null && command -v cmake >/dev/null && command -v g++ >/dev/null \
  || { say "needs make, cmake and g++ (apt-get install build-essential cmake)"; exit 2; }

say "installing $ONECCL_PINS $BUILD_TOOLS into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check $ONECCL_PINS $BUILD_TOOLS

# The cache key: the source commit, the oneCCL pins, torch, the compiler and the patches made to the source.
key=$( { echo "$COMMIT $ONECCL_PINS $WHEEL_VERSION torch-$torch_version"; g++ --version | head -1;
         cat scripts/patch_torch_ccl.py; } \
       | sha256sum | cut -c1-16)
cache=${TORCH_CCL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orch/torch-ccl}/$key
check_installed() {  # a fresh process: import, the backend registered, a one-rank all-reduce
  "$venv/bin/python" - <<'PY'
import os, tempfile, torch, torch.distributed as dist, oneccl_bindings_for_pytorch as ccl
assert dist.is_backend_available("ccl"), "the ccl backend is not registered"
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29577", CCL_ATL_TRANSPORT="ofi")
dist.init_process_group("ccl", rank=0, world_size=1)
t = torch.ones(4)
dist.all_reduce(t)
dist.destroy_process_group()
print(f"build_torch_ccl: ready: oneccl_bindings_for_pytorch {ccl.__version__}, a 1-rank ccl all-reduce ran")
PY
}
install_wheel() {
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$1"
  check_installed || { "$venv/bin/python" -m pip uninstall --quiet -y oneccl-bind-pt; rm -rf "$cache";
                       die "the wheel $1 installed but failed its check; uninstalled it, and removed it from $cache"; }
}
if compgen -G "$cache/*.whl" >/dev/null; then
  say "installing the cached wheel $(ls "$cache"/*.whl) (remove $cache to rebuild)"
  install_wheel "$(ls "$cache"/*.whl)"
  exit 0
fi

work=$(mktemp -d /tmp/torch-ccl-build.XXXXXX)
log=$work/build.log
fetch_source() {  # into $work/src, from TORCH_CCL_SRC or a clone of the pinned tag, checked where possible
  local src=${TORCH_CCL_SRC:-}
  mkdir "$work/src"
  if [ -z "$src" ]; then
    say "cloning $UPSTREAM at $TAG (set TORCH_CCL_SRC to use a copy you have)"
    timeout 300 git clone --quiet --depth 1 --branch "$TAG" "$UPSTREAM" "$work/clone" 2>>"$log" || {
      rm -rf "$work"; say "no torch-ccl source: cloning $UPSTREAM failed (no access to GitHub?) and TORCH_CCL_SRC is"
      say "not set; no wheel is cached in $cache either. Nothing was built or installed."; exit 3; }
    src=$work/clone
  fi
  if git --git-dir="$src" rev-parse --git-dir >/dev/null 2>&1 || git -C "$src" rev-parse >/dev/null 2>&1; then
    local gd; gd=$(git -C "$src" rev-parse --absolute-git-dir 2>/dev/null || echo "$src")
    [ "$(git --git-dir="$gd" rev-parse "$TAG^{commit}" 2>/dev/null)" = "$COMMIT" ] \
      || die "$src has no tag $TAG at commit $COMMIT"
    git --git-dir="$gd" archive "$TAG" | tar -x -C "$work/src"
  else
    [ -f "$src/setup.py" ] && [ -f "$src/CMakeLists.txt" ] || die "$src is not a torch-ccl source tree"
    say "note: $src is a plain tree: it cannot be checked against $TAG ($COMMIT)"
    cp -r "$src/." "$work/src/"
  fi
}
fetch_source
"$venv/bin/python" scripts/patch_torch_ccl.py "$work/src" "$WHEEL_VERSION" || die "patching failed (see above)"
# The name libccl.so.1 asks for (see the header), next to the bindings' library: $ORIGIN is on its rpath.
mkdir -p "$work/src/oneccl_bindings_for_pytorch/lib"
cp "$venv/lib/libintlc.so.5" "$work/src/oneccl_bindings_for_pytorch/lib/libccl.so.2"

export PATH="$venv/bin:$PATH" CCL_ROOT="$venv" USE_SYSTEM_ONECCL=ON MAX_JOBS=${MAX_JOBS:-2}
TORCH_DIR=$("$venv/bin/python" -c "import os, torch; print(os.path.dirname(torch.__file__))" 2>/dev/null)
PYTHON_INCLUDE_DIR=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
export TORCH_DIR PYTHON_INCLUDE_DIR
say "building $TAG in $work/src with make -j$MAX_JOBS (log: $log; load before: $(cut -d' ' -f1-3 /proc/loadavg))"
start_s=$(date +%s)
limit_s=${TORCH_CCL_BUILD_TIMEOUT_S:-1800}
(cd "$work/src" && timeout "$limit_s" "$venv/bin/python" setup.py bdist_wheel >"$log" 2>&1) || {
  rc=$?; why="exit status $rc"; [ "$rc" = 124 ] && why="time limit of $limit_s s reached (TORCH_CCL_BUILD_TIMEOUT_S)"
  say "build FAILED after $(( $(date +%s) - start_s )) s ($why); the end of $log:"; tail -30 "$log" >&2
  die "build failed ($why); the bindings were not installed; full log: $log (kept)"; }
say "built in $(( $(date +%s) - start_s )) s wall (load after: $(cut -d' ' -f1-3 /proc/loadavg))"
mkdir -p "$cache"
cp "$work"/src/dist/*.whl "$log" "$cache/"
install_wheel "$(ls "$cache"/*.whl)"
rm -rf "$work"
