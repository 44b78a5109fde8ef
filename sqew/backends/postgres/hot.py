"""The hot paths on PostgreSQL: an enqueue, a claim and an ack in one statement each.

``SqlTx`` composes each of two or three statements (``sqew.backends.sql_hot``); here every
one is a single statement with data-modifying CTEs, so a transaction of one operation is one
round trip (``PostgresTx.solo``: sent without ``BEGIN``, it commits by itself).

- **Enqueue** builds its rows from the queue's limits kept from an earlier enqueue (``Limits``,
  per backend, i.e. per process), and its statement counts and inserts only if the queue row
  still has them (same id, same settings, no quota): otherwise it writes nothing, and the
  enqueue runs again on the queue's current limits (``SqlTx``'s way, which refreshes them). Kept
  limits only ever let an enqueue write: one they would refuse runs on the current limits too.
  A queue with a quota always goes that way: admitting needs its current depth and bucket.
- **Claim** reads the queue and claims in one statement, unless leases of the queue ended
  (then it claims nothing and says so); it assumes the queue's order (FIFO unless this
  process saw it LIFO) and claims again in the other when the queue says it was wrong.
- **Ack** locks the queue's row first (the lock order of every write), deletes (or archives)
  the messages and counts them; items that missed (rare) are looked up by one more statement,
  whose snapshot is fresh (the ack's predates its wait for the queue's row). It assumes the
  queue does not archive unless this process saw it archive (only then does it read what the
  archive keeps), and acks by ``SqlTx``'s way when the queue says it was wrong.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from sqew import errors
from sqew.backends.base import ClaimQueue, MessageRow, NewMessage, QueueLimits
from sqew.backends.postgres.connection import CHANNEL
from sqew.backends.sql import SqlTx, in_delivery_order
from sqew.backends.sql_held import ARCHIVED

_MSG_COLS = ", ".join(MessageRow._fields)
# What a claim reads of its queue: ``ClaimQueue``'s columns, then what a wrong guess of the
# queue's order needs (the sweep of ended leases reads the whole row: core's ``claim``).
_CLAIM_Q = (*ClaimQueue._fields, "lifo", "visibility_ms")
_NC = len(_CLAIM_Q)

def _enqueue_sql(rows: str) -> str:
    """Count and insert ``rows`` (a ``SELECT`` list of the new rows' values, ``FROM q``
    and more), provided the queue row has the limits the rows were built with."""
    return (
        "WITH q AS (UPDATE queues SET depth = depth + %(n)s, "
        "enqueued_total = enqueued_total + %(n)s "
        "WHERE name = %(name)s AND id = %(id)s AND max_payload_bytes = %(mpb)s "
        "AND retention_ms = %(ret)s AND lifo = %(lifo)s AND max_depth = 0 "
        "AND rate_limit_per_s = 0 AND hmac_secret IS NOT DISTINCT FROM %(secret)s "
        "RETURNING id), "
        "ins AS (INSERT INTO messages (queue_id, payload, priority, attributes, attempts, "
        "enqueued_at, available_at, expires_at, lifo, traceparent, tracestate) "
        f"SELECT q.id, {rows} RETURNING id), "
        f"note AS (SELECT pg_notify('{CHANNEL}', %(note)s) FROM q) "
        "SELECT ins.id FROM ins, note"
    )


# One row: its values as parameters. More: as one JSON array of arrays (msgspec writes it in
# C; psycopg's own adaptation of a list costs more per value than the statement does).
_ENQUEUE_ONE = _enqueue_sql(
    "%(p)s, %(pr)s, %(a)s, 0, %(e)s, %(av)s, %(x)s, %(l)s, %(tp)s, %(ts)s FROM q"
)
_ENQUEUE_MANY = _enqueue_sql(
    "r->>0, CAST(r->>1 AS INT), r->>2, 0, CAST(r->>3 AS BIGINT), CAST(r->>4 AS BIGINT), "
    "CAST(r->>5 AS BIGINT), CAST(r->>6 AS BOOLEAN), r->>7, r->>8 "
    "FROM q, json_array_elements(CAST(%(rows)s AS JSON)) AS r"
)
_ROW_COLUMNS = ("p", "pr", "a", "e", "av", "x", "l", "tp", "ts")  # NewMessage[1:]
_encode_rows = msgspec.json.Encoder().encode



def _ack_sql(items: str, acked: str, archive: bool) -> str:
    """Ack the messages that ``items`` (a condition on ``m``) names, of the queue whose row
    it locks first, counting ``acked`` (how many, given that some were), provided the queue
    archives its acked messages as ``archive`` says (else it acks none); the queue's id, its
    ``archive``, and ``"<id> <token>"`` of each message acked (the queue's other columns
    would cost more to send and read than the rest of the answer). Only a statement for an
    archiving queue reads the messages' columns and has the archive's ``INSERT``."""
    returned = ", ".join(f"m.{c}" for c in (*ARCHIVED, "token")) if archive else "m.id, m.token"
    archived = (
        f"arch AS (INSERT INTO archive ({', '.join(ARCHIVED)}, acked_at) "
        f"SELECT {', '.join(ARCHIVED)}, %(now)s FROM d), " if archive else ""
    )
    return (
        "WITH q AS MATERIALIZED (SELECT id, archive FROM queues WHERE name = %(name)s "
        "FOR NO KEY UPDATE), "
        # The ids are the one index condition: the unary `+` keeps the planner off the
        # indexes that lead with queue_id (without statistics, a fresh table's, it would read
        # every message of the queue).
        f"d AS (DELETE FROM messages m WHERE {items} AND +m.queue_id = (SELECT id FROM q "
        f"WHERE archive = {'TRUE' if archive else 'FALSE'}) RETURNING {returned}), "
        f"{archived}"
        f"counted AS (UPDATE queues SET depth = depth - {acked}, "
        f"acked_total = acked_total + {acked} WHERE id = (SELECT id FROM q) "
        "AND EXISTS (SELECT FROM d)) "
        "SELECT q.id, q.archive, ARRAY(SELECT d.id || ' ' || d.token FROM d) FROM q"
    )


BY_POSITION_MAX = 100
"""Up to this many items, a statement pairs each message with its token by its position in an
array (``array_position``: a scan of the array per message, cheaper than a join for a few,
quadratic for many); beyond, by a join (an ack) or the server's tokens (a claim)."""

