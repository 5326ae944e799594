"""scripts/patch_torch_ccl.py on the torch-ccl source kept in third_party/: every change finds its text
exactly once in the real tag, and a tree that is not that tag is refused with every mismatch named."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = REPO / "third_party" / "torch-ccl" / "torch-ccl-v2.8.0+xpu.tar.gz"
_spec = importlib.util.spec_from_file_location("patch_torch_ccl", REPO / "scripts" / "patch_torch_ccl.py")
patch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(patch)


def tag_texts() -> dict[str, str]:
    with tarfile.open(ARCHIVE) as tar:
        return {name: tar.extractfile(name).read().decode() for name in ("CMakeLists.txt", "setup.py", "version.txt")}


def test_the_kept_archive_is_the_one_the_build_script_pins():
    script = (REPO / "scripts" / "build_torch_ccl.sh").read_text()
    pinned = re.search(r"^ARCHIVE_SHA256=(\w+)$", script, flags=re.M).group(1)
    assert hashlib.sha256(ARCHIVE.read_bytes()).hexdigest() == pinned


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
