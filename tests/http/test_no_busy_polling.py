"""A long poll waits without querying the database: the SQL a waiting poll runs, counted.

The server runs with ``trace_sql`` on, which logs every statement its connections execute on
the ``sqew.sql`` logger; the test counts them while a poll waits on an empty queue.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import httpx

from sqew.core.clock import system_clock


class Statements(logging.Handler):
    """Collects the statements logged on ``sqew.sql``."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:  # called holding the handler's lock
        self.seen.append(record.getMessage())

    def take(self) -> list[str]:
        self.acquire()
        try:
            out, self.seen = self.seen, []
        finally:
            self.release()
        return out


def test_a_waiting_poll_runs_no_queries_only_a_cheap_change_check(
    start_server: Callable[..., object],
) -> None:
    # The reaper (a timer, once a second by default) is set aside: only the poll is counted.
    server = start_server(clock=system_clock, trace_sql=True, reap_interval_ms=600_000)
    url = server.url  # type: ignore[attr-defined]
    logger = logging.getLogger("sqew.sql")
    handler = Statements()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            assert http.post("/queues", json={"name": "q"}).status_code == 201
            handler.take()
            response = http.post("/queues/q/poll", params={"wait_ms": 2000})
            assert response.json() == {"messages": []}
            during = handler.take()
            # The same wait with a message arriving: it is woken and leases it.
            sender = threading.Timer(
                0.3, lambda: httpx.post(f"{url}/queues/q/messages", json={"payload": 1})
            )
            sender.start()
            woken = http.post("/queues/q/poll", params={"wait_ms": 10000}).json()
            assert [m["payload"] for m in woken["messages"]] == [1]
            sender.join(10)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    checks = [s for s in during if s.strip().upper() == "PRAGMA DATA_VERSION"]
    queries = [s for s in during if s not in checks]
    # A poll reaps once (its first call), tries to claim at the start (BEGIN, find queue, claim,
    # when-next-due x2, COMMIT, in a group-commit savepoint) and once at the end of the wait;
    # in between only the 50 ms change check: 2 s / 50 ms = 40 of them.
    claims = [q for q in queries if q.startswith("UPDATE messages SET lease_expires_at")]
    assert len(claims) <= 2, "\n".join(q[:70] for q in queries)
    assert len(queries) <= 24, "\n".join(q[:70] for q in queries)
    assert 10 <= len(checks) <= 60, len(checks)
