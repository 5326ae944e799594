"""docs/commands.md's usage blocks, generated from the parser: each command's usage line and its examples (the end
of its `--help`), so the page cannot drift from what the commands take (tests/cli/test_conventions.py checks it).

    python -m orchestrator.cli.reference docs/commands.md    # rewrite every block between its markers
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from orchestrator.cli import build_parser

WIDTH = 100
BLOCK = re.compile(r"(<!-- usage: (?P<name>[a-z ]+) -->\n)(?P<body>.*?)(<!-- /usage -->)", re.S)


def commands(parser: argparse.ArgumentParser | None = None) -> dict[str, argparse.ArgumentParser]:
    """Every command by its name ('sweep', 'cluster up', ...), the groups of actions too ('cluster')."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(prefix: str, node: argparse.ArgumentParser) -> None:
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found[f"{prefix}{name}"] = child
                    walk(f"{prefix}{name} ", child)

    walk("", parser or build_parser())
    return found


def usage_block(name: str, parser: argparse.ArgumentParser | None = None) -> str:
    """The command's usage line(s) at a fixed width, then its examples, as a Markdown code block."""
    command = commands(parser)[name]
    formatter = argparse.HelpFormatter(prog=command.prog, width=WIDTH)
    formatter.add_usage(command.usage, command._actions, command._mutually_exclusive_groups)
    text = formatter.format_help().rstrip()
    if command.epilog:
        text += "\n\n" + command.epilog.rstrip()
    return f"```text\n{text}\n```\n"


def rewrite(page: str) -> str:
    """`page` with each usage block regenerated."""
    parser = build_parser()
    return BLOCK.sub(lambda m: m[1] + usage_block(m["name"], parser) + m[4], page)


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "docs/commands.md")
    path.write_text(rewrite(path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
