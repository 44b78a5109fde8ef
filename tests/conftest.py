"""Shared fixtures: a ``client`` for every client and backend the contract runs against.

The contract suite (``tests/contract``) is written once against ``sqew.Client``. A *target*
is one way of reaching a store: today ``local-sqlite`` (a LocalClient on a SQLite file).
Adding ``http-sqlite``, ``local-postgres`` or ``http-postgres`` means writing one factory and
listing it in ``TARGETS``; every contract test then runs on it without a new test.

A factory takes the test's ``tmp_path`` and a clock and returns a ``Target`` holding the client
and the clock the *service* reads. Tests move time with ``clock.advance(ms)`` instead of
sleeping, so the clock must be the one the service uses: for an HTTP target that means a
server run in-process with the clock injected (a factory for which that is impossible passes
``system_clock`` and the clock-driven tests skip on it). A factory raises ``pytest.skip`` when
its backend is unavailable (no PostgreSQL binaries, say).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import sqew
from sqew.config import Settings
from sqew.core.clock import Clock, ManualClock, system_clock


@dataclass
class Target:
    """One client on one store, and the clock the store's service reads.

    Attributes:
        name: the target id (``local-sqlite``, …).
        client: the client under test.
        clock: the service's clock: a ``ManualClock`` when the factory could inject one.
        connect: opens another client on the same store, reading time from the given clock
            (concurrency tests: a second consumer, a producer in another thread).
        sqlite_path: the SQLite file behind the store, when there is one (row-level checks).
    """

    name: str
    client: sqew.Client
    clock: Clock
    connect: Callable[[Clock], sqew.Client]
    sqlite_path: Path | None = None
    _cleanups: list[Callable[[], None]] = field(default_factory=list)

    @property
    def manual(self) -> ManualClock:
        """The clock as a ManualClock; skips the test when time cannot be moved here."""
        if not isinstance(self.clock, ManualClock):
            pytest.skip(f"{self.name}: the service clock cannot be moved from the test")
        return self.clock

    def close(self) -> None:
        """Close the client and everything the factory started, newest first."""
        for cleanup in reversed(self._cleanups):
            with contextlib.suppress(Exception):
                cleanup()


TargetFactory = Callable[[Path, Clock], Target]


def local_sqlite(tmp_path: Path, clock: Clock) -> Target:
    """A LocalClient on ``tmp_path/q.db``."""
    path = tmp_path / "q.db"

    def connect(other_clock: Clock) -> sqew.Client:
        extra = sqew.LocalClient(path, clock=other_clock)
        target._cleanups.append(extra.close)
        return extra

    client = sqew.LocalClient(path, clock=clock)
    target = Target("local-sqlite", client, clock, connect, sqlite_path=path)
    target._cleanups.append(client.close)
    return target


class ServerThread:
    """A real uvicorn server of ``create_app(settings, clock=clock)`` in a thread, on 127.0.0.1
    and a free port. Real HTTP; the service reads the test's clock."""

    def __init__(self, settings: Settings, clock: Clock = system_clock) -> None:
        import uvicorn

        from sqew.server import runner
        from sqew.server.app import create_app

        self.app = create_app(settings, clock=clock)
        self.sock = runner.bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(runner.uvicorn_config(settings, app=self.app))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + SERVER_START_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the test server did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        """Stop serving (graceful: running requests finish) and close the socket."""
        self.server.should_exit = True
        self.thread.join(SERVER_START_S)
        self.sock.close()


SERVER_START_S = 15


def server_settings(db: Path, **extra: object) -> Settings:
    """Settings for a test server on ``db`` (quiet logs, a free port)."""
    return Settings.from_mapping({"db": str(db), "port": 0, "log_level": "warning", **extra})


def http_sqlite(tmp_path: Path, clock: Clock) -> Target:
    """An HttpClient to a real server (in a thread) on ``tmp_path/q.db``, clock injected."""
    path = tmp_path / "q.db"
    server = ServerThread(server_settings(path), clock)

    def connect(other_clock: Clock) -> sqew.Client:
        # One service, one clock: another client of the same server reads the server's.
        extra = sqew.Client(server.url)
        target._cleanups.append(extra.close)
        return extra

    client = sqew.Client(server.url)
    target = Target("http-sqlite", client, clock, connect, sqlite_path=path)
    target._cleanups.extend([server.stop, client.close])
    return target


TARGETS: dict[str, TargetFactory] = {
    "local-sqlite": local_sqlite,
    "http-sqlite": http_sqlite,
    # "local-postgres" / "http-postgres": a cloned template database per test.
}


@pytest.fixture(params=list(TARGETS))
def target_factory(request: pytest.FixtureRequest) -> TargetFactory:
    """The factory of the current target id (the parameter the contract tests run over)."""
    factory: TargetFactory = TARGETS[request.param]
    return factory


@pytest.fixture
def make_target(
    target_factory: TargetFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[Clock], Target]]:
    """Builds more targets of the current kind, each on a fresh store, with a chosen clock."""
    made: list[Target] = []

    def make(clock: Clock) -> Target:
        made.append(target_factory(tmp_path_factory.mktemp("store"), clock))
        return made[-1]

    yield make
    for t in reversed(made):
        t.close()


@pytest.fixture
def target(make_target: Callable[[Clock], Target]) -> Target:
    """The target under test with a ManualClock where the factory can inject one."""
    return make_target(ManualClock())


@pytest.fixture
def client(target: Target) -> sqew.Client:
    """The client under test (see ``target``)."""
    return target.client


@pytest.fixture
def clock(target: Target) -> ManualClock:
    """The service's ManualClock: ``clock.advance(ms)`` moves time for the client under test."""
    return target.manual


@pytest.fixture
def realtime_target(make_target: Callable[[Clock], Target]) -> Target:
    """A target of the current kind on the system clock (long polls across threads)."""
    return make_target(system_clock)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh SQLite file path (not created) for tests that work on files directly."""
    return tmp_path / "q.db"


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., ServerThread]]:
    """Starts real servers in threads: ``start_server(clock=..., **settings)``; all stopped after.

    The database defaults to ``tmp_path/server.db``.
    """
    started: list[ServerThread] = []

    def start(clock: Clock = system_clock, **settings: object) -> ServerThread:
        settings.setdefault("db", str(tmp_path / "server.db"))
        db = Path(str(settings.pop("db")))
        started.append(ServerThread(server_settings(db, **settings), clock))
        return started[-1]

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """One real server (thread, system clock) shared by a module's tests."""
    server = ServerThread(server_settings(tmp_path_factory.mktemp("server") / "m.db"))
    yield server
    server.stop()
