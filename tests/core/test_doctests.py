"""The worked examples in the core modules' docstrings are true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["orchestrator.core.schema", "orchestrator.core.grid", "orchestrator.core.placement",
           "orchestrator.core.table", "orchestrator.core.topology", "orchestrator.core.peaks"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
