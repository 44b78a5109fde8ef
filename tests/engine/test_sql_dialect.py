"""The dialect-neutral statements (``SqlTx``): every one runs, with the neutral hooks, and every
one converts to the ``pyformat`` parameter style the way SQLAlchemy's psycopg dialect does.

Here the neutral statements run on SQLite (the contract suite runs them on PostgreSQL, through
``PostgresTx``), with only the three hooks SQLite cannot run (``NEW_TOKEN``'s
``gen_random_uuid()``, ``CLAIM_LOCK``'s ``FOR UPDATE SKIP LOCKED`` and ``CLAIM_IDS``' arrays)
set to SQLite's; the neutral ``TRUE``/``FALSE``, ``insert_messages`` and ``reap_dedup`` run as
they are.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import psycopg

from sqew.backends import open_backend
from sqew.backends.base import ClaimQueue, KeyRow, QueueRow, Tx
from sqew.backends.paramstyle import pyformat
from sqew.backends.rows import MoveTaskRow
from sqew.backends.sql import INSERT_CHUNK, SqlTx
from sqew.backends.sqlite import SqliteTx, connection


class Recorder:
    """A sqlite3 connection that keeps the text of every statement it runs."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.statements: list[str] = []

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        self.statements.append(sql)
        return self.conn.execute(self.to_driver(sql), params)

    def executemany(self, sql: str, rows: Sequence[Any]) -> sqlite3.Cursor:
        self.statements.append(sql)
        return self.conn.executemany(self.to_driver(sql), rows)

    def to_driver(self, sql: str) -> str:
        return sql


class PyformatDriver(Recorder):
    """Takes ``%(name)s`` statements like psycopg, and runs them on SQLite (as ``:name``)."""

    def to_driver(self, sql: str) -> str:
        assert not re.search(r"(?<![:\w]):[A-Za-z_]", sql), sql  # no :name left
        return re.sub(r"%\((\w+)\)s", r":\1", sql).replace("%%", "%")


class NeutralOnSqlite(SqlTx):
    """The neutral statements, except the three hooks SQLite has no syntax for."""

    NEW_TOKEN = SqliteTx.NEW_TOKEN
    CLAIM_LOCK = SqliteTx.CLAIM_LOCK
    CLAIM_IDS = SqliteTx.CLAIM_IDS


class PyformatOnSqlite(NeutralOnSqlite):
    PARAMSTYLE = "pyformat"


class Calls:
    """Forwards to a Tx and notes which of its methods were used."""

    def __init__(self, tx: Tx) -> None:
        self.tx = tx
        self.names: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.names.add(name)
        return getattr(self.tx, name)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    db = tmp_path / "q.db"
    open_backend(db).close()  # the schema
    c = connection.connect(db, synchronous="NORMAL")
    c.execute("BEGIN IMMEDIATE")
    yield c
    c.execute("ROLLBACK")
    c.close()


def queue_values(name: str, parent_id: int | None) -> dict[str, Any]:
    return {"name": name, "parent_id": parent_id, "visibility_ms": 100, "max_attempts": 1,
            "backoff_base_ms": 0, "backoff_max_ms": 0, "retention_ms": 60_000,
            "dedup_window_ms": 1000, "max_payload_bytes": 1000, "max_depth": 0,
            "rate_limit_per_s": 0.0, "lifo": False, "archive": True, "hmac_secret": None,
            "created_at": 0}


