"""YAML `.nan`, `.inf` and `-.inf` are bad input for every float a sweep file holds: exit status 2, the key
path named, no traceback. NaN compares false with every bound, so before this rule `.nan` passed them all.

The fields are generated from the dataclasses (the sweep spec, walked from SweepSpec through its nested
sections, and every registered workload's parameters), so a float field added later is covered without a
line here.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path

import pytest
import yaml

from orchestrator.cli import main
from orchestrator.core.planning.spec import SECTIONS, SweepSpec
from orchestrator.io.workload_finder import UnknownWorkload, entry_points, find_workload

REPO = Path(__file__).resolve().parents[2]
EMULATED = str(REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml")
NON_FINITE = (".nan", ".inf", "-.inf")
PLACEHOLDER = "NON_FINITE_HERE"

BASE = {
    "name": "nonfinite",
    "workload": {"name": "classifier", "params": {}},
    "grid": {"ranks": [1], "threads_per_rank": [1], "local_batch": [32]},
    "convergence": {"metric": "accuracy", "target": 0.9, "base_lr": 0.05, "base_batch": 32},
}


def _options(tp) -> tuple:
    """The alternatives of `A | B` (the annotation itself when it is no union)."""
    return typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)


def _float_kind(tp) -> str | None:
    """'scalar' or 'list' when the annotation takes a float (alone, in a union, or as list items)."""
    for option in _options(tp):
        if option is float:
            return "scalar"
        if typing.get_origin(option) in (tuple, list) and _float_kind(typing.get_args(option)[0]):
            return "list"
    return None


def float_fields(cls, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """(key path, 'scalar' | 'list') of every float field of `cls` and of the dataclasses nested in it."""
    hints = typing.get_type_hints(cls)
    found = []
    for f in dataclasses.fields(cls):
        kind = _float_kind(hints[f.name])
        if kind:
            found.append(((*prefix, f.name), kind))
        for option in _options(hints[f.name]):
            if dataclasses.is_dataclass(option):
                found += float_fields(option, (*prefix, f.name))
    return found


def nested_dataclasses(cls) -> set[type]:
    hints = typing.get_type_hints(cls)
    out = {cls}
    for f in dataclasses.fields(cls):
        for option in _options(hints[f.name]):
            if dataclasses.is_dataclass(option):
                out |= nested_dataclasses(option)
    return out


def installed_workloads() -> list:
    """Every workload's entry point, loaded, but for one whose optional extra is not installed here: .venv-ipex
    has no transformers (scripts/setup.sh), and collecting this module there must not fail. In .venv every
    workload loads, and the test below checks that all of them were walked."""
    found = []
    for e in entry_points():
        try:
            found.append((e.name, find_workload(e.name).workload))
        except UnknownWorkload as err:
            if type(err.__cause__).__name__ != "MissingExtra":
                raise
    return found


# A script's arguments are passed as the sweep file writes them (`.nan` reaches the script as the text `.nan`, as
# `010` stays `010`), so no number check applies to them.
SPEC_FIELDS = [field for field in float_fields(SweepSpec) if field[0] != ("workload", "args")]
WORKLOAD_FIELDS = [(name, path, kind) for name, workload in installed_workloads()
                   for path, kind in float_fields(workload.params_type)]


def test_the_generated_fields_cover_every_section_and_the_issues_examples():
    # The walk reaches every section the README documents; if it did not, fields could go unchecked.
    assert set(SECTIONS.values()) <= nested_dataclasses(SweepSpec)
    paths = {".".join(p) for p, _ in SPEC_FIELDS}
    assert {"constraints.memory_headroom", "convergence.target", "convergence.base_lr",
            "measure.timeout_s"} <= paths, paths
    assert ("classifier", ("lr",), "scalar") in WORKLOAD_FIELDS
    assert {name for name, _, _ in WORKLOAD_FIELDS} == {e.name for e in entry_points()}


def sweep_text(doc: dict, token: str) -> str:
    """The document as YAML with the placeholder replaced by a literal `.nan`/`.inf` token, so that the value
    reaches orch through the YAML loader as a user's file would."""
    text = yaml.safe_dump(doc, sort_keys=False)
    assert text.count(PLACEHOLDER) == 1, text
    return text.replace(PLACEHOLDER, token)


