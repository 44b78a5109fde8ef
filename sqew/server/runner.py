"""Serving the app: ``run(settings)`` binds, announces, serves with uvicorn, stops gracefully.

What only a serving process does is set up here, not in the app (which tests and other programs
embed): HTTP errors answered with SPEC's envelope (``protocols.HttpProtocol``) and the garbage
collector tuned for serving (``serving``), undone when serving stops.

SIGINT/SIGTERM: stop accepting, end long polls at once (see ``app._chain_stop_signals``), let
in-flight requests finish for up to ``graceful_timeout_s``, then close the database (the app's
shutdown hook). ``workers > 1`` runs that many processes, each building its app from ``SQEW_*``
variables (``app_from_env``), all on the same database file. On Linux every worker has a
listening socket of its own on the one ``host:port`` (``SO_REUSEPORT``), so the kernel spreads
connections over the workers; on one shared socket, whichever worker was in ``accept`` took
most of them and a second worker added little.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import logging.config
import math
import os
import socket
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import uvicorn
from litestar import Litestar
from prometheus_client.multiprocess import mark_process_dead
from uvicorn.supervisors import Multiprocess

from sqew import __version__, errors
from sqew.backends import open_backend
from sqew.config import CONFIG_ENV, Settings
from sqew.server import logs, protocols
from sqew.server.app import app_from_env, create_app
from sqew.server.gc_tuning import GC_TUNING
from sqew.server.metrics_dirs import metrics_dir
from sqew.server.preflight import (
    check_exposure,
    check_tls,
    connections_that_fit,
    describe_db,
    fd_limit,
    raise_fd_limit,
)

FACTORY = "sqew.server.runner:worker_app"
log = logging.getLogger("sqew.server")
# SO_REUSEPORT balances connections over the sockets of a group on Linux only (elsewhere it
# exists with other meanings, or not at all): there the workers share one socket as before.
BALANCED = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")


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


def run(settings: Settings, *, announce: Callable[[str], None] | None = None,
        config_file: str | None = None) -> None:
    """Serve the REST API until SIGINT/SIGTERM.

    Logging is set up first (``sqew.server.logs``); the records of the start (events
    ``start``, ``migrations_applied``) are written once the socket is bound, and dropped if
    the server refuses to start, whose reason is then the caller's one ``error:`` line.

    Args:
        settings: what to serve and how.
        announce: called with the ``sqew serving on …`` line once the socket listens
            (default: print it on stdout).
        config_file: the TOML file the settings were read from, for the log.

    Raises:
        sqew.errors.Unavailable: the database cannot be opened or the address is in use.
        sqew.errors.ValidationError: the TLS certificate or key cannot be used.
        sqew.errors.Forbidden: a host beyond loopback with no key to enforce (``check_exposure``).
    """
    log_config = logs.config(settings, root=True)
    logging.config.dictConfig(log_config)
    with logs.held() as release:
        db = describe_db(settings.db)
        log.info("starting sqew %s on %s", __version__, db, extra={
            "event": "start", "version": __version__, "db": db, "workers": settings.workers,
            "config_file": config_file})
        sockets, open_to_all = _prepare(settings)
        release()
    port = sockets[0].getsockname()[1]
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    scheme = "https" if settings.tls_cert else "http"
    address = f"{scheme}://{host}:{port}"
    (announce or _print)(f"sqew serving on {address} (db: {db})")  # every socket listens
    log.info("listening on %s", address, extra={"event": "listening", "address": address})
    config = uvicorn_config(settings, log_config=log_config)
    if open_to_all:
        log.warning("serving on %s with no API key and require_auth off (--insecure): anyone "
                    "who can reach it can use every queue", settings.host)
    try:
        if settings.workers > 1:
            os.environ.update(settings.to_env())  # the worker processes build their settings
            os.environ.pop(CONFIG_ENV, None)  # from those variables alone
            with metrics_dir() as shared:
                supervisor = (_Supervisor(config, sockets, settings.host, port, shared)
                              if BALANCED else Multiprocess(config, sockets=sockets))
                supervisor.run()
            if isinstance(supervisor, _Supervisor) and supervisor.failure is not None:
                raise supervisor.failure
        else:
            _Server(config).run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
        log.info("stopped", extra={"event": "stop"})


def _prepare(settings: Settings) -> tuple[list[socket.socket], bool]:
    """Check everything, open (creating or upgrading) the database, bind.

    Returns:
        The listening sockets, and whether the server is open to all (``check_exposure``).
    """
    check_tls(settings)  # before anything else: a bad file is a clear error, not a traceback
    # Open (creating or upgrading the schema) before binding: a bad database fails clearly.
    backend = open_backend(settings.db, durability=settings.durability, upgrade=True)
    try:
        with backend.read() as tx:
            keyed = tx.auth_required()
    finally:
        backend.close()
    open_to_all = check_exposure(settings, keyed)
    raise_fd_limit()  # before the workers start: they inherit it
    if settings.workers > 1 and BALANCED:
        return bind_group(settings.host, settings.port, settings.workers), open_to_all
    return [bind(settings.host, settings.port)], open_to_all


class _Supervisor(Multiprocess):
    """uvicorn's Multiprocess, except that every worker gets a listening socket of its own.

    uvicorn reads ``self.sockets`` once for each worker it creates (at start, on a restart
    after a crash, SIGHUP or SIGTTIN), so the property hands out one socket each time: one of
    the group bound before the announcement, then a new one bound into the group. A socket is
    passed to its worker when the worker is spawned; the supervisor then closes its own copy,
    so a socket lives exactly as long as the worker that accepts on it (a socket left
    listening without a worker would get its share of connections and leave them hanging).
    """

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket], host: str,
                 port: int, metrics: str | None = None) -> None:
        self._address = (host, port)
        self._metrics = metrics
        self._handed: list[socket.socket] = []
        self.failure: errors.Unavailable | None = None
        super().__init__(config, sockets=sockets)

    @property
    def sockets(self) -> list[socket.socket]:
        sock = self._spare.pop() if self._spare else bind(*self._address, reuse_port=True)
        self._handed.append(sock)
        return [sock]

    @sockets.setter
    def sockets(self, sockets: list[socket.socket]) -> None:
        self._spare = list(sockets)  # still the caller's to close (run() does)

    def init_processes(self) -> None:
        with self._handing_over():
            super().init_processes()

    def keep_subprocess_alive(self) -> None:
        with self._handing_over():
            super().keep_subprocess_alive()

    def restart_all(self) -> None:
        with self._handing_over():
            super().restart_all()

    def handle_ttin(self) -> None:
        with self._handing_over():
            super().handle_ttin()

    @contextlib.contextmanager
    def _handing_over(self) -> Iterator[None]:
        """Close the supervisor's copies of the sockets handed to workers started meanwhile;
        stop everything if a new worker cannot have a socket. Workers that ended meanwhile
        (crashed and replaced) leave the metrics' ``live`` gauges."""
        before = {p.pid for p in self.processes}
        try:
            yield
        except errors.Unavailable as exc:
            log.error("%s; stopping", exc)
            self.failure = exc
            self.should_exit.set()
        finally:
            for sock in self._handed:
                sock.close()
            self._handed.clear()
            if self._metrics:
                for pid in before - {p.pid for p in self.processes}:
                    if pid is not None:
                        mark_process_dead(pid, self._metrics)  # type: ignore[no-untyped-call]


