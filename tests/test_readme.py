"""The README is part of the product: its two opening commands, its schema tables and its command
reference must match the code."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from orchestrator.cli import build_parser
from orchestrator.core.spec import schema_markdown

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_readme_opens_with_exactly_the_two_commands_and_ci_runs_the_test_one():
    blocks = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    assert blocks[:2] == ["bash scripts/setup.sh && .venv/bin/orch sweep sweeps/retinanet.yaml",
                          "bash scripts/setup.sh --dev && .venv/bin/python -m pytest"]
    before_first_prose = README.split("\n---\n")[0]
    assert before_first_prose.count("```bash") == 2
    assert blocks[1] in (REPO / ".ci" / "run").read_text()


def test_schema_tables_are_generated_from_the_spec_dataclasses():
    block = README.split("<!-- schema:begin")[1].split("-->", 1)[1].split("<!-- schema:end -->")[0]
    assert block.strip() == schema_markdown().strip(), \
        "README schema is stale: paste orchestrator.core.spec.schema_markdown() between the markers"


def test_every_subcommand_and_option_is_documented():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        assert f"### `orch {name}" in README, f"no README section for orch {name}"
        section = README.split(f"### `orch {name}")[1].split("\n### ")[0]
        for action in command._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section or f"[{flag}" in section, f"orch {name} {flag} is not documented"


def test_every_shipped_sweep_and_topology_is_mentioned():
    for path in list((REPO / "sweeps").glob("*.yaml")) + list((REPO / "sweeps" / "topologies").glob("*.yaml")):
        assert path.name in README, f"{path.name} is not mentioned in the README"
