"""The sides of ``bench/postgres.py``: hand-written psycopg (``raw``) and sqew's Client
(``sqew``), each doing the same work, and sqew with one of its PostgreSQL statement variants
turned off (``sqew-without-<VARIANT>``, ``bench/pg_variants.py``).

Every side works in processes of its own: one enqueuer (``Enqueuers``: it times its chunks of
work itself) and the consumers of a consumer case (``consumers``). A process of a side
``sqew-without-X`` turns X off (``apply_side``) before it opens its Client.
"""

from __future__ import annotations

import gc
import itertools
import json
import multiprocessing
import queue
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from bench import server as http_bench

PAYLOAD: dict[str, Any] = json.loads(http_bench.payload_text())
assert len(json.dumps(PAYLOAD, separators=(",", ":")).encode()) in range(190, 211)
QUEUE = "bench"
BATCH = 100
RAW, SQEW = "raw", "sqew"
WITHOUT = "sqew-without-"
"""The prefix of a side that is sqew with one statement variant turned off."""
DEDUP_WINDOW_MS = 300_000  # a queue's default ``dedup_window_ms``
LEASE_MS = 30_000
T = TypeVar("T")


def apply_side(side: str) -> None:
    """Set this process up for ``side``: a ``sqew-without-X`` side turns variant X off."""
    if side.startswith(WITHOUT):
        from bench import pg_variants

        pg_variants.disable(side[len(WITHOUT):])


def turn_order(sides: list[T], turn: int) -> list[T]:
    """The sides in the order of their ``turn``-th turns: alternating which goes first."""
    return sides if turn % 2 == 0 else sides[::-1]


_KEYS = itertools.count()
_KEY_PREFIX = secrets.token_hex(4)  # (a process's keys are its own)


def _key() -> str:
    """A fresh idempotency key."""
    return f"{_KEY_PREFIX}-{next(_KEYS)}"


# --- raw psycopg ---------------------------------------------------------------------------------
INSERT = ("INSERT INTO messages (queue_id, payload, priority, attributes, attempts, enqueued_at, "
          "available_at, expires_at, lifo) VALUES (1, %s, 0, NULL, 0, %s, %s, %s, false)")
INSERT_ID = INSERT + " RETURNING id"
DEDUP = "INSERT INTO dedup (queue_id, key, message_id, expires_at) VALUES (1, %s, %s, %s)"
CLAIM = (
    "UPDATE messages m SET lease_expires_at = %(until)s, token = md5(random()::text), "
    "attempts = m.attempts + 1 FROM (SELECT id FROM messages WHERE queue_id = 1 "
    "AND lease_expires_at IS NULL AND lifo = false AND available_at <= %(now)s "
    "AND expires_at > %(now)s ORDER BY priority DESC, available_at, id LIMIT %(n)s "
    "FOR UPDATE SKIP LOCKED) c WHERE m.id = c.id RETURNING m.id, m.token, m.payload"
)
DELETE_ONE = "DELETE FROM messages WHERE id = %s AND queue_id = 1 AND token = %s"
# The ids as the index condition: joined to unnest() instead, a prepared statement's generic
# plan (PostgreSQL's choice after five executions) reads every message.
DELETE_MANY = "DELETE FROM messages WHERE id = ANY(%s) AND token = ANY(%s)"
EXTEND_MANY = "UPDATE messages SET lease_expires_at = %s WHERE id = ANY(%s) AND token = ANY(%s)"


def raw_schema() -> list[str]:
    """sqew's ``messages`` and ``dedup`` tables and their indexes for PostgreSQL, without
    foreign keys (raw has no table of queues; sqew's messages have no foreign key either,
    ``schema.MESSAGES_QUEUE_KEY``)."""
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateIndex, CreateTable

    from sqew.backends.schema import metadata

    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    out: list[str] = []
    for name in ("messages", "dedup"):
        table = metadata.tables[name]
        out.append(str(CreateTable(table, include_foreign_key_constraints=[])
                       .compile(dialect=dialect)))
        out += [str(CreateIndex(i).compile(dialect=dialect)) for i in table.indexes]
    return out


def _row() -> tuple[str, int, int, int]:
    now = int(time.time() * 1000)  # like sqew: the payload as a Python value, stored as JSON
    return (json.dumps(PAYLOAD, separators=(",", ":")), now, now, now + 345_600_000)


