"""Read YAML files for users: syntax errors with their line, duplicate keys rejected, and a map from key
path to line so that every later problem can point at its line too."""

from __future__ import annotations

from pathlib import Path

import yaml

from orchestrator.core.json.schema import InvalidInput, Problem
from orchestrator.errors import InputError
from orchestrator.io.files import MAX_YAML_BYTES, UnreadableFile, read_input_text

# YAML aliases let a small file stand for a huge or endless document (an anchor used inside itself, or the
# "billion laughs" of nested aliases); refuse such files before anything walks them.
MAX_ALIAS_EXPANSION = 100_000  # values that aliases may add to a document once expanded


class _RecursiveAlias(InputError):
    def __init__(self, node: yaml.Node):
        self.node = node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """Values in `node` with every alias expanded, counted without expanding (memoized by node identity)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise _RecursiveAlias(node)
    open_.add(key)
    total = 1 + sum(_expanded_size(child, sizes, open_) for child in _children(node))
    open_.discard(key)
    sizes[key] = total
    return total


def _alias_problems(root: yaml.Node) -> list[Problem]:
    sizes: dict[int, int] = {}
    try:
        expanded = _expanded_size(root, sizes, set())
    except _RecursiveAlias as err:
        return [Problem("", "a YAML alias refers to its own anchor (a recursive structure has no end)",
                        err.node.start_mark.line + 1)]
    if expanded - len(sizes) > MAX_ALIAS_EXPANSION:
        return [Problem("", f"YAML aliases expand the file from {len(sizes):,} to {expanded:,} values, more than "
                            f"the {MAX_ALIAS_EXPANSION:,} extra values allowed")]
    return []


def _walk(node: yaml.Node, path: str, lines: dict[str, int], problems: list[Problem],
          raw: dict[str, str] | None = None) -> None:
    if raw is not None and isinstance(node, yaml.ScalarNode) and node.style is None:
        raw[path] = node.value   # a plain scalar as written: `010`, not the 8 YAML 1.1 makes of it
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
            _walk(value_node, sub, lines, problems, raw)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            sub = f"{path}[{i}]"
            lines[sub] = item.start_mark.line + 1
            _walk(item, sub, lines, problems, raw)


def read_yaml(path: str | Path, what: str, raw: dict[str, str] | None = None) -> tuple[object, dict[str, int]]:
    """Parse a YAML (or JSON) file. Raises InvalidInput for a missing, unreadable, empty, oversized or malformed
    file.

    Returns (data, lines) where lines maps key paths such as 'grid.ranks[1]' to 1-based line numbers; `raw`,
    when given, gets the text of every plain (unquoted) scalar by the same paths, as written.
    """
    file = Path(path)
    source = f"{what} {file}"
    try:  # missing, a folder, a FIFO or a device, too large, not UTF-8: each one line (io.files)
        text = read_input_text(file, MAX_YAML_BYTES)
    except UnreadableFile as err:
        raise InvalidInput(source, [Problem("", str(err))]) from None
    try:
        loader = yaml.SafeLoader(text)
        try:  # parse once: the node graph for checks and line numbers, then the data built from it
            node = loader.get_single_node()
            alias_problems = _alias_problems(node) if node is not None else []
            if alias_problems:
                raise InvalidInput(source, alias_problems)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except RecursionError:
        raise InvalidInput(source, [Problem("", "nested too deeply to read")]) from None
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
    _walk(node, "", lines, problems, raw)
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