# One item: its id and token as parameters, and a count known once it was acked (cheaper for
# the server than counting); more: as arrays (one statement for any number), counted. Items
# with distinct ids, not too many, pair each id with its token by position; others (repeating
# an id with other tokens, say) by a join to the pairs.
_ACK = {
    **{(archive, "one"): _ack_sql("m.id = %(id)s AND m.token = %(token)s", "1", archive)
       for archive in (False, True)},
    **{(archive, "distinct"): _ack_sql(
        "m.id = ANY(CAST(%(ids)s AS BIGINT[])) AND m.token = "
        "(CAST(%(tokens)s AS TEXT[]))[array_position(CAST(%(ids)s AS BIGINT[]), m.id)]",
        "(SELECT count(*) FROM d)", archive) for archive in (False, True)},
    **{(archive, "pairs"): _ack_sql(
        "m.id = ANY(CAST(%(ids)s AS BIGINT[])) AND (m.id, m.token) IN (SELECT * FROM "
        "unnest(CAST(%(ids)s AS BIGINT[]), CAST(%(tokens)s AS TEXT[])))",
        "(SELECT count(*) FROM d)", archive) for archive in (False, True)},
}
_STILL_THERE = (
    "SELECT id FROM messages WHERE id = ANY(CAST(%(ids)s AS BIGINT[])) AND +queue_id = %(q)s"
)


# The claim's time, as a value the planner cannot see (an InitPlan). Seen, it makes a plan
# PostgreSQL draws for this execution's value (a custom plan) look cheaper than the plan it
# keeps for any value (generic): once the messages table has statistics, the estimate of
# "some lease of the queue ended" falls from a third of the queue's leases to none, and
# PostgreSQL planned every claim anew (some 400 µs, more than running it). Unseen, both plans
# cost the same and it keeps the generic one; what runs is the same plan.
_NOW = "(SELECT CAST(%(now)s AS BIGINT))"


def _claim_sql(lifo: bool, limit: str, token: str) -> str:
    """The claim of up to ``limit`` messages of a queue assumed FIFO (``lifo`` False) or LIFO,
    each leased under ``token`` (which may name ``picked``, the claimed rows' addresses in
    order); it claims nothing when the queue is not, or when leases of it ended (``ended``)."""
    literal = "TRUE" if lifo else "FALSE"
    order = "priority DESC, id DESC" if lifo else "priority DESC, available_at, id"
    # The claimed rows by their addresses (ctid): a TID scan reads them straight from the
    # table, where their ids would cost a descent of the key's index each. The claim holds
    # them locked, so no other transaction moves them meanwhile. (One changed before the lock
    # by a transaction committed after the statement's snapshot, a message claimed and given
    # back in that moment, has a new address that the snapshot cannot see: if it still
    # qualifies, it is not claimed and stays ready for the next poll.)
    picked = ("ctid = (SELECT addrs[1] FROM picked)" if limit == "1"
              else "ctid = ANY(CAST((SELECT addrs FROM picked) AS TID[]))")
    return (
        f"WITH q AS MATERIALIZED (SELECT {', '.join(_CLAIM_Q)}, EXISTS (SELECT 1 FROM messages "
        "m WHERE m.queue_id = queues.id AND m.lease_expires_at IS NOT NULL "
        f"AND m.lease_expires_at <= {_NOW}) AS ended FROM queues WHERE name = %(name)s), "
        "picked AS MATERIALIZED (SELECT ARRAY(SELECT ctid FROM messages WHERE queue_id = "
        f"(SELECT id FROM q WHERE NOT ended AND lifo = {literal}) "
        f"AND lease_expires_at IS NULL AND lifo = {literal} AND available_at <= {_NOW} "
        f"AND +expires_at > {_NOW} ORDER BY {order} LIMIT {limit} FOR UPDATE SKIP LOCKED) "
        "AS addrs), "
        "c AS (UPDATE messages SET lease_expires_at = %(now)s + "
        "COALESCE(CAST(%(vis)s AS BIGINT), (SELECT visibility_ms FROM q)), "
        f"token = {token}, attempts = attempts + 1 "
        f"WHERE {picked} "
        f"RETURNING {_MSG_COLS}) "
        f"SELECT {', '.join('q.' + c for c in _CLAIM_Q)}, q.ended, "
        f"{', '.join('c.' + c for c in MessageRow._fields)} FROM q LEFT JOIN c ON TRUE"
    )


