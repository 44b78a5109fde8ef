"""The storage contract beyond transactions (``sqew.backends.base``): the group committer's
write session, the long polls' waiter, and a role one process per database leads."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqew.backends.base import Tx

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
