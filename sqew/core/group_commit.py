"""Group commit: one writer thread drains pending write operations into one transaction.

Under concurrency a commit per request makes the database the bottleneck (and, with
synchronous=FULL, one fsync per request). Here every pending operation runs inside one
transaction; if one fails (a quota, a missing queue), the attempt is rolled back and the group
runs again with each operation in its own savepoint, so the failing one is rolled back alone.
The group is committed once and only then is each caller told its result, so a success still
means "committed".
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from sqew import errors
from sqew.backends.base import Backend, Tx

T = TypeVar("T")
MAX_GROUP = 512
"""Most operations in one transaction: bounds the latency a large group adds."""

_STOP = object()
log = logging.getLogger("sqew.writer")


class GroupCommitter:
    """Runs write operations ``fn(tx)`` on one thread, many per transaction."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._pending: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sqew-writer", daemon=True)
        self._closed = False
        self._thread.start()

    def submit(self, fn: Callable[[Tx], T]) -> Future[T]:
        """Queue ``fn`` to run in the next group; the future resolves after the commit."""
        if self._closed:
            raise errors.Unavailable("the service is shutting down")
        future: Future[T] = Future()
        self._pending.put((fn, future))
        return future

    def run(self, fn: Callable[[Tx], T]) -> T:
        """Submit ``fn`` and wait for its committed result (or its exception)."""
        return self.submit(fn).result()

    def close(self) -> None:
        """Finish pending operations, then stop the writer thread."""
        if not self._closed:
            self._closed = True
            self._pending.put(_STOP)
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            first = self._pending.get()
            if first is _STOP:
                return
            group = [first]
            stop = False
            while len(group) < MAX_GROUP:
                try:
                    item = self._pending.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                group.append(item)
            self._commit(group)
            if stop:
                return

    def _commit(self, group: list[tuple[Callable[[Tx], Any], Future[Any]]]) -> None:
        group = [(fn, f) for fn, f in group if f.set_running_or_notify_cancel()]
        if not group:
            return
        # Optimistic first: the whole group in one transaction without savepoints (two fewer
        # statements per operation). Operations rarely fail; when one does, nothing of this
        # attempt is kept and the group runs again with a savepoint around each operation.
        try:
            with self._backend.write() as tx:
                results = [fn(tx) for fn, _ in group]
        except Exception:
            self._commit_isolated(group)
            return
        except BaseException as exc:
            for _fn, future in group:
                future.set_exception(errors.InternalError())
            raise exc
        for (_fn, future), value in zip(group, results, strict=True):
            future.set_result(value)

    def _commit_isolated(self, group: list[tuple[Callable[[Tx], Any], Future[Any]]]) -> None:
        """Run the group again, each operation in a savepoint: one failure fails only itself."""
        outcomes: list[tuple[Future[Any], bool, Any]] = []
        try:
            with self._backend.write() as tx:
                for fn, future in group:
                    try:
                        with tx.savepoint():
                            outcomes.append((future, True, fn(tx)))
                    except errors.SqewError as exc:
                        outcomes.append((future, False, exc))
                    except Exception as exc:  # a bug in one operation fails that one alone
                        log.exception("write operation failed")
                        outcomes.append((future, False, errors.InternalError()))
                        del exc
        except BaseException as exc:  # the commit itself failed: nobody's write happened
            err = exc if isinstance(exc, errors.SqewError) else errors.InternalError()
            for _fn, future in group:
                if not future.done():
                    future.set_exception(err)
            if not isinstance(exc, Exception):
                raise
            return
        for future, ok, value in outcomes:
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
