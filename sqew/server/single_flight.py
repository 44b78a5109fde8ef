"""``SingleFlight``: one run of a piece of async work at a time per token; callers that come
while it runs share its result (the authenticator verifies or confirms a key once however many
requests bring it at the same moment)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """One run at a time per token: callers that come while it runs share its result.

    The run is shielded: a caller that goes away (a client that disconnects) does not cancel
    it for the others.
    """

    def __init__(self) -> None:
        self._running: dict[Hashable, asyncio.Future[T]] = {}

    async def __call__(self, token: Hashable, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        return await asyncio.shield(self.start(token, work))

    def start(self, token: Hashable, work: Callable[[], Coroutine[Any, Any, T]]
              ) -> asyncio.Future[T]:
        """The run for ``token``: the one running, or ``work()`` started now."""
        running = self._running.get(token)
        if running is None:
            running = asyncio.ensure_future(work())
            self._running[token] = running
            running.add_done_callback(functools.partial(self._landed, token))
        return running

    def _landed(self, token: Hashable, done: asyncio.Future[T]) -> None:
        if self._running.get(token) is done:
            del self._running[token]
        if not done.cancelled():
            done.exception()  # retrieved: no "exception never retrieved" if every caller left
