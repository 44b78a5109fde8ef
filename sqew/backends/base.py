"""The storage contract: what QueueService needs from a database, documented once.

A ``Backend`` opens transactions; a transaction (``Tx``) offers small, single-purpose
statements (those of API keys in ``key_contract``, the reaper's in ``reap_contract``, the SQS
data's in ``sqs_contract``; the write session, the fast paths, the waiter and the lead in
``coordination``; the rows in ``rows``). All rules (validation, backoff, quotas,
dead-lettering decisions) live in ``sqew.core``; a backend only stores and fetches,
atomically. Every ``Tx`` method is part of the one transaction the ``Tx`` is.

What a second backend implements:

- a ``Tx``: subclass ``sqew.backends.sql.SqlTx`` (every statement in SQL that SQLite and
  PostgreSQL accept, on a DB-API connection) and override its hooks where the dialect
  differs (``SqlTx`` lists them), and statements where the dialect has a faster one;
- a ``WriteSession`` (a dedicated connection for the server's group committer), a
  ``Waiter`` (wakes long polls on commits of other processes; ``sqew.backends.wakeups``
  holds the in-process half) and a ``Backend`` (connections, transactions, schema checks,
  ``statements_on_loop``): see those classes;
- ``Backend.try_lead``: the one process per database that does background work (SQLite: a
  lock file of the role; PostgreSQL: an advisory lock held by a session);
- ``Tx.notify`` where other processes' waiters learn of commits by message (PostgreSQL's
  ``NOTIFY``);
- ``Backend.fast_paths`` where a round trip costs more than a statement: the by-name writes
  as transactions of one statement each (``FastPaths``), which a writer uses for an operation
  that runs alone;
- ``Backend.clock`` where processes on several hosts share the database (PostgreSQL: the
  database server's time);
- an entry in ``sqew.backends.open_backend`` and in the contract suite's targets.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

# Re-exported (they belong to the contract too): what a backend offers besides transactions,
# the rows the contract's statements take and return.
from sqew.backends.coordination import MISSED as MISSED
from sqew.backends.coordination import FastPaths as FastPaths
from sqew.backends.coordination import Lead as Lead
from sqew.backends.coordination import Missed as Missed
from sqew.backends.coordination import Offload as Offload
from sqew.backends.coordination import Waiter as Waiter
from sqew.backends.coordination import WriteSession as WriteSession
from sqew.backends.key_contract import KeyStatementsContract
from sqew.backends.reap_contract import ReapStatementsContract
from sqew.backends.rows import ClaimQueue as ClaimQueue
from sqew.backends.rows import KeyRow as KeyRow
from sqew.backends.rows import LiveCounts as LiveCounts
from sqew.backends.rows import MessageRow as MessageRow
from sqew.backends.rows import NewMessage as NewMessage
from sqew.backends.rows import QueueCounts as QueueCounts
from sqew.backends.rows import QueueLimits as QueueLimits
from sqew.backends.rows import QueueRow as QueueRow
from sqew.backends.sqs_contract import SqsStatementsContract
from sqew.core.clock import Clock, system_clock


class Tx(KeyStatementsContract, ReapStatementsContract, SqsStatementsContract, abc.ABC):
    """One database transaction. Every method is one (or a few) statements."""

    @abc.abstractmethod
    def savepoint(self) -> AbstractContextManager[None]:
        """A nested scope: rolled back alone if the block raises, kept otherwise."""

    def lock_queues(self, names: Iterable[str] | None) -> None:
        """Lock the rows of the queues named ``names`` (every queue if None; missing names are
        skipped) until the transaction ends, in one order (by id) in every transaction, before
        it touches their messages: then no two transactions each hold a row the other waits
        for (a queue's counters and its messages, PostgreSQL's deadlock).

        Default: nothing (SQLite's write transaction holds the whole database).
        """

    def notify(self, queues: Iterable[str]) -> None:
        """Tell other processes' waiters, when this transaction commits, that messages of
        ``queues`` may have become ready, or become due sooner (the writers call it last,
        before the commit, with the ``notify`` of every operation that succeeded in it).

        Every write that can make a message ready or due sooner names its queue in its
        operation's ``notify``: a long poll of another process sleeps until this says so.
        SQLite bumps the queues' ``wakeups`` counter, which other processes' waiters watch;
        PostgreSQL sends a ``NOTIFY`` per queue, which the database delivers only if the
        transaction commits.
        """

    # --- queues ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def get_queue(self, name: str) -> QueueRow | None:
        """The queue named ``name``, or None."""

    @abc.abstractmethod
    def get_queue_by_id(self, queue_id: int) -> QueueRow | None:
        """The queue with id ``queue_id``, or None."""

    @abc.abstractmethod
    def list_queues(self) -> list[QueueRow]:
        """All queues ordered by name."""

    @abc.abstractmethod
    def insert_queue(self, values: dict[str, Any]) -> int:
        """Insert a queue row from column values; returns its id."""

    @abc.abstractmethod
    def update_queue(self, queue_id: int, values: dict[str, Any]) -> None:
        """Set columns of a queue row."""

    @abc.abstractmethod
    def delete_queue(self, queue_id: int) -> None:
        """Delete a queue with its DLQ, and their messages, dedup records and archive."""

    @abc.abstractmethod
    def add_counters(self, queue_id: int, **deltas: int) -> None:
        """Add ``deltas`` to the named counter columns (depth, enqueued_total, …)."""

    # --- by name: one operation's writes each, found by the queue's name ------------------------
    # Part of the transaction like every other method. A backend where a round trip costs more
    # than a statement also offers them as transactions of their own (``FastPaths``).
    @abc.abstractmethod
    def enqueue_by_name(
        self, name: str, count: int,
        rows_for: Callable[[QueueLimits], Sequence[NewMessage]],
    ) -> list[int] | None:
        """Count ``count`` new messages on queue ``name`` and insert the rows that
        ``rows_for`` builds from the queue's limits (it validates, and may raise: then the
        caller rolls back); the new ids in order, or None if there is no such queue. Only the
        rows inserted are counted (fewer than ``count`` when requests were refused on their own).

        ``depth`` and the rate-limit bucket in the limits are current (after counting
        ``count``) when the queue has a quota (``max_depth``, ``rate_limit_per_s``); without
        one, a backend may pass limits it keeps from an earlier call, provided the statement
        that counts and inserts checks they are still the queue's (``rows_for`` then runs
        again with fresh ones when they are not).
        """

    @abc.abstractmethod
    def claim_by_name(
        self, name: str, now: int, limit: int, visibility_ms: int | None
    ) -> tuple[ClaimQueue, list[MessageRow] | None] | None:
        """Lease up to ``limit`` ready messages of queue ``name`` (``claim``) until ``now`` +
        ``visibility_ms`` (the queue's own when None): the queue and the messages; None if
        there is no such queue. When leases of the queue ended at or before ``now``, nothing
        is claimed and the messages are None: the caller sweeps them first
        (``dead_letter_expired``, ``release_expired``) and claims.
        """

    @abc.abstractmethod
    def ack_by_name(
        self, name: str, items: Sequence[tuple[int, str]], now: int
    ) -> list[bool | None] | None:
        """Acknowledge ``(id, token)`` items of queue ``name`` in order (``ack``: delete, or
        archive on a queue that archives) and count them (``depth``, ``acked_total``): per
        item True if acked, False if the message is there under another token (its lease
        was lost), None if there is no such message (an item repeating an acked one
        included); or None if there is no such queue.
        """

    @abc.abstractmethod
    def set_messages_lifo(self, queue_id: int, lifo: bool) -> None:
        """Move a queue's messages to the claim index of its (new) order."""

    # --- enqueue --------------------------------------------------------------------------------
    @abc.abstractmethod
    def find_dedup(self, queue_id: int, keys: Sequence[str], now: int) -> dict[str, int]:
        """The message ids recorded for those of ``keys`` still inside their window."""

    @abc.abstractmethod
    def put_dedup(self, rows: Sequence[tuple[int, str, int, int]]) -> None:
        """Record (queue_id, key, message_id, expires_at), replacing a stale record."""

    @abc.abstractmethod
    def insert_messages(self, rows: Sequence[NewMessage]) -> list[int]:
        """Insert messages; returns their ids in input order."""

    # --- leases ---------------------------------------------------------------------------------
    # A write that acts on a lease names it by its token and checks it in the statement that
    # writes: another transaction may lease the message between a read and a write (PostgreSQL
    # at READ COMMITTED, where a claim does not lock the queue's row), and only the writing
    # statement sees that claim once it committed.
    @abc.abstractmethod
    def dead_letter_expired(
        self, queue_id: int, now: int, max_attempts: int, dlq: QueueRow, origin: str
    ) -> int:
        """Move messages whose lease expired at ``max_attempts`` to ``dlq``; returns how many."""

    @abc.abstractmethod
    def release_expired(self, queue_id: int, now: int) -> int:
        """Make messages whose lease expired ready again, keeping their token."""

    @abc.abstractmethod
    def claim(
        self, queue_id: int, lifo: bool, now: int, limit: int, lease_until: int,
        shuffle: bool = False) -> list[MessageRow]:
        """Lease up to ``limit`` ready messages, fresh tokens, in delivery order or shuffled."""

    @abc.abstractmethod
    def unclaim(self, items: Sequence[tuple[int, str]]) -> None:
        """Give back leases this transaction's claim made, as if never made: each ``(id,
        token)`` still leased under ``token`` gets its lease and token cleared and
        ``attempts`` one less (``available_at`` is unchanged: the message keeps its place)."""

    @abc.abstractmethod
    def ack(self, queue_id: int, msg_id: int, token: str, archive: bool, now: int) -> bool:
        """Delete a message (and with ``archive`` keep what was deleted in the archive, acked
        at ``now``) if ``token`` is its current token; True if it did."""

    @abc.abstractmethod
    def message_exists(self, queue_id: int, msg_id: int) -> bool:
        """Whether the queue holds a message with this id."""

    @abc.abstractmethod
    def attempts_if_token(self, queue_id: int, msg_id: int, token: str) -> int | None:
        """The message's attempts if ``token`` is its current token, else None: a read, which
        a later write acting on the lease checks again (``release``, ``dead_letter``). While
        the token stays, so do the attempts (a claim changes both)."""

    @abc.abstractmethod
    def release(
        self, queue_id: int, msg_id: int, token: str, available_at: int, error: str | None
    ) -> bool:
        """End the lease held with ``token`` (nack): the message is ready again at
        ``available_at``, its token cleared, ``error`` kept if given. True if it did; False
        if ``token`` is not the message's current token (or there is no such message)."""

    @abc.abstractmethod
    def dead_letter(
        self, queue_id: int, msg_id: int, token: str, dlq: QueueRow, now: int,
        error: str | None, origin: str,
    ) -> bool:
        """Move one message held with ``token`` to ``dlq`` (nack at ``max_attempts``), ready
        there at ``now``; True if it did, False as ``release`` says."""

    @abc.abstractmethod
    def extend(self, queue_id: int, items: Sequence[tuple[int, str, int]]) -> list[bool | None]:
        """Set the lease end of each ``(id, token, until)`` item whose message the queue holds
        under ``token``, as if one at a time in order (an item repeated: its last ``until``
        holds): per item True if it did, False if the message is there under another token
        (or none), None if there is no such message."""

    # --- reads and admin ------------------------------------------------------------------------
    @abc.abstractmethod
    def peek(
        self, queue_id: int, lifo: bool, now: int, limit: int, max_attempts: int | None
    ) -> list[MessageRow]:
        """The next ready messages in delivery order, untouched: what the next poll at
        ``now`` would lease. A message whose lease ended is ready again (from its lease's
        end), unless it had ``max_attempts`` (None: a DLQ, no limit) and is on its way to
        the DLQ."""

    @abc.abstractmethod
    def get_message(self, queue_id: int, msg_id: int) -> MessageRow | None:
        """One message of the queue by id."""

    @abc.abstractmethod
    def delete_message(self, queue_id: int, msg_id: int) -> bool:
        """Delete one message; True if it existed."""

    @abc.abstractmethod
    def purge(self, queue_id: int) -> int:
        """Delete every message of a queue; returns how many."""

    @abc.abstractmethod
    def list_messages(self, queue_id: int, after_id: int, limit: int) -> list[MessageRow]:
        """Messages of a queue with id > ``after_id`` ordered by id."""

    @abc.abstractmethod
    def scan_messages(
        self, queue_id: int, after_id: int, max_id: int, now: int, limit: int
    ) -> list[MessageRow]:
        """Up to ``limit`` unexpired messages of a queue (leased ones included) with
        ``after_id < id <= max_id``, ordered by id."""

    @abc.abstractmethod
    def scan_archive(
        self, queue_id: int, after_id: int, max_id: int, retention_ms: int, limit: int
    ) -> list[MessageRow]:
        """Up to ``limit`` archived (acked) messages of a queue with ``after_id < id <=
        max_id``, ordered by id, as message rows: ``available_at`` is when it was acked,
        ``expires_at`` acked + ``retention_ms``; no lease, no origin."""

    @abc.abstractmethod
    def idempotency_keys(
        self, queue_id: int, first_id: int, last_id: int, now: int
    ) -> dict[int, str]:
        """Message id → unexpired idempotency key, for the ids in ``first_id…last_id`` that
        were enqueued to queue ``queue_id`` with a key."""

    @abc.abstractmethod
    def high_water(self, queue_id: int, archive: bool) -> int | None:
        """The largest message id of a queue (``archive``: of its archive), None if none."""

    @abc.abstractmethod
    def move_all(
        self, from_id: int, to: QueueRow, ids: Sequence[int] | None, now: int,
        limit: int | None = None,
    ) -> tuple[int, int]:
        """Move messages (all, or ``ids``) to queue ``to``, ready now, attempts reset, with
        ``to``'s retention as their new TTL; at most ``limit`` of them (None: no limit), the
        smallest ids first.

        A message whose lease has not ended at ``now`` is skipped and stays where it is, so
        its holder can still ack it (a DLQ consumer's lease is not taken away); one whose
        lease has ended moves, its token cleared. An expired message never moves (it is gone;
        the reaper removes it). Returns how many moved, and how many more would have moved
        but for ``limit``.
        """

    @abc.abstractmethod
    def next_due(self, queue_id: int, now: int) -> int | None:
        """The earliest time a message of the queue may become ready (delay or lease end).

        Messages that expire at or before that time, or at or before ``now``, never become
        ready and are left out: a long poll waiting for them would wake for nothing.
        """

    @abc.abstractmethod
    def counts(self, queue_id: int, now: int) -> LiveCounts:
        """A queue's counts at ``now`` (see ``QueueCounts``), as the next poll sees them."""

    @abc.abstractmethod
    def all_counts(self, now: int) -> list[QueueCounts]:
        """Every queue (DLQs included) by name with its counters and ``counts``, in one
        statement: reading all queues costs no round trip per queue (metrics scrapes)."""


class Backend(abc.ABC):
    """A database holding sqew's schema."""

    statements_on_loop: bool = False
    """Whether a group commit may run this backend's statements on the server's event loop
    (true when they take microseconds and never wait: SQLite's, once the write lock is held).
    Otherwise a group's statements run through the group commit's ``offload``."""

    @abc.abstractmethod
    def write_session(self) -> WriteSession:
        """A dedicated connection for a group committer (see ``WriteSession``)."""

    @abc.abstractmethod
    def write(self) -> AbstractContextManager[Tx]:
        """A write transaction: committed on exit, rolled back on an exception."""

    @abc.abstractmethod
    def read(self) -> AbstractContextManager[Tx]:
        """A read-only snapshot transaction."""

    @abc.abstractmethod
    def waiter(self) -> Waiter:
        """The long polls' waiter for this database (one per service)."""

    def fast_paths(self) -> FastPaths | None:
        """The by-name writes as transactions of one statement each, for a writer running an
        operation alone (``Op.fast``); None (the default) where a transaction of a few
        statements costs about as much (SQLite)."""
        return None

    @abc.abstractmethod
    def try_lead(self, role: str, *, brief: bool = False) -> Lead | None:
        """Become the one process per database doing ``role`` ("reaper"), without waiting: a
        held Lead, or None when another process holds it.

        The lead is held while this process lives (released by ``Lead.release``, or by the
        operating system or the database when the process dies), so a follower that asks
        again later takes over from a leader that died. It never waits for the lead, though
        it may take a round trip to the database (a server calls it on a thread). A ``brief``
        lead (released within the call that took it) may borrow what the backend has open.
        """

    @abc.abstractmethod
    def maintain(self) -> None:
        """Refresh statistics and reclaim space where the database allows (compact)."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Raise ``Unavailable`` unless the database answers."""

    @abc.abstractmethod
    def schema_revision(self) -> str | None:
        """The migration revision the database is at now (None: no sqew schema)."""

    @property
    @abc.abstractmethod
    def schema_head(self) -> str:
        """The revision this code's schema is at (a ready database is at it)."""

    @property
    def clock(self) -> Clock:
        """The time that every process on this database stamps with (epoch milliseconds): a
        service's clock unless its caller gives one.

        Default: this host's wall clock (a SQLite file is shared by the processes of one
        host). PostgreSQL: the database server's (processes on many hosts share it).
        """
        return system_clock

    @abc.abstractmethod
    def close(self) -> None:
        """Close every connection."""

