"""Long polls over real HTTP: what ends a wait, what does not, and what a wait costs.

Already covered elsewhere: woken by an enqueue through the same server (the contract suite, on
both targets), woken by another process writing the file, a departed client leasing nothing,
shutdown ending waits, and the SQL of one idle wait (``tests/http``). This module adds waits
ended by time passing (a delayed message coming due, a nack's delay, a lease expiring), a
queue deleted under a waiting poll, a departed client's thread being freed, many waiters
sharing one batch, and the work idle waiters do when *other* queues are busy.

Waits here are long (``WAIT_S``) and every test asserts on what a poll returned; where the
point is that a poll returned early, the bound is a fraction of its wait, never a tight time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

import sqew
from sqew.server.app import begin_shutdown

WAIT_MS = 15_000
WAIT_S = WAIT_MS / 1000
EARLY_S = WAIT_S / 2  # "returned early": well before its wait would have ended


def poll(url: str, queue: str, **params: Any) -> tuple[list[dict[str, Any]], float]:
    """One poll over its own connection: (messages, seconds it took)."""
    started = time.monotonic()
    response = httpx.post(f"{url}/queues/{queue}/poll", params=params, timeout=WAIT_S + 15)
    assert response.status_code == 200, response.text
    return response.json()["messages"], time.monotonic() - started


@pytest.fixture
def server(start_server: Callable[..., Any]) -> Any:
    return start_server()


@pytest.fixture
def client(server: Any) -> Iterator[sqew.Client]:
    with sqew.Client(server.url) as c:
        c.create_queue("q", visibility_ms=500, backoff_base_ms=0)
        yield c


# --- time passing ends a wait ---------------------------------------------------------------------
def test_a_delayed_message_wakes_a_waiting_poll_when_it_comes_due(
    server: Any, client: sqew.Client
) -> None:
    sent = client.enqueue("q", "later", delay_ms=700).message_id
    got, took = poll(server.url, "q", wait_ms=WAIT_MS)
    assert [m["id"] for m in got] == [sent]
    assert took < EARLY_S


def test_a_nack_delay_running_out_wakes_a_waiting_poll(server: Any, client: sqew.Client) -> None:
    client.enqueue("q", "again")
    (first,) = client.poll("q")
    assert client.nack("q", first.id, first.token, delay_ms=700).status == "requeued"
    got, took = poll(server.url, "q", wait_ms=WAIT_MS)
    assert [(m["id"], m["attempts"]) for m in got] == [(first.id, 2)]
    assert took < EARLY_S


def test_an_expiring_lease_wakes_a_waiting_poll(server: Any, client: sqew.Client) -> None:
    client.enqueue("q", "abandoned")
    (first,) = client.poll("q")  # leased for 500 ms and never acked
    got, took = poll(server.url, "q", wait_ms=WAIT_MS)
    assert [(m["id"], m["attempts"]) for m in got] == [(first.id, 2)]
    assert got[0]["token"] != first.token
    assert took < EARLY_S


def test_deleting_the_queue_ends_a_waiting_poll_with_queue_not_found(
    server: Any, client: sqew.Client
) -> None:
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(httpx.post, f"{server.url}/queues/q/poll",
                              params={"wait_ms": WAIT_MS}, timeout=WAIT_S + 15)
        time.sleep(0.3)
        started = time.monotonic()
        client.delete_queue("q")
        answer = waiting.result(timeout=WAIT_S + 15)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "QueueNotFound"
    assert time.monotonic() - started < EARLY_S


# --- departed clients ----------------------------------------------------------------------------
def test_a_departed_client_frees_its_poll_thread(start_server: Callable[..., Any]) -> None:
    # One poll thread: had the departed poll kept waiting, the next poll (on another queue)
    # would queue behind it for the whole 15 s wait and only then see its message.
    server = start_server(poll_threads=1)
    with sqew.Client(server.url) as c:
        c.create_queue("a")
        c.create_queue("b")
        left = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{server.url}/queues/a/poll", params={"wait_ms": WAIT_MS}, timeout=0.5)
        timer = threading.Timer(0.5, lambda: c.enqueue("b", "for the next poll"))
        timer.start()
        try:
            got, _ = poll(server.url, "b", wait_ms=WAIT_MS)
        finally:
            timer.join(WAIT_S)
        assert [m["payload"] for m in got] == ["for the next poll"]
        assert time.monotonic() - left < EARLY_S
        assert c.stats("a").leased == 0


# --- many waiters ------------------------------------------------------------------------------
def test_many_waiters_share_one_batch_each_message_once(
    server: Any, client: sqew.Client
) -> None:
    waiters = 30
    client.update_queue("q", visibility_ms=120_000)
    with ThreadPoolExecutor(waiters) as pool:
        futures = [pool.submit(poll, server.url, "q", wait_ms=WAIT_MS) for _ in range(waiters)]
        time.sleep(0.5)
        sent = [r.message_id for r in
                client.enqueue_batch("q", [{"payload": i} for i in range(waiters)])]
        results = [f.result(timeout=WAIT_S + 15) for f in futures]
    # Each waiter leases at most one (batch=1) and there is one message per waiter: every
    # waiter gets exactly one, and no message goes to two of them.
    got = [m["id"] for messages, _ in results for m in messages]
    assert sorted(got) == sorted(sent)
    assert all(len(messages) == 1 and took < EARLY_S for messages, took in results)


class Claims(logging.Handler):
    """Counts the claim statements logged on ``sqew.sql`` (``trace_sql`` on)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("UPDATE messages SET lease_expires_at"):
            self.count += 1


def test_idle_waiters_do_not_claim_when_another_queue_is_busy(
    start_server: Callable[..., Any],
) -> None:
    server = start_server(trace_sql=True, reap_interval_ms=600_000)
    waiters, sends = 20, 100
    logger = logging.getLogger("sqew.sql")
    claims = Claims()
    level = logger.level
    with sqew.Client(server.url) as c, ThreadPoolExecutor(waiters) as pool:
        c.create_queue("busy")
        for i in range(waiters):
            c.create_queue(f"idle{i}")
        futures = [pool.submit(poll, server.url, f"idle{i}", wait_ms=WAIT_MS)
                   for i in range(waiters)]
        time.sleep(0.5)  # all waiting (their first claims are behind them)
        logger.addHandler(claims)
        logger.setLevel(logging.DEBUG)
        try:
            for i in range(sends):
                c.enqueue("busy", i)
        finally:
            logger.removeHandler(claims)
            logger.setLevel(level)
            begin_shutdown(server.app)  # end the waits now
        assert all(f.result(timeout=WAIT_S + 15)[0] == [] for f in futures)
    # Nobody polls "busy": every claim counted is an idle waiter's. A waiter may look once
    # or twice; one claim per waiter per unrelated enqueue is the herd this test is about.
    assert claims.count <= 2 * waiters, claims.count
