"""A long poll waits for the next message that can become ready, not for one that expires first.

``next_due`` once counted a message whose delay (or nack backoff) ends when its TTL does: at
that moment the poll tried to claim it, found it expired, asked again when the next message
was due, was told "now", and claimed again, in a loop, for the rest of its wait (105,298
write transactions for one ``wait_ms=4000`` poll). The claims a poll runs are counted here
through the backend's ``trace`` hook (every statement a connection runs).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
import pytest

from sqew import models
from sqew.backends import open_backend
from sqew.core.service import QueueService

CLAIM = "UPDATE messages SET lease_expires_at"
WAIT_MS = 1500


class Statements:
    """Collects the statements the backend's connections run (from any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[str] = []

    def __call__(self, sql: str) -> None:
        with self._lock:
            self._seen.append(sql)

    def take(self) -> list[str]:
        with self._lock:
            out, self._seen = self._seen, []
        return out


def msg(**fields: int) -> models.MessageIn:
    return models.MessageIn(payload=msgspec.Raw(b"1"), **fields)


async def nacked_past_its_expiry(service: QueueService) -> None:
    """A message whose nack delay ends after its TTL (an enqueue with ``delay_ms >= ttl_ms``
    is refused, but a nack's delay or backoff may pass the expiry)."""
    await service.enqueue("q", [msg(ttl_ms=1000)])
    (m,) = await service.poll("q")
    nack = msgspec.convert({"id": m.id, "token": m.token, "delay_ms": 1000}, models.NackIn)
    assert [r.status for r in await service.nack("q", [nack])] == ["requeued"]


async def leased_past_its_expiry(service: QueueService) -> None:
    """A message leased for longer than it lives, the lease not yet swept when the poll
    starts (it ends a moment after the message expires)."""
    await service.enqueue("q", [msg(ttl_ms=1000)])
    assert len(await service.poll("q", visibility_ms=1050)) == 1


@pytest.mark.parametrize("setup", [nacked_past_its_expiry, leased_past_its_expiry])
def test_a_long_poll_does_not_spin_on_a_message_that_expires_when_due(
    tmp_path: Path, setup: Callable[[QueueService], Awaitable[None]]
) -> None:
    statements = Statements()
    # The reaper is set aside: it would delete the expired message during the wait, and the
    # poll must not depend on that.
    service = QueueService(open_backend(tmp_path / "q.db", trace=statements),
                           reap_interval_ms=600_000)

    async def run() -> list[models.LeasedMessage]:
        await service.create_queue(models.QueueCreate(name="q"))
        await setup(service)
        statements.take()
        return await service.poll("q", wait_ms=WAIT_MS)

    try:
        assert asyncio.run(run()) == []
        claims = [s for s in statements.take() if s.startswith(CLAIM)]
    finally:
        service.close()
    # One claim when the poll starts and one when its wait ends; before, thousands.
    assert len(claims) <= 3, len(claims)
