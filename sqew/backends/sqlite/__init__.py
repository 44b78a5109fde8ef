"""The embedded default: one SQLite file in WAL mode, shared safely by many processes.

One module per job:

- ``backend``: ``SqliteBackend``: opening (path and schema checks, first-open migration),
  a connection per thread, transactions, the change marker;
- ``connection``: how a connection is opened (pragmas) and the constants that tune it;
- ``tx``: ``SqliteTx``, the SQLite values of ``SqlTx``'s dialect hooks;
- ``session``: ``SqliteWriteSession``, a group committer's connection;
- ``checkpoint``: ``Checkpointer``, the write session's checkpointing thread;
- ``lockfile``: sqew's own inter-process locks, in ``<db>-lock`` (never on the database file).
"""

from __future__ import annotations

from sqew.backends.revisions import SCHEMA_HEAD
from sqew.backends.sqlite.backend import SqliteBackend
from sqew.backends.sqlite.session import SqliteWriteSession
from sqew.backends.sqlite.tx import SqliteTx

__all__ = ["SCHEMA_HEAD", "SqliteBackend", "SqliteTx", "SqliteWriteSession"]
