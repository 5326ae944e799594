"""Fail when a function or method is longer than the project's limit (style: small functions).

ruff has no line-count rule (its PLR0915 counts statements), so this walks the syntax tree: a function's
length is from its `def` line (decorators excluded) to its last line, docstring and comments included.

    python scripts/function_lengths.py [--max-lines 60] PATH...
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

MAX_LINES = 60


def long_functions(path: Path, max_lines: int) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > max_lines:
                found.append(f"{path}:{node.lineno}: {node.name} is {lines} lines (limit {max_lines})")
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=MAX_LINES)
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    files = [f for p in args.paths for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p])]
    found = [line for f in files for line in long_functions(f, args.max_lines)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
