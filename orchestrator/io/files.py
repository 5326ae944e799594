"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: str | Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`: a crash, or a reader
    polling the file (the launcher reading a rank's status), sees the old content or the new, never a
    torn one. The rename is atomic on POSIX when both names are on one file system, as they are here."""
    tmp = f"{path}.tmp"
    Path(tmp).write_text(text)
    os.replace(tmp, path)
