"""A long poll waits for the next message that can become ready, not for one that expires first.

``next_due`` once counted a message whose delay (or nack backoff) ends when its TTL does: at
that moment the poll tried to claim it, found it expired, asked again when the next message
was due, was told "now", and claimed again, in a loop, for the rest of its wait (105,298
write transactions for one ``wait_ms=4000`` poll). The claims a poll runs are counted here
through the backend's ``trace`` hook (every statement a connection runs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
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


def delayed_until_it_expires(service: QueueService) -> None:
    service.enqueue("q", [msg(delay_ms=1000, ttl_ms=1000)])


def nacked_past_its_expiry(service: QueueService) -> None:
    service.enqueue("q", [msg(ttl_ms=1000)])
    (m,) = service.poll("q")
    nack = msgspec.convert({"id": m.id, "token": m.token, "delay_ms": 1000}, models.NackIn)
    assert [r.status for r in service.nack("q", [nack])] == ["requeued"]


@pytest.mark.parametrize("setup", [delayed_until_it_expires, nacked_past_its_expiry])
def test_a_long_poll_does_not_spin_on_a_message_that_expires_when_due(
    tmp_path: Path, setup: Callable[[QueueService], None]
) -> None:
    statements = Statements()
    # The reaper is set aside: it would delete the expired message during the wait, and the
    # poll must not depend on that.
    service = QueueService(open_backend(tmp_path / "q.db", trace=statements),
                           reap_interval_ms=600_000)
    try:
        service.create_queue(models.QueueCreate(name="q"))
        setup(service)
        statements.take()
        assert service.poll("q", wait_ms=WAIT_MS) == []
        claims = [s for s in statements.take() if s.startswith(CLAIM)]
    finally:
        service.close()
    # One claim when the poll starts and one when its wait ends; before, thousands.
    assert len(claims) <= 3, len(claims)
