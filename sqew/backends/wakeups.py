"""The in-process half of every backend's waiter: per-queue generations and awaitable wakes.

A long poll awaits a future on its own event loop; a commit anywhere in the process (a group
commit on the server's loop, a direct transaction on a client's thread) moves its queues'
generations and resolves the futures of their waits, on each future's own loop. A waiting
poll costs a future and a dictionary entry, never a thread.

The moment a poll is parked is public observability: in-process through ``waiting`` (the
count a server's metrics read), ``until_waiting`` and ``until_idle`` (blocking until that
count is reached, for code that embeds sqew and must know a poll waits, tests among it), and
from outside a server process through the debug lines on ``sqew.waiter`` (``long poll waiting
on queue 'q'`` / ``long poll on queue 'q' stopped waiting``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterable
from typing import cast

from sqew.backends.base import Waiter

log = logging.getLogger("sqew.waiter")
Mark = tuple[int, object]
"""A waiter's mark: the queue's in-process generation and the backend's own part."""


class InProcessWaiter(Waiter):
    """Wakes waits on commits of this process; a backend subclass adds other processes'.

    Besides the contract, it offers observability (the module docstring): ``until_waiting``
    and ``until_idle``. Subclasses override ``_external_mark`` (taken with every mark) and
    ``_watch`` (started on a loop while waits are in progress there) to notice commits made
    elsewhere.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}
        self._waits: dict[str, list[asyncio.Future[None]]] = {}
        self._closed = False
        self._count_changed = threading.Condition(self._lock)

    # --- the contract ---------------------------------------------------------------------------
    def mark(self, queue: str) -> Mark:
        return self._generations.get(queue, 0), self._external_mark(queue)

    async def wait(self, queue: str, mark: object, timeout_s: float) -> None:
        generation, external = cast(Mark, mark)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._closed or self._generations.get(queue, 0) != generation:
                return
            self._waits.setdefault(queue, []).append(future)
            self._count_changed.notify_all()
        log.debug("long poll waiting on queue %r", queue)
        self._watch(loop, queue, external, future)
        try:
            await asyncio.wait((future,), timeout=timeout_s)
        finally:
            with self._lock:
                waits = self._waits.get(queue)
                if waits is not None:
                    waits.remove(future)
                    if not waits:
                        del self._waits[queue]
                self._count_changed.notify_all()
            log.debug("long poll on queue %r stopped waiting", queue)
            self._unwatch(loop, queue, future)

    def changed(self, queues: Iterable[str]) -> None:
        with self._lock:  # a wait checks the generation and registers under the same lock
            woken: list[asyncio.Future[None]] = []
            for queue in queues:
                self._generations[queue] = self._generations.get(queue, 0) + 1
                woken += self._waits.get(queue, ())
        for future in woken:
            wake(future)

    def waiting(self, queue: str) -> int:
        return len(self._waits.get(queue, ()))

    def until_waiting(self, queue: str, count: int, timeout_s: float) -> bool:
        """Observability: block until at least ``count`` waits on ``queue`` are in progress
        (the moment a long poll is parked); False if ``timeout_s`` passed first."""
        with self._lock:
            return self._count_changed.wait_for(
                lambda: len(self._waits.get(queue, ())) >= count, timeout_s
            )

    def until_idle(self, queue: str, timeout_s: float) -> bool:
        """Observability: block until no wait on ``queue`` is in progress (every parked poll
        of it has stopped waiting); False if ``timeout_s`` passed first."""
        with self._lock:
            return self._count_changed.wait_for(
                lambda: queue not in self._waits, timeout_s
            )

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            self._closed = True
            woken = [f for waits in self._waits.values() for f in waits]
        for future in woken:
            wake(future)

    # --- hooks for other processes' commits -----------------------------------------------------
    def _external_mark(self, queue: str) -> object:
        """The backend's part of a mark (default: none)."""
        return None

    def _watch(
        self, loop: asyncio.AbstractEventLoop, queue: str, mark: object,
        future: asyncio.Future[None],
    ) -> None:
        """A wait on ``queue`` started on ``loop``: resolve ``future`` (with ``wake``) when
        another process changes the queue after ``mark``. Default: nothing to watch."""

    def _unwatch(
        self, loop: asyncio.AbstractEventLoop, queue: str, future: asyncio.Future[None]
    ) -> None:
        """The wait of ``future`` ended."""


def wake(future: asyncio.Future[None]) -> None:
    """Resolve a wait's future from any thread, on its own loop."""
    loop = future.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        if not future.done():
            future.set_result(None)
        return
    with contextlib.suppress(RuntimeError):  # its loop has closed: the wait is over anyway
        loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
