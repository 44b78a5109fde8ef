"""PostgreSQL: one database shared by any number of sqew processes (``sqew serve`` replicas).

One module per job:

- ``backend``: ``PostgresBackend``: opening (schema checks, first-open migration), the
  connection pool, transactions, the reaper's advisory lock (``try_lead``);
- ``connection``: URLs, connections and the limits that size them;
- ``tx``: ``PostgresTx``, the PostgreSQL values of ``SqlTx``'s hooks, ``NOTIFY`` and the
  faster insert;
- ``session``: ``PostgresWriteSession``, a group committer's connection;
- ``waiter``: ``PostgresWaiter``, one ``LISTEN``ing connection per process.

Needs the ``postgres`` extra (``pip install 'sqew[postgres]'``: psycopg 3 and psycopg_pool).
"""

from __future__ import annotations

from sqew.backends.postgres.backend import PostgresBackend
from sqew.backends.postgres.session import PostgresWriteSession
from sqew.backends.postgres.tx import PostgresTx
from sqew.backends.postgres.waiter import PostgresWaiter

__all__ = ["PostgresBackend", "PostgresTx", "PostgresWaiter", "PostgresWriteSession"]
