"""The ``sqew`` command line (docs/cli.md): thin Typer commands over a Client.

``main`` is the console-script entry point (``sqew = "sqew.cli:main"``, and ``python -m
sqew``). Its first instruction takes Ctrl-C over (``sqew.cli.interrupts``), before the heavy
imports begin, so this package imports nothing else: ``app`` (the root Typer app) and ``run``
are loaded from ``sqew.cli.app`` on first use.
"""

from __future__ import annotations

from sqew.cli import interrupts

__all__ = ["app", "main", "run"]

TYPE_CHECKING = False  # what type checkers read (typing.TYPE_CHECKING, without importing typing)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

    from sqew.cli.app import app, run
else:

    def __getattr__(name: str) -> object:
        """``app`` and ``run`` on first use."""
        if name not in ("app", "run"):
            raise AttributeError(f"module 'sqew.cli' has no attribute {name!r}")
        return getattr(_load(), name)
del TYPE_CHECKING


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: run ``sqew`` and exit with its status.

    From this first instruction on, Ctrl-C ends sqew with status 130 and prints nothing.
    """
    interrupts.take_over()
    _load().main(argv)


def _load() -> ModuleType:
    """Import ``sqew.cli.app`` (typer, rich, the client, the engine: the heavy imports)."""
    import importlib

    module = importlib.import_module("sqew.cli.app")
    # The import made the package's `app` the module sqew.cli.app; it names the Typer app.
    globals().update(app=module.app, run=module.run)
    return module
