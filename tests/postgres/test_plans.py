"""On PostgreSQL the hot paths' statements are planned once per connection, not at every run,
also once the tables have statistics (autovacuum's ANALYZE, on any busy database).

A prepared statement runs on a plan PostgreSQL keeps (generic) when that plan is estimated no
dearer than plans drawn for each run's values (custom); planning the claim anew cost more than
running it. The server here counts plans per statement (``pg_stat_statements`` with
``track_planning``), a server of this test's own: the extension must be preloaded.
"""

from __future__ import annotations

from collections.abc import Iterator

import pg_support
import pgserver
import pytest

import sqew

pytestmark = pytest.mark.postgres

RUNS = 300


@pytest.fixture(scope="module")
def counted() -> Iterator[pgserver.PgServer]:
    """A PostgreSQL server that counts each statement's plans, with sqew's schema in ``q``."""
    if (reason := pg_support.backend_missing()) is not None:
        pytest.skip(reason)
    pg_support.server_or_skip()
    server = pgserver.PgServer({**pgserver.FAST,
                                "shared_preload_libraries": "pg_stat_statements",
                                "pg_stat_statements.track_planning": "on"},
                               prefix="sqew-pg-plans-")
    try:
        server.start()
        server.create_database("q")
        pg_support.upgrade(server.url("q"))
        with server.connect("q") as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        yield server
    finally:
        server.destroy()


def test_hot_statements_keep_their_plan_on_tables_with_statistics(
    counted: pgserver.PgServer,
) -> None:
    client = sqew.LocalClient(counted.url("q"))
    try:
        client.create_queue("work")
        client.create_queue("stack", order="lifo")
        for queue in ("work", "stack"):
            for _ in range(20):
                client.enqueue_batch(queue, [{"payload": {"n": i}} for i in range(100)])
        with counted.connect("q") as conn:
            conn.execute("ANALYZE")
            conn.execute("SELECT pg_stat_statements_reset()")
        for queue in ("work", "stack"):
            for _ in range(RUNS):
                (m,) = client.poll(queue)
                client.ack(queue, m.id, m.token)
                client.enqueue(queue, {"n": 1})
            for _ in range(RUNS):
                got = client.poll(queue, batch=3)
                assert len(got) == 3
                assert {r.status for r in client.ack_batch(
                    queue, [(m.id, m.token) for m in got])} == {"acked"}
                client.enqueue_batch(queue, [{"payload": 1}, {"payload": 2}])
        with counted.connect("q") as conn:
            rows = conn.execute(
                "SELECT calls, plans, left(query, 60) FROM pg_stat_statements "
                f"WHERE calls >= {RUNS - 10} AND query LIKE 'WITH%'").fetchall()
    finally:
        client.close()
    # enqueue, claim and ack; of one and of more; FIFO and LIFO claims (a first LIFO claim
    # assumes FIFO, finds out and claims again by a statement of SqlTx)
    assert len(rows) == 8, rows
    for calls, plans, query in rows:
        # Before psycopg prepares a statement (its 6th run on a connection) and while
        # PostgreSQL weighs a generic plan (5 runs more), each run is planned: a dozen plans
        # per pooled connection. Planned at every run, a statement has as many plans as runs.
        assert plans <= calls / 4, (calls, plans, query)
