"""The argon2 verifications of one process (``Verifications``): few at once, the clean first.

A verification holds a database thread and 19 MiB for tens of ms; beyond a few at once they
only wait for each other. Under a guessing attack many are asked for at once (wrong secrets
for real key ids, from many addresses), and served in arrival order they would keep a valid
key asked for behind them waiting for all of them. So:

- at most ``SLOTS`` run at once;
- a *clean* verification (its client and its key id have no failed attempt still counted)
  goes before every *suspect* one: a valid key from a client in good standing waits for the
  verifications already running, not for the attack's queue;
- at most ``SUSPECTS_WAITING`` suspect ones wait; one more is refused at once (429
  ``RateLimited``, its attempt counted as failed), so the argon2 work an attack gets is
  bounded however many addresses it comes from, and so are the waits.

``sqew_auth_verifications_total{result="valid"|"invalid"}`` counts the verifications run.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from sqew import errors

if TYPE_CHECKING:
    from sqew.server.metrics import Metrics

SLOTS = 2
"""argon2 verifications running at once per process."""
SUSPECTS_WAITING = 16
"""Suspect verifications that may wait for a slot (a few hundred ms of work) per process."""
RETRY_AFTER_S = 1.0
"""``Retry-After`` of a verification refused because too many suspect ones wait."""


class Verifications:
    """Runs argon2 verifications (see the module docstring).

    Args:
        metrics: the app's metrics (``sqew_auth_verifications_total``, when counting).
        slots: verifications at once.
        suspects_waiting: suspect verifications that may wait.
    """

    def __init__(self, metrics: Metrics, slots: int = SLOTS,
                 suspects_waiting: int = SUSPECTS_WAITING) -> None:
        self._free = slots
        self._most_suspects = suspects_waiting
        self._suspects = 0  # suspect entries in _waiting
        self._waiting: list[tuple[bool, int, asyncio.Future[None]]] = []  # a heap: clean first
        self._order = itertools.count()
        self._counted = metrics.counter(
            "sqew_auth_verifications", "argon2 verifications of API keys run, by result: "
            "valid, invalid.", ("result",)) if metrics.enabled else None

    async def verify(self, check: Callable[[], Awaitable[bool]], *, suspect: bool) -> bool:
        """Run ``check`` (an argon2 verification) once a slot is free.

        Args:
            check: the verification.
            suspect: its client or key id failed lately: it waits behind the clean ones.

        Raises:
            sqew.errors.RateLimited: suspect, while ``suspects_waiting`` suspect ones wait.
        """
        await self._enter(suspect)
        try:
            ok = await check()
        finally:
            self._leave()
        if self._counted is not None:
            self._counted.labels("valid" if ok else "invalid").inc()
        return ok

    async def _enter(self, suspect: bool) -> None:
        if self._free and not self._waiting:
            self._free -= 1
            return
        if suspect and self._suspects >= self._most_suspects:
            raise errors.RateLimited(
                "too many API key verifications are waiting after failed attempts; retry "
                f"after {RETRY_AFTER_S:.0f} s", retry_after=RETRY_AFTER_S)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (suspect, next(self._order), turn))
        self._suspects += suspect
        try:
            await turn  # resolved by _leave, which hands over its slot
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # handed a slot already: pass it on
                self._leave()
            raise

    def _leave(self) -> None:
        """Hand the slot to the next waiting verification (the clean first), or free it."""
        while self._waiting:
            suspect, _, turn = heapq.heappop(self._waiting)
            self._suspects -= suspect
            if not turn.done():  # (a cancelled one is skipped)
                turn.set_result(None)
                return
        self._free += 1
