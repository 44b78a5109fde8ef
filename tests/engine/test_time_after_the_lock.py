"""A write that waits for the write lock reads the time once it has the lock.

Another connection holds SQLite's write lock; a poll, an enqueue or a nack starts and waits for
it; meanwhile the clock moves on 5 s; then the lock is released. What the write derives from
"now" (a lease's end; enqueued_at, available_at and expires_at; a nack's available_at) counts
from when the write ran, not from when it began to wait, or a poll would hand out a lease that
had already run out.

Both writers: the embedded Client (one transaction per call, on the caller's thread) and a
server's group commit (the transaction begins on its loop and waits on its thread pool). The
moment a call waits for the lock is observed, never guessed: for the embedded Client, the
call's thread has started its first statement (its connection exists already, so that is the
``BEGIN IMMEDIATE`` that waits); for the server, the committer has turned to waiting (its
``PRAGMA busy_timeout`` in the SQL trace). Anything read before that moment is read before the
clock moves.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import pytest

import sqew
from sqew.backends.sqlite import connection as sqlite_connection
from sqew.core.clock import ManualClock

T = TypeVar("T")
STEP_MS = 5000
"""How far the clock moves while the write waits for the lock."""
VISIBILITY_MS = 1000
TTL_MS = 60_000
DELAY_MS = 2000
LOCK_WAIT_S = 30


class Calls:
    """Runs a writer's client calls on a thread of their own; ``waiting`` is set once the
    running call waits for the write lock."""

    def __init__(self, client: sqew.Client, db: Path) -> None:
        self.client = client
        self.db = db
        self.pool = ThreadPoolExecutor(1)
        self.waiting = threading.Event()

    def start(self, call: Callable[[], T]) -> Future[T]:
        """Run ``call`` on the thread; its result later."""
        self.waiting.clear()
        return self.pool.submit(call)

    def until_waiting(self) -> None:
        assert self.waiting.wait(LOCK_WAIT_S), "the call never waited for the write lock"

    def close(self) -> None:
        self.pool.shutdown()
        self.client.close()


class EmbeddedCalls(Calls):
    """The embedded Client: a call's first statement on its thread is the one that waits."""

    def __init__(self, db: Path, clock: ManualClock) -> None:
        super().__init__(sqew.Client(str(db), clock=clock), db)
        # The thread's connection is opened (and set up) by a first call, so that in every
        # later call the first statement is the write's BEGIN.
        self.pool.submit(self.client.list_queues).result()

    def start(self, call: Callable[[], T]) -> Future[T]:
        self.waiting.clear()
        return self.pool.submit(self._watched, call)

    def _watched(self, call: Callable[[], T]) -> T:
        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "c_call" and isinstance(getattr(arg, "__self__", None),
                                                sqlite3.Connection):
                self.waiting.set()  # the call's first statement starts now

        sys.setprofile(profile)
        try:
            return call()
        finally:
            sys.setprofile(None)


class ServerCalls(Calls):
    """A real server in this process (its service reads ``clock``), called over HTTP; its
    SQL trace shows when the group committer turns to waiting for the lock."""

    WAITS = f"PRAGMA busy_timeout={sqlite_connection.BUSY_TIMEOUT_MS}"

    def __init__(self, server: Any, db: Path) -> None:
        super().__init__(sqew.Client(server.url), db)
        self.logger = logging.getLogger("sqew.sql")
        self.saved = self.logger.level, self.logger.propagate
        self.handler = logging.Handler(logging.DEBUG)
        self.handler.emit = self._emit  # type: ignore[method-assign]
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False  # (not on the test's stderr)

    def _emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == self.WAITS:
            self.waiting.set()

    def close(self) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.saved[0])
        self.logger.propagate = self.saved[1]
        super().close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["embedded", "server"])
def calls(
    request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock,
    start_server: Callable[..., Any],
) -> Iterator[Calls]:
    db = tmp_path / "t.db"
    if request.param == "embedded":
        made: Calls = EmbeddedCalls(db, clock)
    else:
        server = start_server(clock=clock, db=str(db), trace_sql=True, reap_interval_ms=600_000)
        made = ServerCalls(server, db)
    made.client.create_queue("q", backoff_base_ms=0)
    # A first poll has the reaper run now, so that the polls of the tests (at this time) do
    # not run it first: their own claim is the write that waits for the lock.
    assert made.client.poll("q") == []
    try:
        yield made
    finally:
        made.close()


@contextlib.contextmanager
def write_lock_held(db: Path) -> Iterator[None]:
    """Another connection holds the database's write lock for the block."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("COMMIT")
    finally:
        conn.close()


def while_the_clock_moves(calls: Calls, clock: ManualClock, call: Callable[[], T]) -> T:
    """Run ``call`` while another connection holds the write lock; once it waits for the lock
    move the clock on by ``STEP_MS``, then release the lock. Returns its result."""
    with write_lock_held(calls.db):
        running = calls.start(call)
        calls.until_waiting()
        clock.advance(STEP_MS)
    return running.result(timeout=LOCK_WAIT_S)


def test_a_lease_counts_from_when_the_poll_got_the_lock(
    calls: Calls, clock: ManualClock
) -> None:
    c = calls.client
    sent = c.enqueue("q", "m").message_id
    started = clock()
    got = while_the_clock_moves(calls, clock, lambda: c.poll("q", visibility_ms=VISIBILITY_MS))
    now = clock()
    assert now == started + STEP_MS
    assert [(m.id, m.lease_expires_at) for m in got] == [(sent, now + VISIBILITY_MS)]


def test_an_enqueue_is_timed_from_when_it_got_the_lock(
    calls: Calls, clock: ManualClock
) -> None:
    c = calls.client
    sent = while_the_clock_moves(
        calls, clock, lambda: c.enqueue("q", "m", ttl_ms=TTL_MS, delay_ms=DELAY_MS))
    now = clock()
    m = c.get_message("q", sent.message_id)
    assert (m.enqueued_at, m.available_at, m.expires_at) == (now, now + DELAY_MS, now + TTL_MS)


def test_a_nack_delay_counts_from_when_the_nack_got_the_lock(
    calls: Calls, clock: ManualClock
) -> None:
    c = calls.client
    c.enqueue("q", "m")
    (held,) = c.poll("q", visibility_ms=600_000)
    result = while_the_clock_moves(
        calls, clock, lambda: c.nack("q", held.id, held.token, delay_ms=DELAY_MS))
    assert result.status == "requeued"
    now = clock()
    assert c.get_message("q", held.id).available_at == now + DELAY_MS