def with_value(doc: dict, path: tuple[str, ...], kind: str) -> dict:
    doc = yaml.safe_load(yaml.safe_dump(doc))  # a deep copy
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = [PLACEHOLDER] if kind == "list" else PLACEHOLDER
    return doc


def plan_bad(tmp_path: Path, capsys, text: str) -> str:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text)
    rc = main(["plan", str(sweep), "--topology", EMULATED])
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert "Traceback" not in out + err
    return err


def test_the_base_sweep_is_valid(tmp_path, capsys):
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(BASE))
    assert main(["plan", str(tmp_path / "sweep.yaml"), "--topology", EMULATED]) == 0


def _shown(token: str) -> str:
    return {".nan": "nan", ".inf": "inf", "-.inf": "-inf"}[token]


@pytest.mark.parametrize("token", NON_FINITE)
@pytest.mark.parametrize("path, kind", SPEC_FIELDS, ids=[".".join(p) for p, _ in SPEC_FIELDS])
def test_every_spec_float_refuses_non_finite(tmp_path, capsys, path, kind, token):
    err = plan_bad(tmp_path, capsys, sweep_text(with_value(BASE, path, kind), token))
    key = ".".join(path) + ("[0]" if kind == "list" else "")
    assert f"{key} (line " in err and f"must be a finite number, got {_shown(token)}" in err, err
    assert "1 problem(s)" in err, err  # the non-finite value alone, not a misleading bound message as well


@pytest.mark.parametrize("token", NON_FINITE)
@pytest.mark.parametrize("workload, path, kind", WORKLOAD_FIELDS,
                         ids=[f"{w}.{'.'.join(p)}" for w, p, _ in WORKLOAD_FIELDS])
def test_every_workload_float_refuses_non_finite(tmp_path, capsys, workload, path, kind, token):
    doc = {**BASE, "workload": {"name": workload, "params": {}}}
    doc.pop("convergence")  # its metric belongs to the classifier; a workload's parameters need none of it
    err = plan_bad(tmp_path, capsys, sweep_text(with_value(doc, ("workload", "params", *path), kind), token))
    key = "workload.params." + ".".join(path) + ("[0]" if kind == "list" else "")
    assert f"{key} (line " in err and f"must be a finite number, got {_shown(token)}" in err, err


def test_the_issues_examples_are_reported_at_once_with_their_lines(tmp_path, capsys):
    # memory_headroom: .nan used to end in a traceback in placement.memory_slots ("cannot convert float NaN
    # to integer"); the other three were accepted without a word.
    text = yaml.safe_dump({**BASE, "workload": {"name": "classifier", "params": {"lr": "N1"}},
                           "measure": {"timeout_s": "N2"}, "constraints": {"memory_headroom": "N3"},
                           "convergence": {**BASE["convergence"], "target": "N4", "base_lr": "N5"}},
                          sort_keys=False)
    for placeholder, token in (("N1", ".nan"), ("N2", ".nan"), ("N3", ".nan"), ("N4", ".nan"), ("N5", ".inf")):
        text = text.replace(placeholder, token)
    err = plan_bad(tmp_path, capsys, text)
    assert "5 problem(s)" in err, err
    for key, shown in (("workload.params.lr", "nan"), ("measure.timeout_s", "nan"),
                       ("constraints.memory_headroom", "nan"), ("convergence.target", "nan"),
                       ("convergence.base_lr", "inf")):
        line = next(ln for ln in err.splitlines() if f"{key} (line " in ln)
        assert line.endswith(f"must be a finite number, got {shown}"), line
