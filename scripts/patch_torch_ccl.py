"""Patch a scratch copy of intel/torch-ccl v2.8.0+xpu so it builds CPU-only against pip-installed pieces.

Used by scripts/build_torch_ccl.sh (whose header says why each change is made):

    python scripts/patch_torch_ccl.py /tmp/torch-ccl-build.X/src 2.8.0+cpu

Every replacement must find its text exactly once; otherwise the tree is not the tag this was written for
and the script exits 1 naming the file and the text it did not find, before anything is changed.
"""

from __future__ import annotations

import sys
from pathlib import Path

TORCH_FIND = (
    "find_package(Torch REQUIRED)\nlist(APPEND DEPENDS_LIB torch)\n"
    'set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} ${TORCH_CXX_FLAGS}")'
)
TORCH_DIRECT = (
    "include_directories($ENV{TORCH_DIR}/include $ENV{TORCH_DIR}/include/torch/csrc/api/include "
    "$ENV{PYTHON_INCLUDE_DIR})\nlist(APPEND DEPENDS_LIB $ENV{TORCH_DIR}/lib/libtorch.so "
    "$ENV{TORCH_DIR}/lib/libtorch_cpu.so $ENV{TORCH_DIR}/lib/libc10.so)\n"
    'set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -D_GLIBCXX_USE_CXX11_ABI=1")'
)
MPI_FIND = "    find_package(MPI REQUIRED)\n    list(APPEND DEPENDS_LIB ${MPI_LIBRARIES})\n"
MAKE_JOBS = "build_args = ['-j', str(os.cpu_count())]"
MAKE_JOBS_CAPPED = "build_args = ['-j', os.environ.get('MAX_JOBS', '2')]"

# (file, old, new): the whole patch, as data.
REPLACEMENTS: tuple[tuple[str, str, str], ...] = (
    ("CMakeLists.txt", TORCH_FIND, TORCH_DIRECT),
    ("CMakeLists.txt", MPI_FIND, ""),
    ("setup.py", MAKE_JOBS, MAKE_JOBS_CAPPED),
)


def patched(texts: dict[str, str], version: str) -> dict[str, str]:
    """The files' new texts; raises ValueError naming every replacement that does not match exactly once."""
    out = dict(texts)
    problems = []
    for name, old, new in REPLACEMENTS:
        count = out[name].count(old)
        if count != 1:
            first_line = old.splitlines()[0].strip()
            problems.append(f"{name}: expected the text {first_line!r}... once, found it {count} times")
            continue
        out[name] = out[name].replace(old, new)
    if problems:
        raise ValueError("not the torch-ccl tree this patch is for (v2.8.0+xpu):\n  " + "\n  ".join(problems))
    out["version.txt"] = version + "\n"
    return out


def main(argv: list[str]) -> int:
    root, version = Path(argv[0]), argv[1]
    names = {name for name, _, _ in REPLACEMENTS} | {"version.txt"}
    try:
        new = patched({name: (root / name).read_text() for name in names}, version)
    except (OSError, ValueError) as error:
        print(f"patch_torch_ccl: {error}", file=sys.stderr)
        return 1
    for name, text in new.items():
        (root / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
