"""Failed API key attempts per client address (``FailureLimit``): beyond the allowance, an
address is answered 429 ``RateLimited`` before any key work."""

from __future__ import annotations

from collections import OrderedDict

ADDRESSES = 10_000
"""Client addresses whose failed attempts are remembered (least recently failed go first)."""


class FailureLimit:
    """Failed attempts per client address: a leaky bucket of ``per_minute`` each.

    An address may fail ``per_minute`` times at once, then once more for every ``60 /
    per_minute`` seconds that pass. The ``ADDRESSES`` addresses that failed last are
    remembered. 0: no limit.
    """

    def __init__(self, per_minute: int, size: int = ADDRESSES) -> None:
        self._capacity = float(per_minute)
        self._rate = per_minute / 60.0  # leaks, per second
        self._size = size
        self._levels: OrderedDict[str, tuple[float, float]] = OrderedDict()  # -> (level, at)

    def _level(self, address: str, now: float) -> float:
        level, at = self._levels.get(address, (0.0, now))
        return max(0.0, level - (now - at) * self._rate)

    def wait(self, address: str, now: float) -> float | None:
        """Seconds ``address`` must wait before its next attempt; None: it may try now."""
        if not self._capacity or address not in self._levels:
            return None
        over = self._level(address, now) + 1.0 - self._capacity  # what one more would spill
        return None if over <= 0 else max(1.0, over / self._rate)

    def forgive(self, address: str, now: float) -> None:
        """Take back one attempt of ``address`` counted as failed (it succeeded after all)."""
        if self._capacity and address in self._levels:
            self._levels[address] = (max(0.0, self._level(address, now) - 1.0), now)

    def fail(self, address: str, now: float) -> bool:
        """Count a failed attempt of ``address``; True if that used up what it may fail."""
        if not self._capacity:
            return False
        level = self._level(address, now) + 1.0
        self._levels[address] = (level, now)
        self._levels.move_to_end(address)
        while len(self._levels) > self._size:
            self._levels.popitem(last=False)
        return level + 1.0 > self._capacity

