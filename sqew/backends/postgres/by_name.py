"""The writes that find their queue by name, each one PostgreSQL statement: an enqueue, a claim
and an ack (``statements.ENQUEUE``, ``CLAIM``, ``ACK``), and what they assume of the queues
(``QueueCache``).

``PostgresTx`` sends them in its transaction (``Tx.enqueue_by_name``, ``claim_by_name``,
``ack_by_name``); ``PostgresFast`` sends each alone, a transaction of its own (one round trip,
``FastPaths``). Each statement checks what it assumed: where the queue is not as the cache
says, it writes nothing and the function answers ``MISSED`` (the caller goes the neutral way,
``sqew.backends.sql_by_name``).

- **Enqueue** builds its rows from the queue's settings as the cache has them, and its statement
  counts and inserts only if the queue row still has them (same id, same settings, no quota).
  Cached settings only ever let an enqueue write: one they would refuse goes the neutral way,
  on the queue's current settings. A queue with a quota always does: admitting needs its
  current depth and bucket.
- **Claim** reads the queue and claims in one statement, unless leases of the queue ended
  (then it claims nothing and says so); it assumes the queue's order (FIFO unless the cache
  says LIFO).
- **Ack** locks the queue's row first (the lock order of every write), deletes (or archives)
  the messages and counts them; items that missed (rare) are looked up by one more statement,
  whose snapshot is fresh (the ack's predates its wait for the queue's row). It assumes the
  queue does not archive unless the cache says it does.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import msgspec

from sqew import errors
from sqew.backends.base import MISSED, ClaimQueue, MessageRow, Missed, NewMessage, QueueLimits
from sqew.backends.postgres import statements as sql
from sqew.backends.sql import in_delivery_order

Send = Callable[[str, dict[str, Any]], Any]
"""Sends one statement (``%(name)s`` parameters) on the transaction object's cursor, in its
transaction or alone; the cursor."""

RowsFor = Callable[[QueueLimits], Sequence[NewMessage]]
_QUEUE_WIDTH = len(sql.CLAIM_QUEUE)  # how many columns of a claim's answer are its queue's
_encode_rows = msgspec.json.Encoder().encode
TOKENS_AHEAD = 64
"""Tokens a transaction object draws from the OS at once for claims of one (one system call
instead of one per claim)."""
_CACHED_MAX = 10_000


class Sender(Protocol):
    """What a by-name write needs of the object that sends it (``PostgresTx``, the fast
    paths): the backend's cache, the mark on its notifications, its drawn-ahead tokens."""

    cache: QueueCache
    origin: str
    tokens_ahead: list[str]

    def drop_large_answer(self, size: int) -> None:
        """Let go of a connection's buffers after an answer of ``size`` bytes."""


class QueueCache:
    """What one backend (one process) assumes of its queues for the one-statement writes: the
    settings of the last enqueue to each (``QueueLimits``), which queues are LIFO, which
    archive their acked messages. Shared by the backend's threads.

    One invalidation rule: every statement that relies on an entry checks it against the queue
    row it locks, and writes nothing if they differ; the caller then replaces the entry with
    what the database says, or drops it. A stale entry costs one statement, never a wrong
    write. Bounded: past ``_CACHED_MAX`` queues, a kind of entry starts afresh.
    """

    def __init__(self) -> None:
        self.enqueue: dict[str, QueueLimits] = {}
        self.lifo: set[str] = set()
        self.archive: set[str] = set()
        self._lock = threading.Lock()

    def remember(self, limits: QueueLimits) -> None:
        """The settings an enqueue to ``limits.name`` found current."""
        with self._lock:
            if len(self.enqueue) > _CACHED_MAX:
                self.enqueue.clear()
            self.enqueue[limits.name] = limits

    def forget(self, name: str) -> None:
        """An enqueue's statement found the queue's settings other than remembered."""
        with self._lock:
            self.enqueue.pop(name, None)

    def remembering(self, rows_for: RowsFor) -> RowsFor:
        """``rows_for``, remembering the settings it is called with (current ones)."""
        def remember_then_build(limits: QueueLimits) -> Sequence[NewMessage]:
            self.remember(limits)
            return rows_for(limits)

        return remember_then_build

    def set_lifo(self, name: str, lifo: bool) -> None:
        """The queue's order, as a claim found it."""
        self._mark(self.lifo, name, lifo)

    def set_archive(self, name: str, archive: bool) -> None:
        """Whether the queue archives, as an ack found it."""
        self._mark(self.archive, name, archive)

    def _mark(self, names: set[str], name: str, on: bool) -> None:
        with self._lock:
            if on and len(names) > _CACHED_MAX:
                names.clear()
            (names.add if on else names.discard)(name)


def tokens(count: int) -> list[str]:
    """``count`` fresh lease tokens: 32 hex characters of the OS's secure random source each
    (as the server's ``NEW_TOKEN`` makes)."""
    hexed = secrets.token_hex(16 * count)
    return [hexed[i:i + 32] for i in range(0, 32 * count, 32)]


