"""sqew's own log records on stderr, to see what a command does: ``SQEW_CLI_LOG_LEVEL``.

With ``SQEW_CLI_LOG_LEVEL=debug`` (or ``info``, ``warning``, ``error``, ``critical``) the records
of sqew's loggers at that level and above go to stderr, one line each: ``<time> <LEVEL>
<logger>: <message>``; at ``debug``, for instance, each long poll that starts and stops waiting
(``sqew.waiter``). Control characters in a message are escaped, and an exception is named after
it, never printed as a traceback. Unset (the default), a command sets up no logging. ``sqew
serve`` has logging of its own (``--log-level``, docs/operations.md).
"""

from __future__ import annotations

import logging
import os
import sys
import time

import typer

ENV = "SQEW_CLI_LOG_LEVEL"
LEVELS = ("debug", "info", "warning", "error", "critical")


def from_env() -> None:
    """Send sqew's records to stderr at the level ``SQEW_CLI_LOG_LEVEL`` names, if set.

    Raises:
        typer.BadParameter: the variable names no level (a usage error).
    """
    level = os.environ.get(ENV, "").strip().lower()
    if not level:
        return
    if level not in LEVELS:
        raise typer.BadParameter(f"must be one of {', '.join(LEVELS)}, got {level!r}",
                                 param_hint=ENV)
    logger = logging.getLogger("sqew")
    for handler in [h for h in logger.handlers if isinstance(h, _Handler)]:
        logger.removeHandler(handler)  # a second run in one process (tests) replaces it
    handler = _Handler(sys.stderr)
    handler.setFormatter(_LineFormatter())
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``from_env`` adds (told apart from any other)."""


class _LineFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger>: <message>`` on one line, control characters escaped."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f" ({type(exc).__name__}: {exc})"
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{when}.{int(record.msecs):03d}Z {record.levelname:<7} {record.name}: " + (
            _escaped(text))


def _escaped(text: str) -> str:
    """``text`` with each character that is not printable as its Python escape (``\\x1b``)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
