"""scripts/patch_torch_ccl.py on the real torch-ccl tag: every change finds its text exactly once, and a tree
that is not that tag is refused with every mismatch named.

The source is not in this repository (it is intel's code): these tests read the tag from the git repository
that TORCH_CCL_SRC names (a clone of intel/torch-ccl, bare or not), as scripts/build_torch_ccl.sh does, and
skip, saying so, where there is none. The build itself applies the same patches to the same tag."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = (REPO / "scripts" / "build_torch_ccl.sh").read_text()
TAG = re.search(r'^TAG="([^"]+)"$', SCRIPT, flags=re.M).group(1)
COMMIT = re.search(r"^COMMIT=(\w+)$", SCRIPT, flags=re.M).group(1)
_spec = importlib.util.spec_from_file_location("patch_torch_ccl", REPO / "scripts" / "patch_torch_ccl.py")
patch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(patch)


def tag_texts() -> dict[str, str]:
    src = os.environ.get("TORCH_CCL_SRC")
    if not src:
        pytest.skip("needs the torch-ccl source: TORCH_CCL_SRC=<a clone of intel/torch-ccl> (not kept here)")
    git = ["git", "-C", src]
    if subprocess.run([*git, "rev-parse", f"{TAG}^{{commit}}"], capture_output=True, text=True).stdout.strip() != COMMIT:
        git = ["git", f"--git-dir={src}"]
    found = subprocess.run([*git, "rev-parse", f"{TAG}^{{commit}}"], capture_output=True, text=True).stdout.strip()
    assert found == COMMIT, f"TORCH_CCL_SRC={src} has no tag {TAG} at {COMMIT}"
    return {name: subprocess.run([*git, "show", f"{TAG}:{name}"], capture_output=True, text=True, check=True).stdout
            for name in ("CMakeLists.txt", "setup.py", "version.txt")}


def test_the_tag_is_patched_for_a_cpu_only_build_with_capped_jobs():
    out = patch.patched(tag_texts(), "2.8.0+cpu")
    assert "find_package(Torch" not in out["CMakeLists.txt"] and "$ENV{TORCH_DIR}/lib/libtorch_cpu.so" in out["CMakeLists.txt"]
    assert "find_package(MPI" not in out["CMakeLists.txt"]
    assert "libccl.so" in out["CMakeLists.txt"]          # oneCCL is still linked, from CCL_ROOT
    assert "os.environ.get('MAX_JOBS', '2')" in out["setup.py"] and "os.cpu_count()" not in out["setup.py"]
    assert out["version.txt"] == "2.8.0+cpu\n"


def test_a_tree_that_is_not_the_tag_is_refused_naming_every_mismatch():
    texts = tag_texts()
    texts["CMakeLists.txt"] = texts["CMakeLists.txt"].replace("find_package(MPI REQUIRED)", "find_package(MPI)")
    texts["setup.py"] = texts["setup.py"].replace("os.cpu_count()", "8")
    with pytest.raises(ValueError, match=r"(?s)CMakeLists.txt: expected the text 'find_package\(MPI REQUIRED\)'\.\.\. once, "
                                         r"found it 0 times.*setup.py: expected the text"):
        patch.patched(texts, "2.8.0+cpu")
