"""SQLite's waiter: in-process wakes, plus a data-version check for other processes' commits.

Another process (the CLI, another server worker) commits to the same file without telling
this one, except through the file: every commit that may make a message of a queue ready bumps
that queue's ``wakeups`` counter (``SqliteTx.notify``, what PostgreSQL's ``NOTIFY`` is there).
One watcher task per event loop with waits reads ``PRAGMA data_version`` every
``CHANGE_POLL_S`` (a header read); only when it moved does it read the waited queues'
``wakeups`` in one statement, and it wakes the waits of the queues whose counter differs from
what their poll saw before it claimed (or that are gone). So a thousand idle waits cost one
cheap read per tick, and a write to one queue wakes only that queue's polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable
from typing import Any

from sqew.backends.errors import driver_errors
from sqew.backends.wakeups import InProcessWaiter, wake

CHANGE_POLL_S = 0.05
"""How often waits look for commits of other processes."""
IDLE_TICKS = 40
"""Ticks a loop's watcher keeps running after its last wait ended (2 s)."""
log = logging.getLogger("sqew.sqlite")

Snapshot = int | None
"""A queue's ``wakeups`` counter (None: no such queue)."""


class _Watcher:
    """The waits of one event loop and the task that watches the database for them."""

    def __init__(self) -> None:
        self.version: object = None
        self.waits: dict[str, dict[asyncio.Future[None], Any]] = {}
        self.task: asyncio.Task[None] | None = None


class SqliteWaiter(InProcessWaiter):
    """Args:
        connection: the calling thread's connection to the database (read-only use here).
    """

    def __init__(self, connection: Callable[[], sqlite3.Connection]) -> None:
        super().__init__()
        self._connection = connection
        self._watchers: dict[asyncio.AbstractEventLoop, _Watcher] = {}

    def _external_mark(self, queue: str) -> object:
        # The queue's counter now, read before the poll claims: the watcher wakes the wait
        # when it differs from this (one indexed read per wait).
        with driver_errors():
            return _snapshot(self._connection(), queue)

    def _watch(
        self, loop: asyncio.AbstractEventLoop, queue: str, mark: object,
        future: asyncio.Future[None],
    ) -> None:
        watcher = self._watchers.get(loop)
        if watcher is None:
            watcher = self._watchers[loop] = _Watcher()
        watcher.waits.setdefault(queue, {})[future] = mark
        # The next tick compares counters whatever the data version says: a tick between this
        # poll's claim and now may already have seen (and recorded) another process's commit.
        watcher.version = None
        if watcher.task is None:
            watcher.task = loop.create_task(self._run(loop, watcher))

    def _unwatch(
        self, loop: asyncio.AbstractEventLoop, queue: str, future: asyncio.Future[None]
    ) -> None:
        watcher = self._watchers.get(loop)
        if watcher is None:
            return
        waits = watcher.waits.get(queue)
        if waits is not None:
            waits.pop(future, None)
            if not waits:
                del watcher.waits[queue]

    async def _run(self, loop: asyncio.AbstractEventLoop, watcher: _Watcher) -> None:
        # The watcher outlives its last wait by ``IDLE_TICKS``, so a consumer's next poll
        # finds it running rather than starting it again.
        idle = 0
        try:
            while not self.closed and idle < IDLE_TICKS:
                await asyncio.sleep(CHANGE_POLL_S)
                idle = 0 if watcher.waits else idle + 1
                try:
                    self._check(watcher)
                except Exception:  # keep watching: a busy or closing database is tried again
                    log.debug("checking for other processes' commits failed", exc_info=True)
        finally:
            if self._watchers.get(loop) is watcher:
                del self._watchers[loop]

    def _check(self, watcher: _Watcher) -> None:
        conn = self._connection()
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version == watcher.version:
            return
        watcher.version = version
        names = list(watcher.waits)
        if not names:
            return
        marks = ", ".join("?" * len(names))
        rows = conn.execute(
            f"SELECT name, wakeups FROM queues WHERE name IN ({marks})", names,
        ).fetchall()
        now: dict[str, Snapshot] = {name: None for name in names}
        for name, wakeups in rows:
            now[name] = int(wakeups)
        for name, waits in watcher.waits.items():
            for future, seen in list(waits.items()):
                if seen != now[name]:
                    wake(future)

    def close(self) -> None:
        super().close()
        for watcher in list(self._watchers.values()):
            if watcher.task is not None:
                with contextlib.suppress(RuntimeError):
                    watcher.task.get_loop().call_soon_threadsafe(watcher.task.cancel)


def _snapshot(conn: sqlite3.Connection, queue: str) -> Snapshot:
    row = conn.execute("SELECT wakeups FROM queues WHERE name = ?", (queue,)).fetchone()
    return None if row is None else int(row[0])
