"""The worked examples in the core modules' docstrings are true.

Every module of orchestrator.core is collected, so a new core module's examples run without being listed
here; a module whose source shows an example (`>>>`) must run at least one.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import orchestrator.core

# Subpackages too (orchestrator.core.predict): walk_packages, not iter_modules.
MODULES = sorted(m.name for m in pkgutil.walk_packages(orchestrator.core.__path__, prefix="orchestrator.core."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    if ">>> " in Path(module.__file__).read_text():
        assert result.attempted > 0
    assert result.failed == 0
