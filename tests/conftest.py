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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import sqew
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


TARGETS: dict[str, TargetFactory] = {
    "local-sqlite": local_sqlite,
    # "http-sqlite": an in-process server on 127.0.0.1:0 with the clock injected,
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
