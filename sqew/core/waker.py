"""Wakes long polls: in-process, on every commit that may make messages of their queue ready."""

from __future__ import annotations

import threading
from collections.abc import Iterable


class Waker:
    """Per-queue generation counters; waiters sleep until their queue's counter moves.

    A commit wakes only the polls waiting on the queues it changed: waking every waiter of the
    process would make each of them run a claim (a write) for nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}
        self._conditions: dict[str, tuple[threading.Condition, list[int]]] = {}
        self._closed = False

    def generation(self, queue: str) -> int:
        """``queue``'s current generation; a later different value means it changed since."""
        return self._generations.get(queue, 0)

    def notify(self, queues: Iterable[str]) -> None:
        """These queues changed: wake their waiters."""
        with self._lock:
            for queue in queues:
                self._generations[queue] = self._generations.get(queue, 0) + 1
                slot = self._conditions.get(queue)
                if slot is not None:
                    slot[0].notify_all()

    def close(self) -> None:
        """Wake every waiter for good (shutdown)."""
        with self._lock:
            self._closed = True
            for condition, _ in self._conditions.values():
                condition.notify_all()

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def wait(self, queue: str, since: int, timeout_s: float) -> bool:
        """Sleep until ``queue``'s generation differs from ``since``, the waker closes or
        ``timeout_s`` passes; True if the generation moved (or the waker closed)."""
        with self._lock:
            if self._generations.get(queue, 0) == since and not self._closed:
                slot = self._conditions.get(queue)
                if slot is None:
                    slot = self._conditions[queue] = (threading.Condition(self._lock), [0])
                slot[1][0] += 1
                try:
                    slot[0].wait(timeout_s)
                finally:
                    slot[1][0] -= 1
                    if not slot[1][0]:
                        del self._conditions[queue]
            return self._generations.get(queue, 0) != since or self._closed
