"""Waiting: a long poll claims, and while nothing is ready, awaits the backend's waiter.

A waiting poll holds no thread and runs no statement: it sleeps until a commit may have made a
message of its queue ready (the waiter), until the next delayed message or ended lease is due,
or until its ``wait_ms`` runs out.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqew.backends.base import Waiter
from sqew.core.clock import Clock
from sqew.core.delivering import Claim, Leased
from sqew.core.writer import Writer

NOT_CLAIMABLE_WAIT_S = 0.05
"""The least a poll sleeps when the claim found nothing yet said a message is due already
(never spin on the database)."""
END_SLACK_S = 0.005
"""A poll whose claim found nothing with less than this left of its wait returns (empty)
rather than wait for the sliver and claim again: a wait can end a hair before its deadline,
and a loaded server then claimed two or three times in a row at the end of every wait."""


async def long_poll(
    writer: Writer, waiter: Waiter, clock: Clock, queue: str, batch: int, wait_ms: int,
    visibility_ms: int | None, gone: Callable[[], bool] | None = None, *, shuffle: bool = False,
) -> Leased:
    """Lease up to ``batch`` messages, waiting up to ``wait_ms`` for some to be ready.

    ``gone`` (optional) says whether the caller has left: then the poll ends, leasing nothing,
    before each claim and whenever its claim runs (``Claim``).
    """
    left = gone or _never
    if wait_ms == 0:
        if left():
            return []
        leased, _ = await writer.write(
            Claim(queue, batch, visibility_ms, gone=gone, shuffle=shuffle))
        return leased
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        if left():
            return []
        mark = waiter.mark(queue)  # before the claim: a commit after it is never missed
        leased, due = await writer.write(
            Claim(queue, batch, visibility_ms, want_due=True, gone=gone, shuffle=shuffle))
        remaining = deadline - time.monotonic()
        if leased or remaining < END_SLACK_S or waiter.closed:
            return leased
        timeout = remaining
        if due is not None:
            timeout = min(timeout, max((due - clock()) / 1000, NOT_CLAIMABLE_WAIT_S))
        await waiter.wait(queue, mark, timeout)


def _never() -> bool:
    return False
