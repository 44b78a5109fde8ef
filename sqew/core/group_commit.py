"""Group commit: pending write operations of concurrent callers share one transaction.

Under concurrency a commit per request makes the database the bottleneck (and, with
synchronous=FULL, one fsync per request). The committer runs on the server's event loop:
operations submitted while a group runs wait for the next one, and a group's statements run
right there on the loop, because handing each one to a writer thread and back cost more than
the statements themselves (thread wake-ups, and the GIL passed back and forth at every SQLite
call). Only the steps that wait go to a thread: taking the write lock when someone else holds
it, and a commit that waits for the disk (durability ``full``). While they wait the loop goes
on serving, and what arrives meanwhile joins the next group.

If an operation fails (a quota, a missing queue), the attempt is rolled back and the group runs
again with each operation in its own savepoint, so the failing one is rolled back alone. The
group is committed once and only then is each caller told its result, so a success still means
"committed".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from sqew import errors
from sqew.backends.base import Backend, Tx, WriteSession

T = TypeVar("T")
MAX_GROUP = 512
"""Most operations in one transaction: bounds the latency a large group adds."""

Op = Callable[[Tx], Any]
AnyFuture = asyncio.Future[Any] | concurrent.futures.Future[Any]
Item = tuple[Op, AnyFuture, tuple[str, ...]]
"""A pending operation: the write, its caller's future, the queues to notify."""
log = logging.getLogger("sqew.writer")


class GroupCommitter:
    """Runs write operations ``fn(tx)`` on an event loop, many per transaction.

    Args:
        backend: the database; the committer takes a dedicated write session of it.
        loop: the event loop the groups run on (the server's).
        on_commit: called on the loop with the queues named by the ``notify`` of a group's
            operations once that group committed (the service wakes their long polls).
    """

    def __init__(
        self,
        backend: Backend,
        loop: asyncio.AbstractEventLoop,
        *,
        on_commit: Callable[[set[str]], None] | None = None,
    ) -> None:
        self._session: WriteSession = backend.write_session()
        self._loop = loop
        self._on_commit = on_commit
        self._pending: list[Item] = []
        self._drain: asyncio.Task[None] | None = None
        self._waits = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sqew-writer")
        self._closed = False

    # --- submitting -----------------------------------------------------------------------------
    def submit(
        self, fn: Callable[[Tx], T], *, notify: tuple[str, ...] = ()
    ) -> asyncio.Future[T]:
        """Queue ``fn`` for the next group; call on the loop. Resolves after the commit.

        ``notify``: queues to pass to ``on_commit`` once the group committed (the write may
        have made messages of them ready).
        """
        if self._closed:
            raise errors.Unavailable("the service is shutting down")
        future: asyncio.Future[T] = self._loop.create_future()
        self._add(fn, future, notify)
        return future

    def run(self, fn: Callable[[Tx], T], *, notify: tuple[str, ...] = ()) -> T:
        """Submit ``fn`` from another thread and wait for its committed result (or error)."""
        if self._closed:
            raise errors.Unavailable("the service is shutting down")
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("GroupCommitter.run on its own loop would wait for itself")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            self._loop.call_soon_threadsafe(self._add, fn, future, notify)
        except RuntimeError:  # the loop has closed
            raise errors.Unavailable("the service is shutting down") from None
        return future.result()

    def _add(self, fn: Op, future: AnyFuture, notify: tuple[str, ...]) -> None:
        if self._closed and self._drain is None:
            future.set_exception(errors.Unavailable("the service is shutting down"))
            return
        self._pending.append((fn, future, notify))
        if self._drain is None:
            # A task, not a direct call: it starts after the callbacks already due on this
            # loop turn, so the requests that arrived together are in one group.
            self._drain = self._loop.create_task(self._run())

    async def aclose(self) -> None:
        """Finish pending operations, then close the session (call on the loop)."""
        self._closed = True
        if self._drain is not None:
            await self._drain
        self._waits.shutdown(wait=True)
        self._session.close()

    # --- running --------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            # One more loop turn before the first group: requests read in the same batch of
            # socket events reach their submit a turn or two apart (reading the body awaits),
            # and waiting for them makes the groups under load larger. In interleaved runs at
            # 16 connections: poll+ack 0 to +50 % requests/s, enqueue 0 to +10 %, never a clear
            # loss, no change at one connection (docs/benchmarks.md).
            await asyncio.sleep(0)
            while self._pending:
                group = self._pending[:MAX_GROUP]
                del self._pending[:MAX_GROUP]
                await self._commit([item for item in group if _claim(item[1])])
        finally:
            self._drain = None

    async def _begin(self) -> None:
        if not self._session.try_begin():  # someone else writes: wait off the loop
            await self._loop.run_in_executor(self._waits, self._session.begin)

    async def _end(self) -> None:
        if self._session.commit_waits:
            await self._loop.run_in_executor(self._waits, self._session.commit)
        else:
            self._session.commit()

    async def _commit(self, group: list[Item]) -> None:
        if not group:
            return
        # Optimistic first: the whole group in one transaction without savepoints (two fewer
        # statements per operation). Operations rarely fail; when one does, nothing of this
        # attempt is kept and the group runs again with a savepoint around each operation.
        try:
            await self._begin()
        except Exception as exc:
            _fail(group, exc)
            return
        try:
            results = [fn(self._session.tx) for fn, _, _ in group]
        except Exception:
            try:
                self._session.rollback()
            except Exception as exc:
                _fail(group, exc)
                return
            await self._commit_isolated(group)
            return
        try:
            await self._end()
        except Exception as exc:  # the commit failed: nobody's write happened
            _fail(group, exc)
            return
        self._resolve(group, [(True, value) for value in results])

    async def _commit_isolated(self, group: list[Item]) -> None:
        """Run the group again, each operation in a savepoint: one failure fails only itself."""
        outcomes: list[tuple[bool, Any]] = []
        try:
            await self._begin()
        except Exception as exc:
            _fail(group, exc)
            return
        tx = self._session.tx
        try:
            for fn, _, _ in group:
                try:
                    with tx.savepoint():
                        outcomes.append((True, fn(tx)))
                except errors.SqewError as exc:
                    outcomes.append((False, exc))
                except Exception:  # a bug in one operation fails that one alone
                    log.exception("write operation failed")
                    outcomes.append((False, errors.InternalError()))
            await self._end()
        except Exception as exc:  # the commit itself failed: nobody's write happened
            with contextlib.suppress(Exception):
                self._session.rollback()
            _fail(group, exc)
            return
        self._resolve(group, outcomes)

    def _resolve(self, group: list[Item], outcomes: list[tuple[bool, Any]]) -> None:
        notify: set[str] = set()
        for (_, future, queues), (ok, value) in zip(group, outcomes, strict=True):
            if ok and queues:
                notify.update(queues)
            if future.done():  # an awaiting request was cancelled meanwhile
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        if notify and self._on_commit is not None:
            self._on_commit(notify)


def _claim(future: AnyFuture) -> bool:
    """Whether the operation should still run (its caller has not given up)."""
    if isinstance(future, concurrent.futures.Future):
        return future.set_running_or_notify_cancel()
    return not future.done()


def _fail(group: list[Item], exc: BaseException) -> None:
    if isinstance(exc, errors.SqewError) and not isinstance(exc, errors.InternalError):
        err: errors.SqewError = exc
    else:
        log.error("group commit failed", exc_info=exc)
        err = errors.InternalError()
    for _, future, _ in group:
        if not future.done():
            future.set_exception(err)

