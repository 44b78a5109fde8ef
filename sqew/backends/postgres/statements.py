"""PostgreSQL's statements, in one table: every statement ``PostgresTx`` and ``PostgresFast``
send that is not ``SqlTx``'s dialect-neutral one (``sqew.backends.sql``).

Each entry names a statement (or a family of them, by a key) and says what it replaces. A
variant that replaces neutral statements only for speed is kept only while it buys at least
10 % on a case of ``scripts/bench postgres``; next to its name is what it bought there,
measured by ``scripts/bench pg-variants`` (the same cases with the variant turned off, the
neutral way running instead; medians of 5 rounds on a 2-core machine). Variants that bought
less (a claim of 2 to 100 pairing its own tokens by position, an ack pairing ids and tokens
by position, the one-statement inserts of a keyed enqueue) were dropped. The one-statement
writes (``ENQUEUE``, ``CLAIM``, ``ACK``) replace the neutral compositions of
``sqew.backends.sql_by_name``; ``tests/postgres/test_hot_paths.py`` checks their counts of
statements.

Parameters are ``%(name)s`` (psycopg's) in the one-statement writes, ``:name`` (converted once,
``sqew.backends.paramstyle``) in the statements ``SqlTx``'s helpers run.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from sqew.backends.columns import ARCHIVED, INSERT_ARCHIVE, INSERT_MESSAGES, INSERTED
from sqew.backends.columns import MESSAGE as MESSAGE_COLUMNS
from sqew.backends.postgres.connection import CHANNEL
from sqew.backends.rows import ClaimQueue, MessageRow, NewMessage
from sqew.backends.sql_sqs import GROUP_HEAD


def pg_type(column: str) -> str:
    """PostgreSQL's type of a ``NewMessage`` field's values (from its annotation)."""
    hint = typing.get_type_hints(NewMessage)[column]
    return _PG_TYPES[next(t for t in typing.get_args(hint) or (hint,) if t is not type(None))]


_PG_TYPES: dict[Any, str] = {int: "BIGINT", str: "TEXT", bool: "BOOLEAN"}


# --- the contract's own (no neutral statement does this) -----------------------------------------
NOTIFY = (
    f"SELECT pg_notify('{CHANNEL}', %(origin)s || ' ' || q) "
    "FROM unnest(CAST(%(qs)s AS TEXT[])) AS q"
)
"""``Tx.notify``: one notification per queue, payload ``"<origin> <queue>"``, sent with the
commit."""

LOCK_ALL = "SELECT id FROM queues ORDER BY id FOR NO KEY UPDATE"
"""``Tx.lock_queues(None)``: every queue's row, in id order."""
LOCK_NAMED = (
    "SELECT id FROM queues WHERE name = ANY(CAST(:names AS TEXT[])) ORDER BY id "
    "FOR NO KEY UPDATE"
)
"""``Tx.lock_queues(names)``: the rows of the named queues, in id order."""

REAP_DEDUP = (
    "DELETE FROM dedup WHERE ctid = ANY(ARRAY("
    "SELECT ctid FROM dedup WHERE {where} LIMIT :n FOR UPDATE SKIP LOCKED))"
)
"""``Tx.reap_dedup``: skips the records an enqueue holds (the neutral statement would wait for
it, and the reaper locks no queue for this: a wait could close a cycle with that enqueue)."""

# --- variants for speed ----------------------------------------------------------------------
EXTEND = (
    "UPDATE messages m SET lease_expires_at = v.until FROM unnest(CAST(:ids AS BIGINT[]), "
    "CAST(:tokens AS TEXT[]), CAST(:untils AS BIGINT[])) AS v(id, token, until) "
    "WHERE m.id = v.id AND m.token = v.token AND +m.queue_id = :q RETURNING m.id, m.token"
)
"""``Tx.extend``: every lease of a keep-alive in one statement (the neutral one is a statement
per item). Bought: +42 % on poll(10) + extend of the 10 + ack. The ids
are the index condition; the unary `+` keeps the planner off the indexes that lead with
queue_id."""
THERE = "SELECT id FROM messages WHERE id = ANY(CAST(:ids AS BIGINT[])) AND +queue_id = :q"
"""``Tx.extend``'s misses: which of them are there (under another token)."""