class Raw:
    """Hand-written psycopg doing what sqew does, on sqew's table shape."""

    def __init__(self, conninfo: str) -> None:
        self.conn = psycopg.connect(conninfo, autocommit=True)

    def single(self, n: int) -> None:
        execute = self.conn.execute
        for _ in range(n):
            execute(INSERT, _row())  # autocommit: one transaction each

    def batch(self, batches: int) -> None:
        for _ in range(batches):
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.executemany(INSERT, [_row() for _ in range(BATCH)])

    def keyed_single(self, n: int) -> None:
        """A message and its idempotency record, in a transaction each."""
        execute = self.conn.execute
        for _ in range(n):
            with self.conn.transaction():
                row = _row()
                msg_id = execute(INSERT_ID, row).fetchone()[0]  # type: ignore[index]
                execute(DEDUP, (_key(), msg_id, row[1] + DEDUP_WINDOW_MS))

    def keyed_batch(self, batches: int) -> None:
        """100 messages and their idempotency records, in a transaction each 100."""
        for _ in range(batches):
            with self.conn.transaction(), self.conn.cursor() as cur:
                rows = [_row() for _ in range(BATCH)]
                cur.executemany(INSERT_ID, rows, returning=True)
                ids = [int(c.fetchone()[0]) for c in cur.results()]  # type: ignore[index]
                cur.executemany(DEDUP, [(_key(), msg_id, row[1] + DEDUP_WINDOW_MS)
                                        for msg_id, row in zip(ids, rows, strict=True)])

    def close(self) -> None:
        self.conn.close()


def raw_consume(conn: psycopg.Connection[Any], count: int, batch: int, extend: bool) -> int:
    """Claim (and with ``extend``, extend the leases of) and delete ``count`` messages,
    ``batch`` at a time; returns empty claims."""
    empty = done = 0
    while done < count:
        now = int(time.time() * 1000)
        rows = conn.execute(CLAIM, {"until": now + LEASE_MS, "now": now,
                                    "n": min(batch, count - done)}).fetchall()
        if not rows:
            empty += 1
            continue
        [json.loads(p) for _, _, p in rows]  # a consumer reads its payloads
        ids, tokens = [r[0] for r in rows], [r[1] for r in rows]
        if extend:
            conn.execute(EXTEND_MANY, (int(time.time() * 1000) + LEASE_MS, ids, tokens))
        if batch == 1:
            conn.execute(DELETE_ONE, (ids[0], tokens[0]))
        else:
            conn.execute(DELETE_MANY, (ids, tokens))
        done += len(rows)
    return empty


# --- sqew --------------------------------------------------------------------------------------
class Sqew:
    """sqew's Client doing the same."""

    def __init__(self, url: str) -> None:
        import sqew

        self.client = sqew.Client(url)  # type: ignore[abstract]

    def single(self, n: int) -> None:
        enqueue = self.client.enqueue
        for _ in range(n):
            enqueue(QUEUE, PAYLOAD)

    def batch(self, batches: int) -> None:
        items = [{"payload": PAYLOAD} for _ in range(BATCH)]
        for _ in range(batches):
            self.client.enqueue_batch(QUEUE, items)

    def keyed_single(self, n: int) -> None:
        enqueue = self.client.enqueue
        for _ in range(n):
            enqueue(QUEUE, PAYLOAD, idempotency_key=_key())

    def keyed_batch(self, batches: int) -> None:
        for _ in range(batches):
            self.client.enqueue_batch(
                QUEUE, [{"payload": PAYLOAD, "idempotency_key": _key()} for _ in range(BATCH)])

    def close(self) -> None:
        self.client.close()


def sqew_consume(client: Any, count: int, batch: int, extend: bool) -> int:
    """Poll (and with ``extend``, extend the leases of) and ack ``count`` messages, ``batch``
    at a time; returns empty polls."""
    empty = done = 0
    while done < count:
        got = client.poll(QUEUE, batch=min(batch, count - done))
        if not got:
            empty += 1
            continue
        if extend:
            client.extend_leases(QUEUE, [(m.id, m.token, LEASE_MS) for m in got])
        if batch == 1:
            client.ack(QUEUE, got[0].id, got[0].token)
        else:
            client.ack_batch(QUEUE, [(m.id, m.token) for m in got])
        done += len(got)
    return empty


def enqueuer(side: str, where: str) -> Raw | Sqew:
    """The side's enqueuing connection or Client."""
    return Raw(where) if side == RAW else Sqew(where)


