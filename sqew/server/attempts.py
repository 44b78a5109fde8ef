"""Failed API key attempts (``FailureLimit``): beyond the allowance, a client (``client_of``:
its address, an IPv6 one by /64) or a key id is answered 429 ``RateLimited`` before any key
work."""

from __future__ import annotations

import functools
import ipaddress
from collections import OrderedDict

ADDRESSES = 10_000
"""Clients (or key ids) whose failed attempts are remembered (least recently failed go
first)."""


@functools.lru_cache(maxsize=4096)
def client_of(address: str) -> str:
    """Whom a client address's failed attempts count against: the address itself; an IPv6
    address's /64 (``2001:db8:0:1::/64``: a host is given a whole /64 and may pick any address
    in it, so counting each alone would give it billions of allowances); an IPv4-mapped IPv6
    address as the IPv4 address it maps."""
    if ":" not in address:
        return address
    try:
        ip = ipaddress.IPv6Address(address.split("%", 1)[0])  # without a zone index
    except ValueError:
        return address
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))


class FailureLimit:
    """Failed attempts per client (or per key id): a leaky bucket of ``per_minute`` each.

    A client may fail ``per_minute`` times at once, then once more for every ``60 /
    per_minute`` seconds that pass. The ``ADDRESSES`` clients that failed last are
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

    def level(self, address: str, now: float) -> float:
        """How many failed attempts of ``address`` are still counted (0: none lately)."""
        return self._level(address, now)

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

