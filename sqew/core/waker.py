"""Wakes long polls: in-process on every commit that may make a message ready."""

from __future__ import annotations

import threading


class Waker:
    """A generation counter with a condition: waiters sleep until it moves or time runs out."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0
        self._closed = False
        self._waiting = 0

    @property
    def generation(self) -> int:
        """The current generation; compare with a later one to see whether anything happened."""
        return self._generation

    def notify(self) -> None:
        """Something changed: wake every waiter."""
        self._generation += 1  # unlocked bump: a waiter re-checks it under the lock
        if not self._waiting:
            return
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        """Wake every waiter for good (shutdown)."""
        with self._cond:
            self._closed = True
            self._generation += 1
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def wait(self, since: int, timeout_s: float) -> bool:
        """Sleep until the generation differs from ``since`` or ``timeout_s``; True if it moved."""
        with self._cond:
            if self._generation == since and not self._closed:
                self._waiting += 1
                try:
                    self._cond.wait(timeout_s)
                finally:
                    self._waiting -= 1
            return self._generation != since
