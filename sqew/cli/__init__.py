"""The ``sqew`` command line (SPEC §3): thin Typer commands over a Client.

``main`` is the console-script entry point (``sqew = "sqew.cli:main"``).
"""

from __future__ import annotations

from sqew.cli.app import app, main, run

__all__ = ["app", "main", "run"]