def uvicorn_config(settings: Settings, app: Litestar | None = None, *,
                   log_config: dict[str, Any] | None = None) -> uvicorn.Config:
    """The uvicorn configuration for ``settings`` (an app object, or the env factory).

    The app (``app`` or one built for ``settings``) is prepared for serving (``serving``).
    The connection limit is kept below the process's file-descriptor limit (``fd_limit``).
    uvicorn applies ``log_config`` (default: ``logs.config(settings)``) at once and in each
    worker process; its own access log is off (``sqew.server.access`` logs requests).
    """
    many = settings.workers > 1
    target: Litestar | str = FACTORY if many else serving(app or create_app(settings))
    config = protocols.Config(
        target,
        limits=protocols.Limits(
            header_timeout_s=settings.header_timeout_s,
            body_timeout_s=settings.body_timeout_s,
            keep_alive_timeout_s=settings.keep_alive_timeout_s,
            max_header_bytes=settings.max_header_bytes,
            max_connections=settings.max_connections,
        ),
        factory=many,
        http=protocols.HttpProtocol,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        lifespan="on",
        timeout_graceful_shutdown=int(settings.graceful_timeout_s),
        log_level=None,  # the levels are in log_config
        log_config=log_config or logs.config(settings),
        access_log=False,
        proxy_headers=False,
        server_header=False,
        timeout_keep_alive=math.ceil(settings.keep_alive_timeout_s),  # enforced by the protocol
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
    )
    fitting = connections_that_fit(settings.threads)
    if fitting is not None and settings.max_connections > fitting:
        log.warning("max_connections %d lowered to %d: the process may open %d files "
                    "(RLIMIT_NOFILE)", settings.max_connections, fitting, fd_limit())
        config.limits = dataclasses.replace(config.limits, max_connections=fitting)
    return config


def worker_app() -> Litestar:
    """App factory for worker processes: settings from ``SQEW_*``, prepared for serving."""
    return serving(app_from_env())


def serving(app: Litestar) -> Litestar:
    """``app``, with the process's garbage collector tuned while it serves
    (``sqew.server.gc_tuning``).

    Returns:
        ``app`` itself, with startup and shutdown hooks added (once).
    """
    if GC_TUNING.start not in app.on_startup:
        app.on_startup.append(GC_TUNING.start)  # after the app's own: the database is open
        app.on_shutdown.append(GC_TUNING.stop)  # after the app's own: it is closed
    return app


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one).

    Args:
        host: the interface.
        port: the port, or 0.
        reuse_port: join the ``SO_REUSEPORT`` group on ``host:port`` (see ``bind_group``).

    Raises:
        sqew.errors.Unavailable: the address cannot be bound (in use, not local, …).
    """
    sock = _bound(host, port, reuse_port=reuse_port)
    # Listen now: the "serving on" line may be printed (and acted on) before uvicorn takes the
    # socket over; connections made meanwhile wait in the backlog instead of being refused.
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def bind_group(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` listening sockets on one ``host:port`` (port 0 picks a free one), one per
    worker: with ``SO_REUSEPORT`` the kernel spreads new connections over them by hash.

    Raises:
        sqew.errors.Unavailable: the address cannot be bound (in use, not local, …).
    """
    # A plain bind first: it fails if anything holds the port, even another process's
    # SO_REUSEPORT group (which the group's own binds would silently join), and picks port 0.
    probe = _bound(host, port, reuse_port=False)
    port = probe.getsockname()[1]
    probe.close()
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(bind(host, port, reuse_port=True))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _bound(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP given explicitly: asyncio turns on TCP_NODELAY only for sockets whose proto
    # says TCP, and without it Nagle's algorithm meets delayed ACKs (~40 ms stalls).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise errors.Unavailable(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    return sock


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