# (lifo, how many): a claim of one says LIMIT 1; a claim of more counts as an InitPlan (see
# _NOW). Tokens come from this process's secure random source, one per message claimed in
# order (the server's gen_random_uuid() cost about 2 µs a message, a sixth of a claim of one),
# except in a claim of more than BY_POSITION_MAX (merged polls).
_CLAIM = {
    **{(lifo, "one"): _claim_sql(lifo, "1", "%(token)s") for lifo in (False, True)},
    **{(lifo, "few"): _claim_sql(
        lifo, "(SELECT CAST(%(n)s AS INT))",
        "(CAST(%(tokens)s AS TEXT[]))[array_position((SELECT addrs FROM picked), ctid)]")
       for lifo in (False, True)},
    **{(lifo, "many"): _claim_sql(lifo, "(SELECT CAST(%(n)s AS INT))", SqlTx.NEW_TOKEN)
       for lifo in (False, True)},
}


def _tokens(count: int) -> list[str]:
    """``count`` fresh lease tokens: 32 hex characters of the OS's secure random source each
    (as the server's ``NEW_TOKEN`` makes)."""
    hexed = secrets.token_hex(16 * count)
    return [hexed[i:i + 32] for i in range(0, 32 * count, 32)]


TOKENS_AHEAD = 64
"""Tokens a transaction object draws from the OS at once for claims of one (one system call
instead of one per claim)."""


class Limits:
    """What the hot paths of one backend (one process) remember of its queues: the limits of
    the last enqueue to each, which queues are LIFO and which archive their acked messages.
    Shared by its transactions' threads; every use is checked by the statement, so a stale
    entry costs a retry, never a wrong write."""

    def __init__(self) -> None:
        self.enqueue: dict[str, QueueLimits] = {}
        self.lifo: set[str] = set()
        self.archive: set[str] = set()
        self._lock = threading.Lock()

    def remember(self, limits: QueueLimits) -> None:
        with self._lock:
            if len(self.enqueue) > 10_000:  # queues come and go: stay bounded
                self.enqueue.clear()
            self.enqueue[limits.name] = limits

    def set_lifo(self, name: str, lifo: bool) -> None:
        self._mark(self.lifo, name, lifo)

    def set_archive(self, name: str, archive: bool) -> None:
        self._mark(self.archive, name, archive)

    def _mark(self, names: set[str], name: str, on: bool) -> None:
        with self._lock:
            if on and len(names) > 10_000:  # queues come and go: stay bounded
                names.clear()
            (names.add if on else names.discard)(name)


