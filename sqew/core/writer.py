"""Write operations and the writers that run them.

Every state change of the service is an ``Op``: a unit that runs alone in a transaction, or
merged with others of its kind (same ``key``) in one group commit. Each operation's rules are
written once, in its ``run``/``run_merged``; an operation that runs alone may also have a fast
variant (``fast``: a transaction of one statement, where the backend offers one), which the
writer tries first. Which writer runs it is chosen when the service is
built (``DirectWriter`` for the CLI and the embedded Client, ``sqew.core.group_commit`` for a
server), never by a transport. The writer reads the clock *inside* the transaction, after the
write lock was taken, and hands that ``now`` to the operation: a time read before waiting for a
lock would be stale (leases handed out already expired, TTLs and windows shifted).
"""

from __future__ import annotations

import abc
import asyncio
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from concurrent.futures import Executor
from typing import Any, Generic, TypeVar

from sqew import errors
from sqew.backends.base import MISSED, Backend, FastPaths, Missed, Tx, Waiter
from sqew.backends.errors import Conflict
from sqew.core import rules
from sqew.core.clock import Clock

R = TypeVar("R")
T = TypeVar("T")
log = logging.getLogger("sqew.writer")
CONFLICT_ATTEMPTS = 3
"""The writers' one retry policy: an operation (a group) whose transaction the database aborted
for a conflict with another (``Conflict``: a deadlock) runs again at once, up to this many runs
in all; then the caller gets the ``Conflict`` (``Unavailable``, 503)."""

Outcome = tuple[bool, Any]
"""One operation's result in a merged run: ``(True, value)`` or ``(False, SqewError)``."""


class Op(abc.ABC, Generic[R]):
    """One write operation of the service.

    ``notify``: the queues whose long polls to wake once the operation committed.
    ``locks_first``: whether ``run`` itself writes its queue's row before any message row
    (then a transaction of its own needs no ``Tx.lock_queues`` first).
    ``gives_back``: whether ``give_back`` undoes anything (a claim): a group commit asks it of
    the operations whose callers left while their transaction ran.
    ``has_fast``: whether ``fast`` may do the operation (else the writer does not ask).
    """

    __slots__ = ()
    notify: tuple[str, ...] = ()
    locks_first = False
    gives_back = False
    has_fast = False

    def fast(self, paths: FastPaths, now: int) -> R | Missed:
        """The operation as one of the backend's fast paths (a transaction of one statement)
        at time ``now``, when a writer runs it alone: its result, or ``MISSED`` where nothing
        was written and it must run as usual (``run``, in a transaction). Default: MISSED."""
        return MISSED

    def caller_gone(self) -> bool:
        """Whether the caller has gone and will read no result (a poll whose client
        disconnected: the server tells through a callable, never HTTP). Default: never."""
        return False

    def give_back(self, tx: Tx, result: R) -> R:
        """Undo in ``tx``, before it commits, what the operation did for a caller that has
        gone (``caller_gone``, or its call cancelled), and return what it answers instead.
        Default: nothing is undone (the write stands: an enqueue whose client left is made)."""
        return result

    def queues(self) -> tuple[str, ...] | None:
        """The queues whose rows the operation may write (None: any): its ``queue`` (or
        ``name``) and that queue's DLQ. A transaction locks them first (``Tx.lock_queues``)."""
        name = getattr(self, "queue", None) or getattr(self, "name", None)
        return (name, rules.dlq_name(name)) if isinstance(name, str) else ()

    def lock_names(self, tx: Tx) -> tuple[str, ...] | None:
        """The queues a transaction locks before running the operation in ``tx``: ``queues``,
        unless the operation reads more (the named dead-letter target of an operation that
        may dead-letter, ``sqew.core.delivering.lock_set``)."""
        return self.queues()

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


class WriteObserver:
    """What the writers report about their transactions; this base reports to nobody.

    A server passes a subclass that feeds its metrics (core imports no metrics library). Called
    on the writer's own thread or loop, once per transaction: keep it cheap, never raise.
    """

    def transaction(self, seconds: float) -> None:
        """A write transaction ended (committed or not) ``seconds`` after it began to take
        the write lock."""

    def group(self, operations: int) -> None:
        """A group commit ran ``operations`` operations in one transaction."""


NO_OBSERVER = WriteObserver()


