"""The worked examples in the core modules' docstrings are true, and every core module has one.

Every module of orchestrator.core is collected, so a new core module's examples run without being listed
here. A module without an example fails: a pure module can always show what it does on a small input, and a
module whose examples are all gone (deleted, or in a docstring doctest cannot find) would otherwise pass as
"0 examples, 0 failed".
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import orchestrator.core

# Subpackages too (orchestrator.core.predict): walk_packages, not iter_modules.
MODULES = sorted(m.name for m in pkgutil.walk_packages(orchestrator.core.__path__, prefix="orchestrator.core."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no example: add one (`>>> `) to a docstring that shows what it does"
    assert result.failed == 0


def test_every_core_module_is_collected():
    assert len(MODULES) >= 45 and "orchestrator.core.predict.bands" in MODULES and "orchestrator.core.planning.spec" in MODULES
