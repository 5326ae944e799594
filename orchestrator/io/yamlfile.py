"""Read YAML files for users: syntax errors with their line, duplicate keys rejected, and a map from key
path to line so that every later problem can point at its line too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from orchestrator.core.schema import InvalidInput, Problem


def _walk(node: yaml.Node, path: str, lines: dict[str, int], problems: list[Problem]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            sub = f"{path}.{key}" if path else key
            if key in seen:
                problems.append(Problem(sub, "duplicate key (YAML would silently keep the last one)",
                                        key_node.start_mark.line + 1))
            seen.add(key)
            lines[sub] = key_node.start_mark.line + 1
            _walk(value_node, sub, lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            sub = f"{path}[{i}]"
            lines[sub] = item.start_mark.line + 1
            _walk(item, sub, lines, problems)


def read_yaml(path: str | Path, what: str) -> tuple[Any, dict[str, int]]:
    """Parse a YAML (or JSON) file. Raises InvalidInput for a missing, unreadable, empty or malformed file.

    Returns (data, lines) where lines maps key paths such as 'grid.ranks[1]' to 1-based line numbers.
    """
    file = Path(path)
    source = f"{what} {file}"
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(source, [Problem("", "file not found")]) from None
    except IsADirectoryError:
        raise InvalidInput(source, [Problem("", "is a directory, not a file")]) from None
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidInput(source, [Problem("", f"cannot be read: {err}")]) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark else None
        raise InvalidInput(source, [Problem("", f"YAML syntax error: {err.problem or err}", line)]) from None
    except yaml.YAMLError as err:
        raise InvalidInput(source, [Problem("", f"YAML error: {err}")]) from None
    if node is None or data is None:
        raise InvalidInput(source, [Problem("", "the file is empty")])
    lines: dict[str, int] = {}
    problems: list[Problem] = []
    _walk(node, "", lines, problems)
    if problems:
        raise InvalidInput(source, problems)
    return data, lines


def with_lines(problems: list[Problem], lines: dict[str, int]) -> list[Problem]:
    """Attach line numbers to problems whose path (or nearest parent path) appears in the file."""
    out = []
    for p in problems:
        path, line = p.path, None
        while path and line is None:
            line = lines.get(path)
            if line is None:
                path = path.rsplit("[", 1)[0] if path.endswith("]") else path.rpartition(".")[0]
        out.append(Problem(p.path, p.message, p.line if p.line is not None else line))
    return out
