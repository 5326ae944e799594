"""One error base: every error class orch defines is an `orch.OrchError`, of the bad-input kind (`InputError`, a
ValueError: exit 2) or the run-failed kind (`RunFailed`, a RuntimeError: exit 1); the public ones are exported by
`orch`; the CLI maps them to exit statuses in one place and lets anything else be the bug it is."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import orch
import orch.script
import orch.workload
import orchestrator
import orchestrator.app
import orchestrator.cli
import workloads
from orchestrator.cli import main
from orchestrator.errors import InputError, OrchError, RunFailed

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "results" / "example-classifier"
# Modules that import torch or Ray at the top: their classes are found by reading the source, not by importing.
PACKAGES = (orch, orchestrator, workloads)


def _error_classes() -> dict[str, ast.ClassDef]:
    """Every class of orch's own source whose bases name an exception (by the name's ending), file:name -> node."""
    found = {}
    for package in PACKAGES:
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            if path == root / "errors.py" and package is orchestrator:
                continue   # the two kinds and their base
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and any(
                        (getattr(b, "id", None) or getattr(b, "attr", "")).endswith(("Error", "Exception"))
                        or (getattr(b, "id", None) or getattr(b, "attr", "")) in ("InvalidInput", "InputError",
                                                                                     "RunFailed", "OrchError")
                        for b in node.bases):
                    found[f"{path.relative_to(REPO)}:{node.name}"] = node
    return found


def test_every_error_orch_defines_is_an_orch_error_of_one_kind():
    classes = _error_classes()
    assert len(classes) >= 25   # today's 21 and more: the count only guards against a walk that found nothing
    not_ours = []
    for where in classes:
        path, name = where.split(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", ".").removesuffix(".__init__"))
        cls = getattr(module, name)
        if not (issubclass(cls, InputError) or issubclass(cls, RunFailed)):
            not_ours.append(where)
    assert not_ours == [], f"errors outside orch.OrchError's two kinds: {not_ours}"


def test_the_kinds_keep_the_builtin_bases_callers_rely_on():
    from orchestrator.core.json.schema import InvalidInput
    from orchestrator.io.store import NotAResultsFolder, ResultsNotWritten

    assert issubclass(InputError, ValueError) and issubclass(RunFailed, RuntimeError)
    assert issubclass(InvalidInput, (OrchError, ValueError)) and issubclass(NotAResultsFolder, ValueError)
    assert issubclass(ResultsNotWritten, RuntimeError) and not issubclass(ResultsNotWritten, ValueError)


def test_the_public_errors_are_exported_by_orch():
    for name in ("OrchError", "InputError", "RunFailed", "InvalidInput", "NotAResultsFolder", "FolderInUse",
                 "TrackingUnavailable", "ResultsNotWritten", "ReportNotWritten", "PlanTooLarge", "NoFeasibleLayout",
                 "PredictInputError", "UnknownWorkload", "UnreadableFile", "ProbeFailed"):
        cls = getattr(orch, name)
        assert name in orch.__all__ and issubclass(cls, orch.OrchError), name
    assert orch.InputError is InputError and issubclass(orch.workload.WorkloadError, InputError)
    assert issubclass(orch.script.ScriptError, RunFailed)


def test_the_cli_maps_bad_input_to_2_a_failed_run_to_1_and_lets_a_bug_through(monkeypatch, capsys):
    from orchestrator.app import report

    def fails(error: BaseException):
        def load(folder: str):
            raise error
        monkeypatch.setattr(report, "load", load)

    fails(InputError("the folder is no good"))
    assert main(["report", str(EXAMPLE), "--format", "terminal"]) == 2
    assert "orch: error: the folder is no good" in capsys.readouterr().err
    fails(RunFailed("the disk is full"))
    assert main(["report", str(EXAMPLE), "--format", "terminal"]) == 1
    assert "orch: error: the disk is full" in capsys.readouterr().err
    fails(ValueError("a bug in orch"))   # not an OrchError: no exit status hides it
    with pytest.raises(ValueError, match="a bug in orch"):
        main(["report", str(EXAMPLE), "--format", "terminal"])


def _broad_handlers(path: Path) -> list[str]:
    """`except ValueError` / `except RuntimeError` / `except Exception` handlers (alone or in a tuple), except
    those that end by re-raising what they caught (a clean-up on the way out turns no error into another)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        reraises = isinstance(node, ast.ExceptHandler) and isinstance(node.body[-1], ast.Raise) \
            and node.body[-1].exc is None
        if isinstance(node, ast.ExceptHandler) and node.type is not None and not reraises:
            names = [n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)]
            broad = [n for n in names if n in ("ValueError", "RuntimeError", "Exception", "BaseException")]
            if broad:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: except {', '.join(broad)}")
    return found


# The one catch of builtins left in the doors and the use-cases: reading untrusted JSON into a typed result, where a
# malformed file raises the builtins (app.profile's saved targets, as `orch profile --report-only` reads them).
# file -> its broad handlers, in order. The options' parsers read the text a user typed (`float("2h")` raising is
# bad input, and the handler holds that one call).
ALLOWED = {"orchestrator/app/options.py": ["except ValueError", "except ValueError"]}


def test_the_doors_and_the_use_cases_catch_no_builtin_error_that_could_hide_a_bug():
    """What the CLI, the Python API and the use-cases catch is orch's own errors (or OSError at a write): a
    ValueError from a bug is never turned into "bad input"."""
    files = [*sorted((REPO / "orchestrator" / "cli").glob("*.py")),
             *sorted((REPO / "orchestrator" / "app").glob("*.py")), REPO / "orch" / "api.py"]
    found: dict[str, list[str]] = {}
    for line in (line for f in files for line in _broad_handlers(f)):
        found.setdefault(line.split(":")[0], []).append(line.split(": ", 1)[1])
    assert found == ALLOWED


def test_every_module_of_the_packages_imports():
    """The walk above imports the modules that define errors; this one imports the layers it relies on."""
    for package in (orchestrator.app, orchestrator.cli):
        for info in pkgutil.iter_modules(package.__path__, prefix=f"{package.__name__}."):
            if not info.name.endswith(".__main__"):   # `python -m orchestrator.cli`: importing it runs the CLI
                importlib.import_module(info.name)