def enqueue(
    tx: Sender, send: Send, name: str, count: int, rows_for: RowsFor
) -> list[int] | Missed:
    """Count and insert the rows ``rows_for`` builds from the cached settings of queue
    ``name``: their ids in order, or ``MISSED`` (nothing written) where there are none, they
    refuse a row, or the queue's are others now (or it has a quota, or is gone)."""
    kept = tx.cache.enqueue.get(name)
    if kept is None or kept.max_depth or kept.rate_limit_per_s:
        return MISSED
    # Cached settings may only write, never refuse: a refusal (a payload too large, a bad
    # signature) is for the queue's current settings to make, which may have changed.
    try:
        rows = rows_for(kept)
    except errors.SqewError:
        return MISSED
    if len(rows) != count:
        return MISSED
    params: dict[str, Any] = {
        "n": len(rows), "name": name, "kept_id": kept.id, "mpb": kept.max_payload_bytes,
        "ret": kept.retention_ms, "kept_lifo": kept.lifo, "secret": kept.hmac_secret,
        "note": f"{tx.origin} {name}",
    }
    if len(rows) == 1:
        params.update(rows[0]._asdict())
        statement = sql.ENQUEUE["one"]
    else:
        params["rows"] = _encode_rows(rows).decode()
        statement = sql.ENQUEUE["many"]
    ids = [int(r[0]) for r in send(statement, params).fetchall()]
    if not ids:
        tx.cache.forget(name)
        return MISSED
    ids.sort()  # a sequence draws them in the order of the rows
    return ids


def claim(
    tx: Sender, send: Send, name: str, now: int, limit: int, visibility_ms: int | None
) -> tuple[ClaimQueue, list[MessageRow] | None] | Missed | None:
    """``Tx.claim_by_name`` in one statement; ``MISSED`` (nothing claimed) where the queue's
    order is not the cached one (the cache now has it right)."""
    lifo = name in tx.cache.lifo
    params: dict[str, Any] = {"now": now, "name": name, "vis": visibility_ms}
    if limit == 1:
        ahead = tx.tokens_ahead
        if not ahead:
            ahead.extend(tokens(TOKENS_AHEAD))
        params["token"] = ahead.pop()
    else:
        params["n"] = limit
    rows = send(sql.CLAIM[lifo, "one" if limit == 1 else "many"], params).fetchall()
    if not rows:
        return None
    first = rows[0]
    q = ClaimQueue._make(first[:len(ClaimQueue._fields)])
    q_lifo, ended = bool(first[_QUEUE_WIDTH - 2]), first[_QUEUE_WIDTH]
    if q_lifo != lifo:
        tx.cache.set_lifo(name, q_lifo)
        return MISSED
    if q.paused:  # nothing was claimed (nor swept: the reaper sweeps ended leases)
        return q, []
    if ended:  # leases ended: nothing was claimed
        return q, None
    first_message = _QUEUE_WIDTH + 1  # (after the queue's columns and ``ended``)
    claimed = [MessageRow._make(r[first_message:]) for r in rows
               if r[first_message] is not None]
    tx.drop_large_answer(sum(len(m.payload) for m in claimed))
    return q, in_delivery_order(claimed, lifo)


def ack(
    tx: Sender, send: Send, name: str, items: Sequence[tuple[int, str]], now: int
) -> list[bool | None] | Missed | None:
    """``Tx.ack_by_name`` in one statement (and one more read for items that missed);
    ``MISSED`` (nothing acked) where the queue archives other than cached (the cache now has
    it right)."""
    archive = name in tx.cache.archive
    if len(items) == 1:
        kind = "one"
        params: dict[str, Any] = {"name": name, "id": items[0][0], "token": items[0][1],
                                  "now": now}
    else:
        kind = "many"
        params = {"name": name, "ids": [i for i, _ in items], "tokens": [t for _, t in items],
                  "now": now}
    row = send(sql.ACK[archive, kind], params).fetchone()
    if row is None:
        return None
    if row[1] != archive:
        tx.cache.set_archive(name, bool(row[1]))
        return MISSED
    if len(items) == 1 and row[2]:  # (the statement deletes only the item it names)
        return [True]
    queue_id, deleted = row[0], set(row[2])  # "<id> <token>" of each message acked
    done: set[int] = set()
    out: list[bool | None] = []
    missed: dict[int, int] = {}  # item index → id: not acked, and not acked before it
    for index, (msg_id, token) in enumerate(items):  # as one ack at a time would answer
        if msg_id not in done and f"{msg_id} {token}" in deleted:
            done.add(msg_id)
            out.append(True)
            continue
        out.append(None)  # (an item repeating one acked before it: that message is gone)
        if msg_id not in done:
            missed[index] = msg_id
    # A miss of a message a later item acked: it was there (under another token). Other
    # misses (rare): whether they are there, read afresh (the statement's snapshot predates
    # its wait for the queue's row, during which another transaction may have taken it).
    unknown = {i for i in missed.values() if i not in done}
    there = {int(r[0]) for r in send(
        sql.STILL_THERE, {"ids": sorted(unknown), "q": queue_id}).fetchall()} if unknown else set()
    for index, msg_id in missed.items():
        if msg_id in done or msg_id in there:
            out[index] = False
    return out