def every_statement(calls: Calls) -> None:
    """Each method of the contract once, checking what it does on the way."""
    tx: Any = calls
    now = 1_000
    qid = tx.insert_queue(queue_values("q", None))
    dlq_id = tx.insert_queue(queue_values("q.dlq", qid))
    q = tx.get_queue("q")
    dlq: QueueRow = tx.get_queue_by_id(dlq_id)
    assert [r.name for r in tx.list_queues()] == ["q", "q.dlq"]
    tx.update_queue(qid, {"visibility_ms": 200})
    tx.add_counters(qid, depth=1)
    assert tx.add_counters_by_name("q", acked_total=1).acked_total == 1
    assert tx.reserve("q", 4).depth == 5
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    new = [(qid, f'"m{i}"', 0, None, now, now, now + 10_000, False, *((tp, "k=v") if i == 0
            else (None, None)), "g" if i == 3 else None) for i in range(4)]
    ids = tx.insert_messages(new)
    assert [tx.get_message(qid, i).payload for i in ids] == ['"m0"', '"m1"', '"m2"', '"m3"']
    tx.put_dedup([(qid, "k", ids[0], now + 100)])
    assert tx.find_dedup(qid, ["k", "other"], now) == {"k": ids[0]}
    tx.set_messages_lifo(qid, True)
    assert [m.id for m in tx.peek(qid, True, now, 10, 5)] == ids[::-1]
    tx.set_messages_lifo(qid, False)
    assert tx.get_queue_for_claim("q", now) == (tx.get_queue("q"), False)
    a, b, c, d = tx.claim(qid, False, now, 4, now + 100)
    assert [a.id, b.id, c.id, d.id] == ids and len({a.token, b.token, c.token}) == 3
    tx.unclaim([(d.id, d.token), (c.id, "not its token")])  # d as if never claimed; c kept
    assert tx.attempts_if_token(qid, d.id, d.token) is None
    assert tx.attempts_if_token(qid, c.id, c.token) == 1
    (d,) = tx.claim(qid, False, now, 1, now + 100)  # ready again, first in line
    assert (d.id, d.attempts) == (ids[3], 1)
    assert tx.ack(qid, a.id, a.token, True, now)
    archived = tx.scan_archive(qid, 0, ids[-1], 500, 10)
    assert [(m.id, m.available_at, m.expires_at) for m in archived] == [(a.id, now, now + 500)]
    assert (a.traceparent, a.tracestate) == (archived[0].traceparent, archived[0].tracestate) \
        == (tp, "k=v")  # stored, returned by the claim, kept by the archive
    assert (b.traceparent, b.tracestate) == (None, None)
    assert (tx.high_water(qid, True), tx.high_water(qid, False)) == (a.id, ids[-1])
    assert tx.high_water(dlq_id, False) is None
    assert [m.id for m in tx.scan_messages(qid, a.id, ids[2], now, 10)] == ids[1:3]
    assert [m.id for m in tx.scan_messages(qid, 0, ids[-1], now, 1)] == ids[1:2]
    assert tx.idempotency_keys(qid, ids[0], ids[-1], now) == {ids[0]: "k"}
    assert tx.message_exists(qid, b.id)
    assert tx.attempts_if_token(qid, b.id, b.token) == 1
    assert not tx.release(qid, b.id, "other", now + 50, "err")  # not the lease's token
    assert tx.release(qid, b.id, b.token, now + 50, "err")
    assert tx.extend(qid, [(c.id, c.token, now + 5), (c.id, "other", now), (999, "t", now),
                      (c.id, c.token, now + 10)]) == [True, False, None, True]
    assert tx.next_due(qid, now) == now + 10
    (b,) = tx.claim(qid, False, now + 50, 1, now + 150)
    assert not tx.dead_letter(qid, b.id, "other", dlq, now, None, "q")
    assert tx.dead_letter(qid, b.id, b.token, dlq, now, None, "q")
    with tx.savepoint():
        assert tx.get_queue_for_claim("q", now + 10)[1]
        q = tx.get_queue("q")
        assert tx.claim_by_name("q", now + 10, 1, None) == (
            ClaimQueue(q.id, q.name, q.hmac_secret, False), None)
    assert tx.dead_letter_expired(qid, now + 10, 1, dlq, "q") == 1  # c
    assert tx.release_expired(qid, now + 100) == 1  # d
    assert [m.origin_queue for m in tx.list_messages(dlq_id, 0, 10)] == ["q", "q"]
    assert tx.move_all(dlq_id, q, [b.id], now) == (1, 0)
    assert tx.move_all(dlq_id, q, None, now) == (1, 0)
    assert tx.counts(qid, now) == (0, 1, 0, 0, now)  # d is due at now + 100
    assert [(r.name, (r.leased, r.delayed, r.expired, r.ending, r.oldest))
            for r in tx.all_counts(now)] == [
        ("q", (0, 1, 0, 0, now)), ("q.dlq", tx.counts(dlq_id, now))]
    assert tx.queues_to_reap(now, 10) == []
    assert tx.queues_to_reap(now + 100_000, 10) == ["q"]  # expired, an archive past retention
    assert tx.reap_messages(qid, now + 100_000, 10) == 3
    assert tx.reap_dedup(qid, now + 100, 10) == 1
    assert tx.reap_dedup(None, now + 100, 10) == 0
    assert tx.reap_archive(qid, now - 1, 10) == 0
    assert tx.reap_archive_head(qid, now - 1, 10) == 0
    assert tx.reap_archive_head(qid, now, 10) == 1
    assert tx.reap_archive(qid, now, 10) == 0
    assert not tx.delete_message(qid, a.id)
    assert tx.purge(qid) == 0
    assert tx.enqueue_by_name("none", 1, lambda limits: []) is None
    assert tx.claim_by_name("none", now, 1, None) is None
    assert tx.ack_by_name("none", [(1, "t")], now) is None
    depth = tx.get_queue("q").depth
    row = (qid, '"n"', 0, None, now, now, now + 10_000, False, None, None, None)
    (new_id,) = tx.enqueue_by_name("q", 2, lambda limits: [row])  # one refused: not counted
    assert tx.get_queue("q").depth == depth + 1
    got_q, (m,) = tx.claim_by_name("q", now, 5, 7)
    assert (got_q.id, m.id, m.lease_expires_at) == (qid, new_id, now + 7)
    assert tx.ack_by_name("q", [(m.id, "other"), (m.id, m.token), (m.id, m.token)], now) \
        == [False, True, None]  # lease lost; acked; no such message any more
    assert tx.get_queue("q").depth == depth
    assert tx.get_sqs_data(qid) is None
    tx.set_sqs_data(qid, '{"tags": {"team": "a"}}')
    assert tx.get_sqs_data(qid) == '{"tags": {"team": "a"}}'
    tx.set_sqs_data(qid, None)
    assert tx.get_sqs_data(qid) is None
    handle = uuid.uuid4().hex  # (a test runs this twice on one database)
    task = MoveTaskRow(handle, handle, None, 5, "RUNNING", 0, 2, now, now, None)
    tx.insert_move_task(task)
    assert tx.get_move_task(handle) == task and tx.get_move_task("none") is None
    assert tx.move_tasks(handle, 10) == [task] == tx.move_tasks(None, 10)
    tx.update_move_task(handle, {"status": "FAILED", "moved": 1, "failure_reason": "gone"})
    assert tx.move_tasks(None, 10) == []
    assert tx.move_tasks(handle, 10) == [
        task._replace(status="FAILED", moved=1, failure_reason="gone")]
    tx.delete_queue(qid)
    assert tx.list_queues() == []
    assert not tx.auth_required()
    key = KeyRow("k1", None, "q", "consume", "h", now, None)
    tx.insert_key(key)
    assert tx.auth_required() and tx.get_key("k1") == key
    tx.touch_keys([("k1", now + 1), ("gone", now)])
    assert [k.last_used_at for k in tx.list_keys()] == [now + 1]
    assert tx.delete_key("k1") and not tx.delete_key("k1") and tx.get_key("k1") is None
    tx.insert_key(key)
    assert tx.delete_keys_of_queue("q") == 1 and not tx.auth_required()
    tx.set_auth_required(True)  # what minting a key sets: it outlives the keys
    assert tx.auth_required()
    tx.set_auth_required(False)
    assert not tx.auth_required()


