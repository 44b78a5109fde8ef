"""The embedded peers of sqew: persist-queue's ``SQLiteAckQueue`` and litequeue.

Each adapter does what the embedded benchmark asks of sqew, through the library's public API,
the way its documentation shows it for one thread that both produces and consumes:

- ``single(n)``: ``n`` messages put one call at a time, each call committed on return;
- ``poll_ack(n, 1)``: ``n`` messages taken and acknowledged one at a time (persist-queue:
  ``get()`` + ``ack(item)``; litequeue: ``pop()`` + ``done(message_id)``).

Durability is made equal to sqew's (SQLite WAL, ``synchronous=NORMAL``) and checked on the
connection itself (:func:`durability`):

- litequeue 0.9 sets ``journal_mode=WAL`` and ``synchronous=NORMAL`` itself on its connection
  (``LiteQueue.__init__``); nothing to change.
- persist-queue 1.1.0 sets ``journal_mode=WAL`` (``SQLiteBase._new_db_connection``) but leaves
  ``synchronous`` at SQLite's default, FULL (2); the adapter runs ``PRAGMA synchronous=NORMAL``
  on its connection (with ``multithreading=False``, the default, ``_putter`` and ``_getter``
  are one connection).

Payloads are the benchmark's Python value; litequeue stores text, so the adapter
``json.dumps`` it per put (200 bytes) and ``json.loads`` it per pop, as a user would;
persist-queue is given its own JSON serializer (``persistqueue.serializers.json``: 202 bytes,
``json.dumps`` with the default separators) instead of its default, pickle, so that all sides
store JSON text.
"""

from __future__ import annotations

import json
import sqlite3
from importlib.metadata import version
from pathlib import Path
from typing import Any

# The package names on PyPI, also the side names in the results.
PERSIST_QUEUE = "persist-queue"
LITEQUEUE = "litequeue"
PEERS = (PERSIST_QUEUE, LITEQUEUE)


def versions() -> dict[str, str]:
    """The installed version of each peer."""
    return {name: version(name) for name in PEERS}


def durability(conn: sqlite3.Connection) -> tuple[str, int]:
    """The journal mode and ``synchronous`` level in force on ``conn``."""
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    return str(mode).lower(), int(sync)


def _check(name: str, conn: sqlite3.Connection) -> None:
    # 1 is NORMAL; sqew's Client (durability "normal") and the raw baseline use WAL + NORMAL.
    got = durability(conn)
    if got != ("wal", 1):
        raise RuntimeError(f"{name}: journal_mode/synchronous are {got}, not ('wal', 1)")


class PersistQueue:
    """persist-queue's ``SQLiteAckQueue`` (one connection: ``multithreading=False``)."""

    name = PERSIST_QUEUE

    def __init__(self, path: Path, payload: Any) -> None:
        import persistqueue
        import persistqueue.serializers.json

        self.payload = payload
        # path is a directory: persist-queue keeps its database in path/data.db.
        self.queue = persistqueue.SQLiteAckQueue(
            str(path), multithreading=False, serializer=persistqueue.serializers.json
        )
        conn = self.queue._putter
        assert conn is not None
        conn.execute("PRAGMA synchronous=NORMAL")  # its default is SQLite's, FULL
        _check(self.name, conn)
        assert self.queue._getter is conn, "multithreading=False shares one connection"
        self.conn: sqlite3.Connection = conn

    def single(self, n: int) -> None:
        put, payload = self.queue.put, self.payload
        for _ in range(n):
            put(payload)  # BEGIN (implicit) + INSERT + COMMIT

    def poll_ack(self, cycles: int, batch: int) -> None:
        assert batch == 1, "persist-queue gets one item at a time"
        get, ack = self.queue.get, self.queue.ack
        for _ in range(cycles):
            item = get(block=False)  # SELECT the first ready row, then UPDATE status + COMMIT
            ack(item)  # UPDATE status + COMMIT

    def close(self) -> None:
        self.queue.close()


class LiteQueuePeer:
    """litequeue's ``LiteQueue`` on a file (it opens its connection in autocommit mode)."""

    name = LITEQUEUE

    def __init__(self, path: Path, payload: Any) -> None:
        from litequeue import LiteQueue  # type: ignore[import-untyped]

        self.payload = payload
        self.queue = LiteQueue(str(path))
        self.conn: sqlite3.Connection = self.queue.conn
        _check(self.name, self.conn)

    def single(self, n: int) -> None:
        put, payload, dumps = self.queue.put, self.payload, json.dumps
        for _ in range(n):
            put(dumps(payload, separators=(",", ":")))  # one INSERT, autocommitted

    def poll_ack(self, cycles: int, batch: int) -> None:
        assert batch == 1, "litequeue pops one message at a time"
        pop, done = self.queue.pop, self.queue.done
        for _ in range(cycles):
            message = pop()  # BEGIN IMMEDIATE + UPDATE … RETURNING + COMMIT
            json.loads(message.data)
            done(message.message_id)  # UPDATE status, autocommitted

    def close(self) -> None:
        self.queue.close()
