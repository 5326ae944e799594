"""The one rule for the names orch turns into paths: a sweep's name (its results folder), a trial's key (its log
files), a profile variant's name (its folder), a workload's own name (report and cache files). Each is one plain
file name, so that none of them can step outside its folder ('..', '/')."""

from __future__ import annotations

import re

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# A workload's name may also be an import path (`pkg.mod:attr`): still one file name, never a path.
_WORKLOAD_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
MAX_NAME_CHARS = 100         # a file name's component is at most 255 bytes; a name is often one part of one


def name_problem(name: object, what: str, *, workload: bool = False) -> str | None:
    """Why `name` cannot name a file or folder of orch's, or None: names that become paths (a sweep's results
    folder, a profile variant's folder, a report file named after the workload) are one plain file name each:
    letters, digits, '.', '_' or '-' (and ':' in a workload's import path), starting with a letter or a digit, at
    most MAX_NAME_CHARS long, so that none of them can step outside its folder ('..', '/').

    >>> name_problem("retinanet-table3", "name") is None, name_problem("pkg.mod:attr", "workload", workload=True)
    (True, None)
    >>> name_problem("../../x", "profile.variants")
    "profile.variants: '../../x' must be letters, digits, '.', '_' or '-', starting with a letter or a digit"
    """
    pattern, allowed = (_WORKLOAD_NAME_RE, "'.', '_', '-' or ':'") if workload else (NAME_RE, "'.', '_' or '-'")
    if not isinstance(name, str):
        return f"{what}: {name!r} must be a string"
    if len(name) > MAX_NAME_CHARS:
        return f"{what}: {name[:20]!r}... is {len(name)} characters long, more than {MAX_NAME_CHARS}"
    if not pattern.match(name):
        return f"{what}: {name!r} must be letters, digits, {allowed}, starting with a letter or a digit"
    return None
