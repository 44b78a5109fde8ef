"""Time as an injected dependency, so tests move time instead of sleeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Clock = Callable[[], int]
"""A clock returns the current time in epoch milliseconds."""


def system_clock() -> int:
    """Wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to (tests)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def __call__(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms`` milliseconds."""
        with self._lock:
            self._now += ms
