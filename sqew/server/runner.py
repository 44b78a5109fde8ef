"""Serving the app: ``run(settings)`` binds, announces, serves with uvicorn, stops gracefully.

SIGINT/SIGTERM: stop accepting, end long polls at once (see ``app._chain_stop_signals``), let
in-flight requests finish for up to ``graceful_timeout_s``, then close the database (the app's
shutdown hook). ``workers > 1`` runs that many processes on one listening socket, each building
its app from ``SQEW_*`` variables (``app_from_env``), all on the same database file.
"""

from __future__ import annotations

import copy
import logging
import os
import socket
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from sqlalchemy.engine import make_url
from uvicorn.supervisors import Multiprocess

from sqew import errors
from sqew.backends import open_backend, sqlite_path
from sqew.config import Settings
from sqew.server.app import create_app

FACTORY = "sqew.server.app:app_from_env"
log = logging.getLogger("sqew.server")


class _Server(uvicorn.Server):
    """uvicorn's server, except that a signal that stopped it gracefully is not re-raised.

    uvicorn re-raises SIGINT/SIGTERM after its graceful shutdown, so the process dies of the
    signal; a stop that finished cleanly exits 0 instead.
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()


def run(settings: Settings, *, announce: Callable[[str], None] | None = None) -> None:
    """Serve the REST API until SIGINT/SIGTERM.

    Args:
        settings: what to serve and how.
        announce: called with the ``sqew serving on …`` line once the socket listens
            (default: print it on stdout).

    Raises:
        sqew.errors.Unavailable: the database cannot be opened or the address is in use.
    """
    # Open (creating or upgrading the schema) before binding: a bad database fails clearly.
    open_backend(settings.db, durability=settings.durability, upgrade=True).close()
    sock = bind(settings.host, settings.port)
    port = sock.getsockname()[1]
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    line = f"sqew serving on http://{host}:{port} (db: {describe_db(settings.db)})"
    (announce or _print)(line)
    config = uvicorn_config(settings)
    try:
        if settings.workers > 1:
            os.environ.update(settings.to_env())  # the worker processes build their settings
            Multiprocess(config, sockets=[sock]).run()
        else:
            _Server(config).run(sockets=[sock])
    finally:
        sock.close()


def uvicorn_config(settings: Settings, app: Any = None) -> uvicorn.Config:
    """The uvicorn configuration for ``settings`` (an app object, or the env factory)."""
    many = settings.workers > 1
    target = FACTORY if many else (app if app is not None else create_app(settings))
    return uvicorn.Config(
        target,
        factory=many,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        lifespan="on",
        timeout_graceful_shutdown=int(settings.graceful_timeout_s),
        log_level=settings.log_level,
        log_config=log_config(settings.log_level),
        access_log=settings.access_log,
        proxy_headers=False,
        server_header=False,
    )


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging setup, plus sqew's own logger (errors with request ids) on stderr."""
    cfg: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    cfg["loggers"]["sqew"] = {"handlers": ["default"], "level": level.upper(),
                              "propagate": False}
    return cfg


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one).

    Raises:
        sqew.errors.Unavailable: the address cannot be bound (in use, not local, …).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP given explicitly: asyncio turns on TCP_NODELAY only for sockets whose proto
    # says TCP, and without it Nagle's algorithm meets delayed ACKs (~40 ms stalls).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise errors.Unavailable(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    # Listen now: the "serving on" line may be printed (and acted on) before uvicorn takes the
    # socket over; connections made meanwhile wait in the backlog instead of being refused.
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def describe_db(target: str) -> str:
    """The database as shown to the user: an absolute file path, or the URL (no password)."""
    path = sqlite_path(target)
    if path is not None:
        return os.path.abspath(path)
    try:
        return make_url(target).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy knows; the backend has already accepted it
        return target


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
