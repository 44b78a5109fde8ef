"""``sqew worker``: run a ``sqew.Worker`` with a handler named ``module:function``.

On a terminal (stderr) a live status line shows the counts, with a line per failure above
it; otherwise each log record is a line of JSON on stderr. SIGINT or SIGTERM drains (the
Worker's own handling), and the run ends with a summary on stdout and exit status 0.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import msgspec
import typer

from sqew.cli import output
from sqew.cli.state import State, current
from sqew.escapes import escape_controls
from sqew.worker import Handler, Worker


def worker(
    ctx: typer.Context,
    queue: Annotated[str, typer.Option("--queue", "-q", metavar="NAME",
                                       help="The queue to consume.")],
    handler: Annotated[str, typer.Option(
        "--handler", metavar="MODULE:FUNCTION",
        help="The function called with each leased message (imported from the current "
        "directory or the Python path); returning acks the message, raising nacks it, "
        "raising sqew.Reject dead-letters it.")],
    concurrency: Annotated[int, typer.Option(
        "--concurrency", "-c", min=1, max=1000,
        help="Handler threads: the most messages held at once.")] = 1,
    visibility_ms: Annotated[int | None, typer.Option(
        "--visibility-ms", min=300, help="The lease each poll asks for (default: the "
        "queue's); heartbeats keep it alive while a handler runs.")] = None,
    drain_timeout: Annotated[float, typer.Option(
        "--drain-timeout", min=0, help="Seconds to let handlers under way finish after "
        "SIGINT/SIGTERM.")] = 30.0,
    metrics_port: Annotated[int | None, typer.Option(
        "--metrics-port", min=1, max=65535, help="Serve the counts as Prometheus metrics "
        "at http://HOST:PORT/metrics (sqew_worker_*: docs/consumers.md).")] = None,
    metrics_host: Annotated[str, typer.Option(
        "--metrics-host", help="The interface --metrics-port listens on.")] = "127.0.0.1",
) -> None:
    """Consume a queue: call a Python function on each message, ack it when it returns.

    A handler that raises is nacked with the exception's text (retried after the queue's
    backoff, dead-lettered after max_attempts); one that raises sqew.Reject is dead-lettered
    at once. Leases are extended while handlers run. SIGINT or SIGTERM stops polling, lets
    the handlers under way finish (up to --drain-timeout; a second signal stops waiting),
    prints a summary and exits 0.

    Example:

        sqew worker --queue jobs --handler myapp.tasks:handle --concurrency 8
    """
    function = load_handler(handler)
    state = current(ctx)
    w = Worker(state.client, queue, function, concurrency=concurrency,
               visibility_ms=visibility_ms, drain_timeout_s=drain_timeout)
    with logging_for(state, w), serving_metrics(metrics_host, metrics_port):
        w.run()
    _summary(state, w)


@contextmanager
def serving_metrics(host: str, port: int | None) -> Iterator[None]:
    """Serve the process's default registry (the Worker's counts) at /metrics on
    ``host:port`` while the block runs (nothing when ``port`` is None).

    Raises:
        typer.BadParameter: the address cannot be listened on.
    """
    if port is None:
        yield
        return
    from prometheus_client import start_http_server

    try:
        server, thread = start_http_server(port, addr=host)
    except OSError as exc:
        raise typer.BadParameter(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                                 param_hint="'--metrics-port'") from None
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def load_handler(spec: str) -> Handler:
    """The callable ``module:function`` names, importable from the current directory.

    Raises:
        typer.BadParameter: it cannot be imported, is not callable, or is ``async def``.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise typer.BadParameter(f"expected MODULE:FUNCTION, got {spec!r}",
                                 param_hint="'--handler'")
    if os.getcwd() not in sys.path:  # as `python -m` does: the user's code is where they are
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module may fail in any way while importing
        raise typer.BadParameter(f"cannot import {module_name!r}: {type(exc).__name__}: "
                                 f"{exc}", param_hint="'--handler'") from None
    function: Any = module
    for part in attr.split("."):
        function = getattr(function, part, None)
        if function is None:
            raise typer.BadParameter(f"module {module_name!r} has no {attr!r}",
                                     param_hint="'--handler'")
    try:
        Worker.check_handler(function)
    except TypeError as exc:
        raise typer.BadParameter(f"{spec}: {exc}", param_hint="'--handler'") from None
    return function  # type: ignore[no-any-return]


@contextmanager
def logging_for(state: State, w: Worker) -> Iterator[None]:
    """The worker's records on stderr: above a live status line on a terminal, else as JSON
    lines (``--json``, or stderr not a terminal)."""
    logger = logging.getLogger("sqew")
    live = sys.stderr.isatty() and not state.json
    handler: logging.Handler
    if live:
        from rich.console import Console
        from rich.live import Live

        console = Console(stderr=True, highlight=False)
        handler = _PrintTo(console.print)
        with Live(_Status(w), console=console, refresh_per_second=4, transient=True), \
                _attached(logger, handler):
            yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLines())
    with _attached(logger, handler):
        yield


@contextmanager
def _attached(logger: logging.Logger, handler: logging.Handler) -> Iterator[None]:
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


class _Status:
    """The live line: the worker's counts, read each time it is drawn."""

    def __init__(self, w: Worker) -> None:
        self.w = w

    def __rich__(self) -> str:
        w = self.w
        state = "draining" if w.stopping else "running"
        return (f"{escape_controls(w.queue)} {state}: {w.in_flight} in flight, "
                f"{w.processed} processed, {w.failed} failed, {w.rejected} rejected, "
                f"{w.lease_extensions} lease extensions")


class _PrintTo(logging.Handler):
    """Prints each record as ``LEVEL message`` through the live display's console."""

    def __init__(self, emit: Callable[..., None]) -> None:
        super().__init__()
        self._print = emit

    def emit(self, record: logging.LogRecord) -> None:
        self._print(f"{record.levelname} {escape_controls(record.getMessage())}",
                    markup=False)


class _JsonLines(logging.Formatter):
    """A record as one line of JSON: ``{"time", "level", "logger", "message"}``."""

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return msgspec.json.encode({
            "time": f"{when}.{int(record.msecs):03d}Z", "level": record.levelname.lower(),
            "logger": record.name, "message": record.getMessage(),
        }).decode()


def _summary(state: State, w: Worker) -> None:
    summary = counts(w)
    text = (f"{summary['processed']} processed, {summary['failed']} failed, "
            f"{summary['rejected']} rejected, {summary['lost']} lost, "
            f"{summary['lease_extensions']} lease extensions")
    output.emit(state, summary, output.line(text))


def counts(w: Worker) -> dict[str, int]:
    """The counts of a finished worker, as ``--json`` prints them."""
    return {"processed": w.processed, "failed": w.failed, "rejected": w.rejected,
            "lost": w.lost, "lease_extensions": w.lease_extensions,
            "in_flight": w.in_flight}