class PostgresHot:
    """``Tx.enqueue_plain``, ``claim_by_name`` and ``ack_by_name`` in one statement each: a
    part of ``PostgresTx``, placed before ``SqlTx``, whose compositions it falls back on."""

    limits: Limits
    origin: str
    notified: set[str]
    ran_alone: bool
    tokens_ahead: list[str]

    if TYPE_CHECKING:
        def _solo(self, sql: str, params: dict[str, Any]) -> Any: ...
        def drop_large_answer(self, size: int) -> None: ...
        def reserve(self, name: str, count: int) -> QueueLimits | None: ...
        def claim(self, queue_id: int, lifo: bool, now: int, limit: int,
                  lease_until: int) -> list[MessageRow]: ...

    def enqueue_plain(
        self, name: str, count: int,
        rows_for: Callable[[QueueLimits], Sequence[NewMessage]],
    ) -> list[int] | None:
        kept = self.limits.enqueue.get(name)
        if kept is not None and not kept.max_depth and not kept.rate_limit_per_s:
            # Kept limits may only write, never refuse: a refusal (a payload too large, a bad
            # signature) is for the queue's current limits to make, which may have changed.
            try:
                rows = rows_for(kept)
            except errors.SqewError:
                rows = ()
            if len(rows) == count:
                ids = self._enqueue_kept(name, kept, rows)
                if ids:
                    return ids
            # Refused, or the queue changed (or went): on its current limits, SqlTx's way.
        return super().enqueue_plain(name, count, self._remembering(rows_for))  # type: ignore[misc,no-any-return]

    def _enqueue_kept(
        self, name: str, kept: QueueLimits, rows: Sequence[NewMessage]
    ) -> list[int]:
        """Count and insert ``rows`` if the queue still has the ``kept`` limits; their ids
        in order, or none."""
        params: dict[str, Any] = {
            "n": len(rows), "name": name, "id": kept.id, "mpb": kept.max_payload_bytes,
            "ret": kept.retention_ms, "lifo": kept.lifo, "secret": kept.hmac_secret,
            "note": f"{self.origin} {name}",
        }
        if len(rows) == 1:
            params.update(zip(_ROW_COLUMNS, rows[0][1:], strict=True))
            sql = _ENQUEUE_ONE
        else:
            params["rows"] = _encode_rows([row[1:] for row in rows]).decode()
            sql = _ENQUEUE_MANY
        ids = [int(r[0]) for r in self._solo(sql, params).fetchall()]
        if ids and self.ran_alone:  # its notification went out with it
            self.notified.add(name)
        ids.sort()  # a sequence draws them in the order of the rows
        return ids

    def _remembering(
        self, rows_for: Callable[[QueueLimits], Sequence[NewMessage]]
    ) -> Callable[[QueueLimits], Sequence[NewMessage]]:
        def remember_then_build(limits: QueueLimits) -> Sequence[NewMessage]:
            self.limits.remember(limits)
            return rows_for(limits)

        return remember_then_build

    def claim_by_name(
        self, name: str, now: int, limit: int, visibility_ms: int | None
    ) -> tuple[ClaimQueue, list[MessageRow] | None] | None:
        lifo = name in self.limits.lifo
        params: dict[str, Any] = {"now": now, "name": name, "vis": visibility_ms}
        if limit == 1:
            ahead = self.tokens_ahead
            if not ahead:
                ahead.extend(_tokens(TOKENS_AHEAD))
            params["token"] = ahead.pop()
        else:
            params["n"] = limit
            if limit <= BY_POSITION_MAX:
                params["tokens"] = _tokens(limit)
        size = "one" if limit == 1 else "few" if limit <= BY_POSITION_MAX else "many"
        rows = self._solo(_CLAIM[lifo, size], params).fetchall()
        if not rows:
            return None
        first = rows[0]
        q = ClaimQueue._make(first[:len(ClaimQueue._fields)])
        q_lifo, q_visibility_ms, ended = first[_NC - 2:_NC + 1]
        if bool(q_lifo) != lifo:  # this process had its order wrong: nothing was claimed
            self.limits.set_lifo(name, bool(q_lifo))
            if not ended:
                vis = q_visibility_ms if visibility_ms is None else visibility_ms
                return q, self.claim(q.id, bool(q_lifo), now, limit, now + vis)
        if ended:  # leases ended: nothing was claimed
            return q, None
        claimed = [MessageRow._make(r[_NC + 1:]) for r in rows if r[_NC + 1] is not None]
        self.drop_large_answer(sum(len(m.payload) for m in claimed))
        return q, in_delivery_order(claimed, lifo)

    def ack_by_name(
        self, name: str, items: Sequence[tuple[int, str]], now: int
    ) -> list[bool | None] | None:
        archive = name in self.limits.archive
        if len(items) == 1:
            kind = "one"
            params: dict[str, Any] = {"name": name, "id": items[0][0], "token": items[0][1],
                                      "now": now}
        else:
            ids = [i for i, _ in items]
            by_position = len(ids) <= BY_POSITION_MAX and len(set(ids)) == len(ids)
            kind = "distinct" if by_position else "pairs"
            params = {"name": name, "ids": ids, "tokens": [t for _, t in items], "now": now}
        row = self._solo(_ACK[archive, kind], params).fetchone()
        if row is not None and row[1] != archive:  # this process had it wrong: none was acked
            self.limits.set_archive(name, bool(row[1]))
            return super().ack_by_name(name, items, now)  # type: ignore[misc,no-any-return]
        if row is None:
            return None
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
        there = {int(r[0]) for r in self._solo(
            _STILL_THERE, {"ids": sorted(unknown), "q": queue_id}).fetchall()} if unknown else set()
        for index, msg_id in missed.items():
            if msg_id in done or msg_id in there:
                out[index] = False
        return out
