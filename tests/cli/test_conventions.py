"""One convention for every command (docs/commands.md#every-command): a help of at most 200 characters per option,
every command's help ends with examples that run as written and a link to its section of docs/commands.md, whose
usage blocks are the parser's own; durations and rates are values with units, no visible flag carries a unit;
`--mlflow` never takes the next word; an old spelling still works, reads its value as it always did, and is
said once."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from orchestrator.app.options import PredictOptions, SweepOptions
from orchestrator.cli import build_parser, main
from orchestrator.cli.options import OLD_SPELLINGS, expand_equals, options_from
from orchestrator.cli.reference import BLOCK, commands, usage_block

REPO = Path(__file__).resolve().parents[2]
COMMANDS_PAGE = (REPO / "docs" / "commands.md").read_text()
HELP_MAX = 200
PARSER = build_parser()
EVERY = commands(PARSER)
LEAVES = {name: p for name, p in EVERY.items() if not any(isinstance(a, argparse._SubParsersAction)
                                                           for a in p._actions)}


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(expand_equals(argv))


@pytest.mark.parametrize("name", EVERY)
def test_every_help_text_is_short(name):
    for action in EVERY[name]._actions:
        if action.help not in (None, argparse.SUPPRESS):
            assert len(action.help) <= HELP_MAX, f"orch {name} {action.option_strings or action.dest}: " \
                                                 f"{len(action.help)} characters"
    subs = [a for a in PARSER._actions if isinstance(a, argparse._SubParsersAction)][0]
    for choice in subs._choices_actions:
        assert len(choice.help or "") <= HELP_MAX, choice.dest


@pytest.mark.parametrize("name", LEAVES)
def test_every_command_ends_its_help_with_examples_that_run_as_written(name):
    epilog = LEAVES[name].epilog or ""
    lines = epilog.splitlines()
    assert lines[0] == "examples:" and lines[-1].startswith("more: docs/commands.md#"), epilog
    anchor = lines[-1].split("#", 1)[1]
    assert f'<a id="{anchor}"></a>' in COMMANDS_PAGE
    examples = [line.strip() for line in lines[1:-1]]
    assert examples, f"orch {name}: no example"
    for example in examples:
        words = shlex.split(example)
        assert words[:1 + name.count(" ") + 1] == ["orch", *name.split()], example
        command = words[1:words.index("--")] if "--" in words else words[1:]
        parse(command)   # parses as written: no SystemExit
        for word in command:
            if word.startswith(("sweeps/", "results/")):
                assert (REPO / word).exists(), f"{example}: {word} does not exist"


@pytest.mark.parametrize("name", EVERY)
def test_docs_commands_usage_blocks_are_the_parsers(name):
    blocks = {m["name"]: m["body"] for m in BLOCK.finditer(COMMANDS_PAGE)}
    if name in LEAVES:
        assert blocks.get(name) == usage_block(name), \
            f"docs/commands.md's usage of orch {name} is stale: run python -m orchestrator.cli.reference"


@pytest.mark.parametrize("name", LEAVES)
def test_no_visible_flag_carries_a_unit(name):
    for action in LEAVES[name]._actions:
        if action.help == argparse.SUPPRESS:
            continue
        for flag in action.option_strings:
            assert not re.search(r"-(s|h|ms|mib|gib)$", flag) or flag == "-h", f"orch {name} {flag}"


def test_durations_rates_and_node_hours_are_values_with_units():
    sweep = options_from(SweepOptions, parse(["sweep", "s.yaml", "--budget", "1h30m", "--nodes-timeout", "2m"]))
    assert (sweep.budget_s, sweep.nodes_timeout_s) == (5400.0, 120.0)
    predict = options_from(PredictOptions, parse(["predict", "r", "--deadline", "90m"]))
    assert predict.deadline_h == 1.5
    assert options_from(PredictOptions, parse(["predict", "r", "--budget", "200node-h"])).budget_node_h == 200.0
    cluster = parse(["cluster", "up", "--nodes", "2", "--cores-per-node", "1", "--rate", "25gbit", "--latency", "1ms"])
    assert (cluster.rate_bits_per_s, cluster.latency_s) == (25e9, 0.001)


def test_mlflow_alone_never_takes_the_next_word():
    alone = options_from(SweepOptions, parse(["sweep", "--mlflow", "sweeps/classifier.yaml"]))
    assert (alone.sweep, alone.mlflow) == ("sweeps/classifier.yaml", True)
    given = options_from(SweepOptions, parse(["sweep", "s.yaml", "--mlflow=http://h:5000"]))
    assert given == options_from(SweepOptions, parse(["sweep", "s.yaml", "--mlflow-uri", "http://h:5000"]))
    assert given.mlflow == "http://h:5000"
    with pytest.raises(SystemExit):   # a second positional is no URI: argparse refuses it
        parse(["sweep", "s.yaml", "--mlflow", "http://h:5000"])


@pytest.mark.parametrize("old, new, cls", [
    (["sweep", "s.yaml", "--nodes-timeout-s", "90"], ["sweep", "s.yaml", "--nodes-timeout", "90s"], SweepOptions),
    (["sweep", "s.yaml", "--target-width", "0.3"], ["sweep", "s.yaml", "--target-rel-width", "0.3"], SweepOptions),
    (["predict", "r", "--deadline-h", "8"], ["predict", "r", "--deadline", "8h"], PredictOptions),
    (["predict", "r", "--budget-node-h", "200"], ["predict", "r", "--budget", "200node-h"], PredictOptions),
])
def test_an_old_spelling_reads_its_value_as_before_and_says_once_what_replaces_it(old, new, cls):
    args = parse(old + old[2:])   # given twice: said once
    assert options_from(cls, args) == options_from(cls, parse(new))
    said = getattr(args, OLD_SPELLINGS)
    assert len(said) == 1 and said[0].startswith(f"{old[2]} is an old spelling: use {new[2]} ")


def test_the_old_spelling_is_said_as_a_warning_by_the_command(capsys, tmp_path):
    missing = tmp_path / "nothing-here"
    assert main(["predict", str(missing), "--deadline-h", "8"]) == 2   # not a results folder, after the warning
    err = capsys.readouterr().err
    assert err.count("--deadline-h is an old spelling: use --deadline DURATION") == 1
