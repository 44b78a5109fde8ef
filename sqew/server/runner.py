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
import copy
import dataclasses
import gc
import logging
import math
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import uvicorn
from litestar import Litestar
from prometheus_client.multiprocess import mark_process_dead
from uvicorn.supervisors import Multiprocess

from sqew import errors
from sqew.backends import open_backend
from sqew.config import Settings
from sqew.server import protocols
from sqew.server.app import app_from_env, create_app
from sqew.server.metrics import MULTIPROC_ENV
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


def run(settings: Settings, *, announce: Callable[[str], None] | None = None) -> None:
    """Serve the REST API until SIGINT/SIGTERM.

    Args:
        settings: what to serve and how.
        announce: called with the ``sqew serving on …`` line once the socket listens
            (default: print it on stdout).

    Raises:
        sqew.errors.Unavailable: the database cannot be opened or the address is in use.
        sqew.errors.ValidationError: the TLS certificate or key cannot be used.
        sqew.errors.Forbidden: a host beyond loopback with no key to enforce (``check_exposure``).
    """
    check_tls(settings)  # before anything else: a bad file is a clear error, not a traceback
    # Open (creating or upgrading the schema) before binding: a bad database fails clearly.
    backend = open_backend(settings.db, durability=settings.durability, upgrade=True)
    try:
        with backend.read() as tx:
            keyed = tx.any_key()
    finally:
        backend.close()
    open_to_all = check_exposure(settings, keyed)
    raise_fd_limit()  # before the workers start: they inherit it
    many = settings.workers > 1
    if many and BALANCED:
        sockets = bind_group(settings.host, settings.port, settings.workers)
    else:
        sockets = [bind(settings.host, settings.port)]
    port = sockets[0].getsockname()[1]
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    scheme = "https" if settings.tls_cert else "http"
    line = f"sqew serving on {scheme}://{host}:{port} (db: {describe_db(settings.db)})"
    (announce or _print)(line)  # every socket listens: connections wait for their worker
    config = uvicorn_config(settings)  # (sets up logging)
    if open_to_all:
        log.warning("serving on %s with no API key and require_auth off (--insecure): anyone "
                    "who can reach it can use every queue", settings.host)
    try:
        if many:
            os.environ.update(settings.to_env())  # the worker processes build their settings
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


@contextlib.contextmanager
def metrics_dir() -> Iterator[str]:
    """A fresh ``PROMETHEUS_MULTIPROC_DIR`` for the workers of one server, removed after.

    Every worker process writes its metrics there (prometheus-client's multiprocess mode, set
    up by the variable before the worker imports the library: workers are spawned), and the
    worker answering a scrape sums them all (``sqew.server.metrics``). A directory of the
    server's own: files left by another run would be added in.
    """
    path = tempfile.mkdtemp(prefix="sqew-metrics-")
    previous = os.environ.get(MULTIPROC_ENV)
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        if previous is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous
        shutil.rmtree(path, ignore_errors=True)


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


def uvicorn_config(settings: Settings, app: Litestar | None = None) -> uvicorn.Config:
    """The uvicorn configuration for ``settings`` (an app object, or the env factory).

    The app (``app`` or one built for ``settings``) is prepared for serving (``serving``).
    The connection limit is kept below the process's file-descriptor limit (``fd_limit``).
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
        log_level=settings.log_level,
        log_config=log_config(settings.log_level),
        access_log=settings.access_log,
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
    """``app``, with the process's garbage collector tuned while it serves (see ``GcTuning``).

    Returns:
        ``app`` itself, with startup and shutdown hooks added (once).
    """
    if GC_TUNING.start not in app.on_startup:
        app.on_startup.append(GC_TUNING.start)  # after the app's own: the database is open
        app.on_shutdown.append(GC_TUNING.stop)  # after the app's own: it is closed
    return app


class GcTuning:
    """The garbage collector tuned for serving, and put back as it was when serving ends.

    Everything built at startup lives as long as the server: frozen, the collector stops
    scanning it again and again (full collections of it were the p99 latency). A request
    allocates a few hundred objects, nearly all freed by reference counting: a young-generation
    collection every 700 allocations then finds almost nothing; one per 20,000 was 5-10 % more
    poll+ack throughput (docs/benchmarks.md).

    The collector is the process's: apps served at once in one process (tests) share one
    tuning, made by the first to start and undone by the last to stop. A freeze made by someone
    else before is left alone.
    """

    THRESHOLD = 20_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._serving: set[int] = set()  # ids of the apps serving now
        self._threshold: tuple[int, int, int] | None = None
        self._froze = False

    def start(self, app: Litestar) -> None:
        """``app`` starts serving (a startup hook)."""
        with self._lock:
            first = not self._serving
            self._serving.add(id(app))
            if not first:
                return
            self._threshold = gc.get_threshold()
            self._froze = gc.get_freeze_count() == 0
            if self._froze:
                gc.collect()
                gc.freeze()
            gc.set_threshold(self.THRESHOLD, *self._threshold[1:])

    def stop(self, app: Litestar) -> None:
        """``app`` stops serving (a shutdown hook; also called when its startup failed)."""
        with self._lock:
            if id(app) not in self._serving:
                return
            self._serving.discard(id(app))
            if self._serving or self._threshold is None:
                return
            gc.set_threshold(*self._threshold)
            if self._froze:
                gc.unfreeze()
            self._threshold, self._froze = None, False


GC_TUNING = GcTuning()
"""The process's one ``GcTuning`` (the collector is per process)."""


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging setup, plus sqew's own logger (errors with request ids) on stderr."""
    cfg: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    cfg["loggers"]["sqew"] = {"handlers": ["default"], "level": level.upper(),
                              "propagate": False}
    return cfg


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
