"""Write operations and the writers that run them.

Every state change of the service is an ``Op``: a unit that runs alone in a transaction, or
merged with others of its kind (same ``key``) in one group commit. Each operation's rules are
written once, in its ``run``/``run_merged``; which writer runs it is chosen when the service is
built (``DirectWriter`` for the CLI and the embedded Client, ``sqew.core.group_commit`` for a
server), never by a transport. The writer reads the clock *inside* the transaction, after the
write lock was taken, and hands that ``now`` to the operation: a time read before waiting for a
lock would be stale (leases handed out already expired, TTLs and windows shifted).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from concurrent.futures import Executor
from typing import Any, Generic, TypeVar

from sqew import errors
from sqew.backends.base import Backend, Tx, Waiter
from sqew.backends.errors import is_conflict
from sqew.core.clock import Clock

R = TypeVar("R")
T = TypeVar("T")
log = logging.getLogger("sqew.writer")
CONFLICT_ATTEMPTS = 3
"""Runs of an operation whose transaction the database aborted for a conflict (deadlock)."""

Outcome = tuple[bool, Any]
"""One operation's result in a merged run: ``(True, value)`` or ``(False, SqewError)``."""


class Op(abc.ABC, Generic[R]):
    """One write operation of the service.

    ``notify``: the queues whose long polls to wake once the operation committed.
    """

    __slots__ = ()
    notify: tuple[str, ...] = ()

    def key(self) -> Hashable | None:
        """Operations with the same key in one group commit run merged (None: alone)."""
        return None

    @abc.abstractmethod
    def run(self, tx: Tx, now: int) -> R:
        """Apply the operation in ``tx`` at time ``now``; raise a SqewError to fail it."""

    @classmethod
    def run_merged(cls, tx: Tx, ops: Sequence[Any], now: int) -> list[Outcome]:
        """Apply several operations of this kind (same ``key``) at once, one outcome each.

        A failure of one operation fails only that one (the implementation isolates it); an
        exception fails them all. Only called for kinds whose ``key`` is not None.
        """
        raise NotImplementedError


class Writer(abc.ABC):
    """Runs operations, each committed before its result is returned."""

    @abc.abstractmethod
    async def write(self, op: Op[R]) -> R:
        """The committed result of ``op`` (or its error)."""

    @abc.abstractmethod
    def submit(self, op: Op[Any]) -> None:
        """Run ``op`` without waiting for its result (a failure is logged): now, or ahead of
        the writes that follow it."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Finish what is pending and stop."""


class DirectWriter(Writer):
    """Each operation in a transaction of its own, right away, on the calling thread.

    Its ``write`` never suspends, so a synchronous caller can run it with ``run_sync``.
    """

    def __init__(self, backend: Backend, clock: Clock, waiter: Waiter) -> None:
        self._backend = backend
        self._clock = clock
        self._waiter = waiter

    async def write(self, op: Op[R]) -> R:
        return self.run(op)

    def submit(self, op: Op[Any]) -> None:
        try:
            self.run(op)
        except errors.SqewError as exc:  # a read-only or busy database: the caller goes on
            log.info("a background write failed: %s", exc.message)
        except Exception:
            log.exception("a background write failed")

    def run(self, op: Op[R]) -> R:
        """Run ``op`` in a transaction of its own (blocking) and return its result.

        A transaction the database aborted because it conflicted with another (PostgreSQL's
        deadlock detection, say) runs again, up to ``CONFLICT_ATTEMPTS`` times in all.
        """
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                return self._run_once(op)
            except errors.SqewError as exc:
                if attempt == CONFLICT_ATTEMPTS or exc.__cause__ is None or not is_conflict(
                    exc.__cause__
                ):
                    raise
                log.info("a write conflicted with another transaction; running it again")
        raise AssertionError("unreachable")

    def _run_once(self, op: Op[R]) -> R:
        with self._backend.write() as tx:
            result = op.run(tx, self._clock())
            if op.notify:  # other processes' waiters, at the commit (see Tx.notify)
                tx.notify(op.notify)
        if op.notify:
            self._waiter.changed(op.notify)
        return result

    async def aclose(self) -> None:
        return None


Offload = Callable[[Callable[[], T]], Awaitable[T]]
"""Runs a blocking call (a read, a long maintenance write) and awaits its result: on a thread
in a server, inline for the embedded Client."""


async def inline(fn: Callable[[], T]) -> T:
    """The embedded ``Offload``: run the call right here."""
    return fn()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a service call that completes without suspending (the embedded Client's
    calls on a ``DirectWriter``; a waiting long poll needs an event loop instead)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a service call suspended outside an event loop")


def run_blocking(coro: Coroutine[Any, Any, T], elsewhere: Callable[[], Executor]) -> T:
    """Run a service call that may suspend (a long poll) to its end on a fresh event loop.

    Called from inside a running loop (synchronous code in a coroutine), where no second loop
    may run on this thread, it runs on the executor ``elsewhere()`` gives (reuse one: each
    thread keeps its own database connection).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return elsewhere().submit(asyncio.run, coro).result()