class Writer(abc.ABC):
    """Runs operations, each committed before its result is returned."""

    @abc.abstractmethod
    async def write(self, op: Op[R]) -> R:
        """The committed result of ``op`` (or its error)."""

    @abc.abstractmethod
    def submit(self, op: Op[R], then: Callable[[R | None], None] | None = None) -> None:
        """Run ``op`` without waiting for its result (a failure is logged): now, or ahead of
        the writes that follow it; ``then`` is called once it ended, with its result (None if
        it failed)."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Finish what is pending and stop."""


class DirectWriter(Writer):
    """Each operation in a transaction of its own, right away, on the calling thread.

    Its ``write`` never suspends, so a synchronous caller can run it with ``run_sync``.
    """

    def __init__(
        self, backend: Backend, clock: Clock, waiter: Waiter,
        observer: WriteObserver = NO_OBSERVER,
    ) -> None:
        self._backend = backend
        self._fast = backend.fast_paths()
        self._clock = clock
        self._waiter = waiter
        self._observer = observer

    async def write(self, op: Op[R]) -> R:
        return self.run(op)

    def submit(self, op: Op[R], then: Callable[[R | None], None] | None = None) -> None:
        result: R | None = None
        try:
            result = self.run(op)
        except errors.SqewError as exc:  # a read-only or busy database: the caller goes on
            log.info("a background write failed: %s", exc.message)
        except Exception:
            log.exception("a background write failed")
        if then is not None:
            then(result)

    def run(self, op: Op[R]) -> R:
        """Run ``op`` in a transaction of its own (blocking) and return its result.

        A transaction the database aborted because it conflicted with another (PostgreSQL's
        deadlock detection, say) runs again, up to ``CONFLICT_ATTEMPTS`` times in all.
        """
        for _ in range(CONFLICT_ATTEMPTS - 1):
            try:
                return self._run_once(op)
            except Conflict:
                log.info("a write conflicted with another transaction; running it again")
        return self._run_once(op)

    def _run_once(self, op: Op[R]) -> R:
        start = time.perf_counter()
        try:
            if op.has_fast and self._fast is not None:
                done = op.fast(self._fast, self._clock())
                if done is not MISSED:
                    if op.notify:  # (its statement told other processes' waiters)
                        self._waiter.changed(op.notify)
                    return done
            with self._backend.write() as tx:
                if not op.locks_first:
                    tx.lock_queues(op.lock_names(tx))
                result = op.run(tx, self._clock())
                if op.notify:  # other processes' waiters, at the commit (see Tx.notify)
                    tx.notify(op.notify)
        finally:
            self._observer.transaction(time.perf_counter() - start)
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
    thread keeps its own database connection). Its loop is built whole, whatever signal comes
    (``_whole_loop``).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        with asyncio.Runner(loop_factory=_whole_loop) as runner:
            return runner.run(coro)
    return elsewhere().submit(asyncio.run, coro).result()


def _whole_loop() -> asyncio.AbstractEventLoop:
    """A new event loop, built with SIGINT and SIGTERM held back until it is whole.

    Python runs signal handlers on the main thread, between two of its instructions: a Ctrl-C
    (``KeyboardInterrupt``), or a handler that raises, landing inside the loop's constructor
    would leave a half-built loop, whose finalizer then fails on the attributes it lacks
    ("Exception ignored in BaseEventLoop.__del__" on stderr). A signal that comes meanwhile is
    handed to its own handler once the loop is built (and the loop closed if that raises).
    """
    if threading.current_thread() is not threading.main_thread():
        return asyncio.new_event_loop()  # signal handlers never run here
    previous = {signum: signal.getsignal(signum) for signum in _HELD_SIGNALS}
    held = [signum for signum, handler in previous.items()
            if handler is not None and handler != signal.SIG_IGN]  # None: not set from Python
    came: list[int] = []
    loop: asyncio.AbstractEventLoop | None = None
    try:
        for signum in held:
            signal.signal(signum, lambda number, _: came.append(number))
        loop = asyncio.new_event_loop()
    finally:
        for signum in held:
            signal.signal(signum, previous[signum])
        try:
            for number in came:
                _deliver(number, previous[signal.Signals(number)])
        except BaseException:
            if loop is not None:
                loop.close()
            raise
    return loop


def _deliver(signum: int, handler: signal.Handlers | int | Callable[..., Any] | None) -> None:
    """What ``signum`` would have done, arriving now, with ``handler`` its handler."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)


_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)
