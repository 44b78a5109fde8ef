"""Plain enqueues to one queue that wait for the same group commit, merged into one write.

Concurrent single-message enqueues are the server's most common request. Each would cost a
statement that finds and counts its queue and one ``INSERT``; merged, a group pays one counting
statement and one multi-row ``INSERT`` for all of them. Each request stays its own unit: its
messages are validated alone, and it fails alone (a payload too large, a quota) while the
others go in; every caller gets its own future, resolved after the commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from sqew import models

Part = tuple[Sequence[models.MessageIn], int, "asyncio.Future[list[models.EnqueueResult]]"]
"""One request: its messages, its ``now`` (epoch ms), and its caller's future."""

Outcome = tuple[bool, Any]
"""Per part: ``(True, [EnqueueResult, …])`` or ``(False, SqewError)``."""


class MergedEnqueue:
    """The parts gathered for one queue until the group that writes them starts.

    Args:
        queue: the queue they go to.
        loop: the commit loop (the parts' futures belong to it).
    """

    def __init__(self, queue: str, loop: asyncio.AbstractEventLoop) -> None:
        self.queue = queue
        self.parts: list[Part] = []
        self.sealed = False
        self._loop = loop

    def add(
        self, messages: Sequence[models.MessageIn], now: int
    ) -> asyncio.Future[list[models.EnqueueResult]]:
        """Add a request (only before ``sealed``); its future resolves after the commit."""
        future: asyncio.Future[list[models.EnqueueResult]] = self._loop.create_future()
        self.parts.append((messages, now, future))
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
