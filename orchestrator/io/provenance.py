"""Where a saved prediction came from: the commit of orch's own checkout and the SHA-256 of the files it read.

A later score holds a prediction to account by these: the commit names the code that made it (the ledger checks
that it precedes the measurement's), the hashes name the data (a folder that changed since is not the folder the
prediction was made from)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

# The files of a results folder a prediction reads; the report and logs are derived from them.
RESULTS_FILES = ("spec.json", "topology.json", "environment.json", "trials.jsonl")
GIT_TIMEOUT_S = 10.0
# What counts as code for "the checkout had uncommitted changes": a data file (a results folder, a lock) does not.
CODE_PATHS = ("*.py", "pyproject.toml")
_HASH_CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def folder_hashes(folder: Path, names: tuple[str, ...] = RESULTS_FILES) -> dict[str, str]:
    """name -> SHA-256 of each of `names` present in `folder` (a regular file, not a link)."""
    out = {}
    for name in names:
        path = folder / name
        if path.is_file() and not path.is_symlink():
            out[name] = sha256_of(path)
    return out


def code_commit() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout orch runs from; (None, None) where it is not one or git is missing.
    Dirty means uncommitted changes to tracked code (`CODE_PATHS`: results folders and lock files do not count)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None, None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
                                 *CODE_PATHS], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (head or None), bool(status.strip())
