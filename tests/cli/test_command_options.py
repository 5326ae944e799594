"""One frozen options object per command (`orchestrator.app.options`): the CLI builds each subcommand's
argparse options from its fields and reads the arguments back into it, and the Python API builds the same object
from keyword arguments, so argv and a notebook's call reach the use-case as equal objects. A new option is one
field: a toy options class shows that its field is a flag with its help, parser and default."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

import orch
from orchestrator.app import options as o
from orchestrator.cli import build_parser
from orchestrator.cli.options import add_options, options_from
from orchestrator.errors import InputError

REPO = Path(__file__).resolve().parents[2]
COMMANDS = {"plan": o.PlanOptions, "probe": o.ProbeOptions, "sweep": o.SweepOptions, "report": o.ReportOptions,
            "predict": o.PredictOptions, "profile": o.ProfileOptions, "topology": o.TopologyOptions}


def _subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_field_is_an_option_of_its_command_with_the_fields_help(command):
    cls = COMMANDS[command]
    # one visible action per field (an old spelling, or --mlflow's value, shares the dest: its help is hidden)
    actions = {a.dest: a for a in _subparser(command)._actions if a.help != argparse.SUPPRESS}
    for field in dataclasses.fields(cls):
        assert field.name in actions, f"orch {command}: no option for {cls.__name__}.{field.name}"
        flag = o.flag_of(field)
        assert actions[field.name].help == flag.help.replace("%", "%%")
        assert bool(actions[field.name].option_strings) == (flag.flag is not None)


def test_argv_and_the_api_build_equal_sweep_options():
    argv = ["sweep", "sweeps/classifier.yaml", "--max-concurrent", "2", "--no-convergence", "--budget", "30m",
            "--mlflow", "--track", "toy=out.jsonl", "--results", "r/x", "--nodes-timeout", "9s"]
    from_argv = options_from(o.SweepOptions, build_parser().parse_args(argv))
    from_api = o.options_of(o.SweepOptions, {"sweep": "sweeps/classifier.yaml", "max_concurrent": 2,
                                             "convergence": False, "budget_s": 1800.0, "mlflow": True,
                                             "trackers": ["toy=out.jsonl"], "results": Path("r/x"),
                                             "nodes_timeout_s": 9.0})
    assert from_argv == from_api
    assert from_argv.tensorboard is None and from_argv.report   # the defaults


def test_the_default_is_the_fields_default_on_both_doors():
    args = build_parser().parse_args(["sweep", "s.yaml"])
    assert options_from(o.SweepOptions, args) == o.SweepOptions(sweep="s.yaml")
    assert o.SweepOptions(sweep="s.yaml").nodes_timeout_s == o.DEFAULT_NODES_TIMEOUT_S == 300.0


def test_a_new_option_is_one_field():
    @dataclass(frozen=True, kw_only=True, slots=True)
    class Toy:
        folder: str = o.option(None, "where", flag=None, metavar="DIR", required=True)
        rounds: int = o.option(3, "how many rounds", metavar="N", parse=o.positive_int)
        quiet: bool = o.option(False, "say less", switch=True)
        tags: tuple[str, ...] = o.option((), "a tag; repeatable", flag="--tag", repeat=True)

    parser = argparse.ArgumentParser(prog="toy", exit_on_error=False)
    add_options(parser, Toy)
    assert options_from(Toy, parser.parse_args(["f"])) == Toy(folder="f")
    assert options_from(Toy, parser.parse_args(["f", "--rounds", "5", "--quiet", "--tag", "a", "--tag", "b"])) == \
        Toy(folder="f", rounds=5, quiet=True, tags=("a", "b"))
    assert "how many rounds" in parser.format_help() and "--tag TAGS" in parser.format_help()
    with pytest.raises(argparse.ArgumentError, match="'0': expected a finite positive number"):
        parser.parse_args(["f", "--rounds", "0"])


def test_the_api_takes_an_options_object_or_keywords_and_names_every_option_when_one_is_unknown():
    sweep = REPO / "sweeps" / "classifier.yaml"
    topology = REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml"
    by_keywords = orch.plan(sweep, topology=topology)
    by_object = orch.plan(orch.PlanOptions(sweep=str(sweep), topology=str(topology)))
    assert by_keywords.to_dict() == by_object.to_dict()
    with pytest.raises(TypeError, match=r"SweepOptions has no option 'max_concurent'; its options: sweep \(required\), "
                                        r"topology=None, .*max_concurrent=None"):
        orch.sweep(sweep, max_concurent=1)
    with pytest.raises(InputError, match=r"nodes=\[0\]: expected positive whole numbers"):
        orch.PredictOptions(results="results/example-predict", nodes=(0,))


def test_predict_options_reach_the_inputs_typed():
    from orchestrator.io.predict_inputs import read_inputs

    inputs = read_inputs(o.PredictOptions(results=str(REPO / "results" / "example-predict"), nodes=(1,),
                                          local_batch=(16,)))
    assert inputs.node_counts == (1,) and inputs.local_batches == (16,) and inputs.same_machine