def _enqueue_sql(value: Callable[[int, str], str], source: str) -> str:
    """Count and insert new rows, each column's value ``value(index, column)`` (the queue's
    id from ``q``), ``FROM q`` and ``source``, provided the queue row has the settings the rows
    were built with (else it writes nothing); notifies the queue's waiters."""
    values = ", ".join("q.id" if c == "queue_id" else value(i, c) for i, c in enumerate(INSERTED))
    return (
        "WITH q AS (UPDATE queues SET depth = depth + %(n)s, "
        "enqueued_total = enqueued_total + %(n)s "
        "WHERE name = %(name)s AND id = %(kept_id)s AND max_payload_bytes = %(mpb)s "
        "AND retention_ms = %(ret)s AND lifo = %(kept_lifo)s AND max_depth = 0 "
        "AND rate_limit_per_s = 0 AND hmac_secret IS NOT DISTINCT FROM %(secret)s "
        "RETURNING id), "
        f"ins AS ({INSERT_MESSAGES} SELECT {values}, 0 FROM q{source} RETURNING id), "
        f"note AS (SELECT pg_notify('{CHANNEL}', %(note)s) FROM q) "
        "SELECT ins.id FROM ins, note"
    )


ENQUEUE = {
    "one": _enqueue_sql(lambda i, c: f"%({c})s", ""),
    "many": _enqueue_sql(
        lambda i, c: f"r->>{i}" if pg_type(c) == "TEXT" else f"CAST(r->>{i} AS {pg_type(c)})",
        ", json_array_elements(CAST(%(rows)s AS JSON)) AS r",
    ),
}
"""``Tx.enqueue_by_name`` on the queue's settings as the cache knows them (``QueueCache``), in
one statement: count, insert and notify (the neutral way: a reservation, then an insert).
Bought: +188 % on single enqueue, +117 % on batch enqueue (100), +15 % over HTTP. One row: its
values as parameters; more: one JSON array of rows (msgspec writes it in C; psycopg's own
adaptation of a list costs more per value than the statement does)."""