@pytest.mark.parametrize("tx_class", [SqliteTx, NeutralOnSqlite])
def test_every_statement_runs(conn: sqlite3.Connection, tx_class: type[SqlTx]) -> None:
    calls = Calls(tx_class(Recorder(conn)))
    every_statement(calls)
    assert calls.names >= Tx.__abstractmethods__


def test_a_pyformat_driver_gets_converted_statements(conn: sqlite3.Connection) -> None:
    driver = PyformatDriver(conn)
    every_statement(Calls(PyformatOnSqlite(driver)))
    assert any("%(" in s for s in driver.statements)


def test_the_conversion_agrees_with_sqlalchemys_psycopg_dialect(conn: sqlite3.Connection) -> None:
    recorder = Recorder(conn)
    every_statement(Calls(NeutralOnSqlite(recorder)))
    every_statement(Calls(SqliteTx(recorder)))
    dialect = psycopg.dialect()
    for sql in set(recorder.statements):
        assert pyformat(sql) == text(sql).compile(dialect=dialect).string, sql


@pytest.mark.parametrize(("named", "converted"), [
    ("SELECT :a, :b_2 FROM t WHERE x = :a", "SELECT %(a)s, %(b_2)s FROM t WHERE x = %(a)s"),
    ("SELECT x::bigint, :n::text", "SELECT x::bigint, %(n)s::text"),
    ("SELECT ':not' || \"col:x\" || :yes", "SELECT ':not' || \"col:x\" || %(yes)s"),
    ("SELECT 'it''s :x', :y", "SELECT 'it''s :x', %(y)s"),
    ("SELECT 7 % 2, :p", "SELECT 7 %% 2, %(p)s"),
])
def test_pyformat(named: str, converted: str) -> None:
    assert pyformat(named) == converted


def test_an_unknown_paramstyle_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(ValueError, match="qmark"):
        type("QmarkTx", (SqlTx,), {"PARAMSTYLE": "qmark"})


def test_the_neutral_insert_returns_ids_in_input_order_across_chunks(
    conn: sqlite3.Connection,
) -> None:
    tx = NeutralOnSqlite(conn)
    qid = tx.insert_queue(queue_values("q", None))
    count = 2 * INSERT_CHUNK + 7
    ids = tx.insert_messages(
        [(qid, str(i), i % 3, None, 0, 0, 10, bool(i % 2), None, None, None)
         for i in range(count)]
    )
    assert len(set(ids)) == count
    rows = {m.id: m for m in tx.list_messages(qid, 0, count)}
    assert [(rows[i].payload, rows[i].priority) for i in ids] == [
        (str(i), i % 3) for i in range(count)
    ]
