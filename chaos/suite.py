"""The test suite's helper modules the harness shares (``tests/<name>.py``, stdlib only):
one place for what both need, loaded by path (``tests/`` is no package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def from_tests(name: str) -> ModuleType:
    """``tests/<name>.py`` as the module ``name`` (the suite's own when it is running)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
