"""The storage contract beyond transactions (``sqew.backends.base``): the group committer's
write session, the fast paths of an operation that runs alone, the long polls' waiter, and a
role one process per database leads."""

from __future__ import annotations

import abc
import enum
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

from sqew.backends.errors import driver_errors

if TYPE_CHECKING:
    from sqew.backends.base import Tx
    from sqew.backends.rows import ClaimQueue, MessageRow, NewMessage, QueueLimits

Offload = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a blocking call away from the event loop (a thread) and awaits its result."""


class WriteSession(abc.ABC):
    """A connection reserved for one group committer, its transactions taken step by step.

    ``begin`` and ``commit`` are awaited on the server's event loop: whatever may wait in them
    (a write lock held elsewhere, the disk) goes to ``offload``, so the loop goes on serving.
    One transaction at a time.
    """

    tx: Tx
    """The statements, on the session's connection (valid between a begin and its end)."""

    @abc.abstractmethod
    async def begin(self, offload: Offload) -> None:
        """Begin a write transaction; waits (for a lock) run through ``offload``."""

    @abc.abstractmethod
    async def commit(self, offload: Offload) -> None:
        """Commit the open transaction (rolled back, and the error raised, if that fails)."""

    @abc.abstractmethod
    def rollback(self) -> None:
        """Roll back the open transaction, if any."""

    def driver_errors(self) -> AbstractContextManager[None]:
        """A block of statements on ``tx``: its driver errors come out as the ``SqewError``s
        they mean (``sqew.backends.errors.driver_errors``; a conflict as ``Conflict``)."""
        return driver_errors()

    @property
    @abc.abstractmethod
    def in_transaction(self) -> bool:
        """Whether a transaction is open (some errors, a full disk, end it by themselves)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Roll back whatever is open and close the connection."""

    def write_backlog(self) -> int | None:
        """Bytes committed but not yet copied into the database proper (SQLite: the WAL's
        frames not checkpointed yet, as last seen after a checkpoint); None where the backend
        does not know (backpressure then ignores it). Cheap: no statement, a value kept."""
        return None


class Missed(enum.Enum):
    """The type of ``MISSED``."""

    MISSED = "missed"


MISSED: Final = Missed.MISSED
"""A fast path's answer where its statement wrote nothing because the database is not as it
assumed (a queue's cached settings changed, leases of the queue ended): the operation then
runs in a transaction as usual (``Op.run``)."""


class FastPaths(abc.ABC):
    """The writes that find their queue by name (``Tx.enqueue_by_name``, ``claim_by_name``,
    ``ack_by_name``), each a transaction of its own: one statement, which commits as it runs
    (one round trip). A writer uses them for an operation it runs alone (``Op.fast``);
    each answers ``MISSED`` where it wrote nothing and the operation must run as usual.

    Driver errors come out as ``SqewError``s; a statement's notification of other processes'
    waiters goes with it.
    """

    @abc.abstractmethod
    def enqueue(
        self, name: str, count: int,
        rows_for: Callable[[QueueLimits], Sequence[NewMessage]],
    ) -> list[int] | Missed:
        """``Tx.enqueue_by_name`` on the queue's settings as the backend has them cached:
        ``rows_for`` is called with them and must not refuse (a refusal is ``MISSED``: the
        queue's current settings decide); ``MISSED`` also where there are none cached, the
        queue has a quota, or its settings changed (or the queue went)."""

    @abc.abstractmethod
    def claim(
        self, name: str, now: int, limit: int, visibility_ms: int | None
    ) -> tuple[ClaimQueue, list[MessageRow]] | Missed | None:
        """``Tx.claim_by_name``: ``MISSED`` (nothing claimed) where leases of the queue ended
        (they are swept in a transaction first) or the backend had its order wrong."""

    @abc.abstractmethod
    def ack(
        self, name: str, items: Sequence[tuple[int, str]], now: int
    ) -> list[bool | None] | Missed | None:
        """``Tx.ack_by_name``: ``MISSED`` (nothing acked) where the backend had it wrong
        whether the queue archives. The answer for items that missed (lease lost, or no such
        message) is read after the ack committed."""


class Waiter(abc.ABC):
    """Wakes long polls when messages of their queue may have become ready.

    A commit of this process reports its queues through ``changed``; commits of other
    processes (or replicas) are the backend's to notice (SQLite: its data version; PostgreSQL:
    ``LISTEN/NOTIFY``). Safe to use from any thread and any event loop.
    """

    @abc.abstractmethod
    def mark(self, queue: str) -> object:
        """A mark taken *before* a claim; ``wait`` returns early on any change after it."""

    @abc.abstractmethod
    async def wait(self, queue: str, mark: object, timeout_s: float) -> None:
        """Return once ``queue`` may have changed since ``mark``, on ``close`` or after
        ``timeout_s`` seconds (spurious returns are allowed; missed changes are not)."""

    @abc.abstractmethod
    def changed(self, queues: Iterable[str]) -> None:
        """This process committed writes that may make messages of ``queues`` ready."""

    @abc.abstractmethod
    def waiting(self, queue: str) -> int:
        """How many waits on ``queue`` are in progress (tests and metrics observe it)."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """Whether ``close`` was called."""

    @abc.abstractmethod
    def close(self) -> None:
        """Wake every wait for good (shutdown)."""


class Lead(abc.ABC):
    """This process's turn at a role (``Backend.try_lead``): only one process per database
    holds a role at a time, until it releases it or dies."""

    @property
    @abc.abstractmethod
    def held(self) -> bool:
        """False once lost (the connection holding it dropped)."""

    @abc.abstractmethod
    def release(self) -> None:
        """Let another process take the role (idempotent)."""
