"""Requests of one kind on one queue that wait for the same group commit, merged into one write.

Concurrent enqueues, polls and acks on one queue are the server's most common requests. Each
would pay its own statements to find and count its queue; merged, a group pays them once: one
counting statement and one multi-row ``INSERT`` for the enqueues, one claim for the polls, one
counting statement for the acks. Each request stays its own unit: it is validated alone, fails
alone (a payload too large, a quota) while the others go on, and its caller gets its own
future, resolved after the commit.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from sqew import errors
from sqew.backends.base import Tx

P = TypeVar("P")
R = TypeVar("R")

Outcome = tuple[bool, Any]
"""Per part: ``(True, result)`` or ``(False, SqewError)``."""

Part = tuple[P, int, "asyncio.Future[Any]"]
"""One request of a merge: what it asks, its ``now`` (epoch ms), its caller's future."""


class Merged(Generic[P, R]):
    """The parts gathered under one key until the group that writes them starts.

    Args:
        key: what the parts share (kind of request, queue, …).
        loop: the commit loop (the parts' futures belong to it).
    """

    def __init__(self, key: Hashable, loop: asyncio.AbstractEventLoop) -> None:
        self.key = key
        self.parts: list[Part[P]] = []
        self.sealed = False
        self._loop = loop

    def add(self, item: P, now: int) -> asyncio.Future[R]:
        """Add a request (only before ``sealed``); its future resolves after the commit."""
        future: asyncio.Future[R] = self._loop.create_future()
        self.parts.append((item, now, future))
        return future

    def settle(self, done: asyncio.Future[list[Outcome]]) -> None:
        """Hand each caller its outcome once the merged write's own future is done."""
        error = done.exception() if not done.cancelled() else asyncio.CancelledError()
        outcomes: list[Outcome] = (
            [(False, error)] * len(self.parts) if error is not None else done.result()
        )
        for (_, _, future), (ok, value) in zip(self.parts, outcomes, strict=True):
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


class Merger:
    """Gathers requests into ``Merged`` writes and submits each to the group commit once.

    Args:
        submit: the group commit's ``submit`` (``fn(tx)`` → future of its committed result).
        loop: the commit loop.
    """

    def __init__(
        self,
        submit: Callable[..., asyncio.Future[Any]],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._submit = submit
        self._loop = loop
        self._open: dict[Hashable, Merged[Any, Any]] = {}
        self._closed = False

    def close(self) -> None:
        """Refuse new requests (``Unavailable``); the merges already submitted still run."""
        self._closed = True

    def add(
        self,
        key: Hashable,
        item: P,
        now: int,
        write: Callable[[Tx, list[Part[P]]], list[Outcome]],
        *,
        notify: tuple[str, ...] = (),
    ) -> asyncio.Future[R]:
        """Add ``item`` to the open merge under ``key``, opening and submitting one if needed.

        ``write(tx, parts)`` runs once per group (or twice: the group commit re-runs a failed
        group with savepoints) and returns one outcome per part, in order.
        """
        if self._closed:
            raise errors.Unavailable("the service is shutting down")
        merged: Merged[P, R] | None = self._open.get(key)
        if merged is None:
            merged = Merged(key, self._loop)
            future = self._submit(lambda tx, m=merged: self._run(m, tx, write), notify=notify)
            future.add_done_callback(functools.partial(self._done, merged))
            self._open[key] = merged
        return merged.add(item, now)

    def _done(self, merged: Merged[P, R], done: asyncio.Future[list[Outcome]]) -> None:
        # A group can fail before it runs the write (the write lock never came): the merge
        # must not stay open, or later requests would join a write that has already ended.
        self._seal(merged)
        merged.settle(done)

    def _seal(self, merged: Merged[Any, Any]) -> None:
        if not merged.sealed:  # later requests open a new merge, for the next group
            merged.sealed = True
            if self._open.get(merged.key) is merged:
                del self._open[merged.key]

    def _run(
        self,
        merged: Merged[P, R],
        tx: Tx,
        write: Callable[[Tx, list[Part[P]]], list[Outcome]],
    ) -> list[Outcome]:
        self._seal(merged)
        return write(tx, merged.parts)
