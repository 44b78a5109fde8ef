"""The server's logs: the standard ``logging`` module, one line per record on stderr.

**Formats** (``log_format``): ``json`` writes each record as one JSON object — ``time`` (UTC,
ISO 8601 to the millisecond), ``level``, ``logger``, ``message``, then the record's own fields
(``event``, ``request_id``, …, given as ``extra=``), ``pid``, and ``traceback`` for an
exception; ``text`` writes ``time level logger: message key=value …`` for people (control
characters escaped, a traceback's lines indented); ``auto`` picks text when stderr is a
terminal, else JSON. The formatters are written here (about 60
lines) rather than taken from python-json-logger: the fields and their order are ours, and
msgspec, already a dependency, encodes them.

**Loggers.** ``sqew.*`` at ``log_level`` (``sqew.access``: one line per request,
``sqew.server``: lifecycle, reaper and failures, ``sqew.migrate``, ``sqew.sql`` with
``trace_sql``); uvicorn's own at ``warning`` unless ``log_level`` is ``debug`` (sqew logs the
lifecycle itself), its access log never (``sqew.access`` replaces it); every other library's
warnings through the same handler. ``config`` is a ``logging.config.dictConfig`` document,
which uvicorn applies again in each worker process.

**Events** carry ``event``: ``start``, ``migrations_applied``, ``listening``, ``ready``,
``request``, ``error``, ``reap``, ``shutdown_begun``, ``shutdown_finished``, ``stop``.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from sqew.escapes import escape_controls
from sqew.settings import Settings

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}
"""Attributes every record has; the others were given as ``extra=``."""
_IN_MESSAGE = frozenset({"event", "method", "route", "status", "duration_ms"})
"""Fields the text format leaves out: the records that carry them say them in the message."""
_encode = msgspec.json.Encoder(enc_hook=str).encode


def timestamp(created: float) -> str:
    """Epoch seconds as ISO 8601 UTC to the millisecond: ``2026-11-25T09:40:01.123Z``."""
    whole = int(created)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + (
        f".{int((created - whole) * 1000):03d}Z")


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a record was given (``extra=``)."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and k[:1] != "_"}


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": timestamp(record.created),
                               "level": record.levelname.lower(), "logger": record.name,
                               "message": record.getMessage()}
        out.update(fields(record))
        out["pid"] = record.process
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["traceback"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return _encode(out).decode()


class TextFormatter(logging.Formatter):
    """A record as ``time LEVEL logger: message key=value …`` (and its traceback).

    What a client sent can be in a record (a queue name from a URL's path, say), so the
    message and the values have their control characters escaped (``sqew.escapes``): a
    ``%0a`` cannot start a line that passes for a record, nor ``%1b`` drive the terminal of
    whoever reads the log. A traceback's lines are escaped too and indented, so that every
    line not starting with a time belongs to the record above it.
    """

    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{k}={escape_controls(str(v))}" for k, v in fields(record).items()
                         if k not in _IN_MESSAGE and v is not None)
        line = (f"{timestamp(record.created)} {record.levelname:<7} {record.name}: "
                f"{escape_controls(record.getMessage())}" + (f"  {extra}" if extra else ""))
        if record.exc_info:
            line += _indented(self.formatException(record.exc_info))
        elif record.exc_text:
            line += _indented(record.exc_text)
        if record.stack_info:
            line += _indented(self.formatStack(record.stack_info))
        return line


def _indented(text: str) -> str:
    """The lines of a traceback under a record: each escaped and indented by two spaces."""
    return "".join("\n  " + escape_controls(part) for part in text.split("\n"))


def chosen_format(settings: Settings) -> str:
    """``json`` or ``text``: ``auto`` is text on a terminal (stderr), else JSON."""
    if settings.log_format != "auto":
        return settings.log_format
    try:
        return "text" if sys.stderr.isatty() else "json"
    except (AttributeError, ValueError):  # no stderr, or closed
        return "json"


def config(settings: Settings, *, root: bool = False) -> dict[str, Any]:
    """The ``dictConfig`` document for ``settings`` (see the module docstring).

    Args:
        settings: ``log_level`` and ``log_format``.
        root: also send other libraries' warnings (the root logger) to stderr in the format;
            for a serving process, not for an app embedded in another program.
    """
    level = settings.log_level.upper()
    formatter = "JsonFormatter" if chosen_format(settings) == "json" else "TextFormatter"
    theirs = level if level in ("DEBUG", "ERROR", "CRITICAL") else "WARNING"
    document: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"sqew": {"()": f"{__name__}.{formatter}"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "sqew",
                                "stream": "ext://sys.stderr"}},
        "loggers": {
            "sqew": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn": {"handlers": ["stderr"], "level": theirs, "propagate": False},
            "uvicorn.error": {"level": theirs},
            "uvicorn.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
        },
    }
    if root:
        document["root"] = {"handlers": ["stderr"], "level": "WARNING"}
    return document


@contextlib.contextmanager
def held() -> Iterator[Callable[[], None]]:
    """Hold back ``sqew``'s records until the caller calls the function it is given; if it
    never does (the block fails), drop them.

    A server that refuses to start says why in one ``error:`` line; the records of its
    start (migrations applied, say) are written only once it is sure to start.
    """
    logger = logging.getLogger("sqew")
    handlers = logger.handlers[:]
    buffer = logging.handlers.BufferingHandler(capacity=1_000_000)
    logger.handlers = [buffer]
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        logger.handlers = handlers
        for record in buffer.buffer:
            logger.handle(record)
        buffer.buffer.clear()

    try:
        yield release
    finally:
        if not released:
            logger.handlers = handlers