def fill(side: str, where: str, count: int) -> None:
    """Put ``count`` ready messages (untimed), in batches of 100; run in the bench's own
    process, a fill is sqew's full way whatever variant ``side`` turns off (it leaves the
    same messages)."""
    impl = enqueuer(side, where)
    try:
        impl.batch(-(-count // BATCH))
    finally:
        impl.close()


# --- the processes -------------------------------------------------------------------------------
def _enqueuer(side: str, where: str, tasks: Any, answers: Any) -> None:
    """One side's enqueuing process: runs the tasks ``Enqueuers.ask`` sends until None."""
    apply_side(side)
    impl: Raw | Sqew | None = None
    while (task := tasks.get()) is not None:
        try:
            what, *args = task
            took = 0.0
            if what == "open":
                impl = enqueuer(side, where)
            elif what == "close" and impl is not None:
                impl.close()
                impl = None
            elif what == "warm":  # connections, prepared statements; then the garbage
                getattr(impl, args[0])(args[1])
                gc.collect()  # (a full collection inside a short measure cost up to a third)
            elif what == "run":
                run = getattr(impl, args[0])
                started = time.perf_counter()
                run(args[1])
                took = time.perf_counter() - started
            elif what != "close":
                raise ValueError(f"no such task: {what}")
            answers.put((True, took))
        except Exception as exc:  # reported to the asking process, which stops the run
            answers.put((False, repr(exc)))
    if impl is not None:
        impl.close()


class Enqueuers:
    """An enqueuing process per side (``where``: side → its database), each opening its
    side's connection or Client and running chunks of work on request, timing them itself."""

    def __init__(self, where: dict[str, str]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._tasks = {side: ctx.Queue() for side in where}
        self._answers = {side: ctx.Queue() for side in where}
        self._procs = {side: ctx.Process(target=_enqueuer, args=(
            side, where[side], self._tasks[side], self._answers[side])) for side in where}
        for p in self._procs.values():
            p.start()

    def ask(self, side: str, *task: Any) -> float:
        """Run ``task`` in ``side``'s process: ``("open",)``, ``("close",)``, ``("warm",
        method, n)`` or ``("run", method, n)`` (``Raw``'s and ``Sqew``'s methods); the
        seconds a run took."""
        self._tasks[side].put(task)
        while True:
            try:
                ok, value = self._answers[side].get(timeout=1.0)
                break
            except queue.Empty:
                proc = self._procs[side]
                if not proc.is_alive():
                    raise RuntimeError(f"the enqueuer of {side} exited ({proc.exitcode})") \
                        from None
        if not ok:
            raise RuntimeError(f"the enqueuer of {side} failed: {value}")
        return float(value)

    def close(self) -> None:
        for tasks in self._tasks.values():
            tasks.put(None)
        for p in self._procs.values():
            p.join(60)
            if p.is_alive():
                p.kill()


def _consumer(side: str, where: str, count: int, turns: int, batch: int, extend: bool,
              go: Any, out: Any) -> None:
    """One consumer process: connect; at each of its side's ``turns``, wait for the side's
    other consumers, consume ``count`` messages and report the span."""
    apply_side(side)
    if side == RAW:
        conn: Any = psycopg.connect(where, autocommit=True)
        consume: Callable[[Any, int, int, bool], int] = raw_consume
    else:
        import sqew

        conn = sqew.Client(where)  # type: ignore[abstract]
        conn.stats(QUEUE)  # the backend opened: connections, schema check
        consume = sqew_consume
    try:
        for _ in range(turns):
            gc.collect()  # garbage from before, not collected inside the measure
            go.wait()
            started = time.monotonic()  # CLOCK_MONOTONIC: comparable across processes
            empty = consume(conn, count, batch, extend)
            out.put((started, time.monotonic(), empty))
    finally:
        conn.close()


def consumers(where: dict[str, str], n: int, total: int, batch: int, turns: int,
              wal: Callable[[], int], extend: bool = False) -> dict[str, tuple[float, int, int]]:
    """``n`` consumer processes per side, each side taking ``total`` messages in ``turns``
    turns, the sides alternating; per side: messages per second over the sum of its turns'
    spans (first start to last finish), empty claims, WAL bytes written in its turns."""
    ctx = multiprocessing.get_context("spawn")
    each = total // (n * turns)
    sides = list(where)
    go = {side: ctx.Barrier(n + 1) for side in sides}  # its consumers and this process
    out = {side: ctx.Queue() for side in sides}
    procs = [ctx.Process(target=_consumer, args=(
        side, where[side], each, turns, batch, extend, go[side], out[side]))
             for side in sides for _ in range(n)]
    for p in procs:
        p.start()
    spans = dict.fromkeys(sides, 0.0)
    empties = dict.fromkeys(sides, 0)
    wrote = dict.fromkeys(sides, 0)
    try:
        for turn in range(turns):
            for side in turn_order(sides, turn):
                before = wal()
                go[side].wait(timeout=600)
                results = [out[side].get(timeout=600) for _ in range(n)]
                spans[side] += max(r[1] for r in results) - min(r[0] for r in results)
                empties[side] += sum(r[2] for r in results)
                wrote[side] += wal() - before
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
    return {side: (each * n * turns / spans[side], empties[side], wrote[side])
            for side in sides}