def _ack_sql(items: str, acked: str, archive: bool) -> str:
    """Ack the messages that ``items`` (a condition on ``m``) names, of the queue whose row
    it locks first, counting ``acked`` (how many, given that some were), provided the queue
    archives its acked messages as ``archive`` says (else it acks none); the queue's id, its
    ``archive``, and ``"<id> <token>"`` of each message acked (the queue's other columns
    would cost more to send and read than the rest of the answer). Only a statement for an
    archiving queue reads the messages' columns and has the archive's ``INSERT``."""
    returned = ", ".join(f"m.{c}" for c in (*ARCHIVED, "token")) if archive else "m.id, m.token"
    archived = (
        f"arch AS ({INSERT_ARCHIVE} SELECT {', '.join(ARCHIVED)}, %(now)s FROM d), "
        if archive else ""
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


ACK = {
    **{(archive, "one"): _ack_sql("m.id = %(id)s AND m.token = %(token)s", "1", archive)
       for archive in (False, True)},
    **{(archive, "many"): _ack_sql(
        "m.id = ANY(CAST(%(ids)s AS BIGINT[])) AND (m.id, m.token) IN (SELECT * FROM "
        "unnest(CAST(%(ids)s AS BIGINT[]), CAST(%(tokens)s AS TEXT[])))",
        "(SELECT count(*) FROM d)", archive) for archive in (False, True)},
}
"""``Tx.ack_by_name`` in one statement, by (the queue archives, one item or more); the neutral
way counts and then deletes item by item. Bought: +70 % on poll+ack (1 consumer, batch 1),
+303 % on poll(10)+ack (4 consumers). One item: its id and token as parameters, and a count
known once it was acked; more: ids and tokens as arrays, paired by a join, counted."""
STILL_THERE = (
    "SELECT id FROM messages WHERE id = ANY(CAST(%(ids)s AS BIGINT[])) AND +queue_id = %(q)s"
)
"""An ack's misses: which of them are there (under another token), read afresh."""


CLAIM_QUEUE = (*ClaimQueue._fields, "lifo", "visibility_ms")
"""What a claim reads of its queue: ``ClaimQueue``'s columns, then what a wrong guess of the
queue's order needs (the sweep of ended leases reads the whole row)."""

# The claim's time, as a value the planner cannot see (an InitPlan). Seen, it makes a plan
# PostgreSQL draws for this execution's value (a custom plan) look cheaper than the plan it
# keeps for any value (generic): once the messages table has statistics, the estimate of
# "some lease of the queue ended" falls from a third of the queue's leases to none, and
# PostgreSQL would plan every claim anew, which costs more than running it. Unseen, both plans
# cost the same and it keeps the generic one; what runs is the same plan.
_NOW = "(SELECT CAST(%(now)s AS BIGINT))"


def _claim_sql(lifo: bool, limit: str, token: str) -> str:
    """The claim of up to ``limit`` messages of a queue assumed FIFO (``lifo`` False) or LIFO,
    each leased under ``token`` (which may name ``picked``, the claimed rows' addresses in
    order); it claims nothing when the queue is not, when leases of it ended (``ended``) or
    when it is paused."""
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
        f"WITH q AS MATERIALIZED (SELECT {', '.join(CLAIM_QUEUE)}, EXISTS (SELECT 1 FROM "
        "messages m WHERE m.queue_id = queues.id AND m.lease_expires_at IS NOT NULL "
        f"AND m.lease_expires_at <= {_NOW}) AS ended FROM queues WHERE name = %(name)s), "
        "picked AS MATERIALIZED (SELECT ARRAY(SELECT ctid FROM messages WHERE queue_id = "
        f"(SELECT id FROM q WHERE NOT ended AND NOT paused AND lifo = {literal}) "
        f"AND lease_expires_at IS NULL AND lifo = {literal} AND available_at <= {_NOW} "
        f"AND +expires_at > {_NOW} AND {GROUP_HEAD.format(now=_NOW)} "
        f"ORDER BY {order} LIMIT {limit} FOR UPDATE SKIP LOCKED) "
        "AS addrs), "
        "c AS (UPDATE messages SET lease_expires_at = %(now)s + "
        "COALESCE(CAST(%(vis)s AS BIGINT), (SELECT visibility_ms FROM q)), "
        f"token = {token}, attempts = attempts + 1, "
        "first_leased_at = COALESCE(first_leased_at, CAST(%(now)s AS BIGINT)) "
        f"WHERE {picked} "
        f"RETURNING {MESSAGE_COLUMNS}) "
        f"SELECT {', '.join('q.' + c for c in CLAIM_QUEUE)}, q.ended, "
        f"{', '.join('c.' + c for c in MessageRow._fields)} FROM q LEFT JOIN c ON TRUE"
    )


NEW_TOKEN = "replace(CAST(gen_random_uuid() AS TEXT), '-', '')"
"""A fresh lease token made by the server (``SqlTx.NEW_TOKEN``)."""

CLAIM = {
    **{(lifo, "one"): _claim_sql(lifo, "1", "%(token)s") for lifo in (False, True)},
    **{(lifo, "many"): _claim_sql(lifo, "(SELECT CAST(%(n)s AS INT))", NEW_TOKEN)
       for lifo in (False, True)},
}
"""``Tx.claim_by_name`` in one statement, by (the queue is LIFO, one or more); the neutral way
reads the queue, then claims. Bought: +74 % on poll+ack (1 consumer, batch 1), +83 % with 4
consumers. A claim of one says LIMIT 1 and takes a token from this process's secure random
source (``by_name.TOKENS_AHEAD`` drawn at once); a claim of more counts as an InitPlan (see
``_NOW``) and its tokens are the server's ``gen_random_uuid()``."""
