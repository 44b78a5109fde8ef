"""Long polls over real HTTP: what ends a wait, what does not, and what a wait costs.

- woken by a write: an enqueue through the same server (the contract suite also covers it, on
  both targets), another process writing the same file;
- woken by time passing: a delayed message coming due, a nack's delay, a lease expiring;
- ended otherwise: the queue deleted, the server shutting down; a departed client stops
  waiting and leases nothing;
- many waiters share one batch, each message once;
- cost: the SQL one idle wait runs, and the claims idle waiters make while *other* queues
  are busy. (A thousand waits cost no thread: ``test_many_waits.py``.)

A test that wakes a wait first sees the poll parked in the server (``park``: the service's
waiter counts it), so the poll cannot have found the message on its first claim instead.
Waits here are long (``WAIT_S``) and every test asserts on what a poll returned; where the
point is that a poll was woken, it must answer within half its wait (``WOKEN_S``): a deadline
that only a poll left waiting misses, never a measure of speed.
"""

from __future__ import annotations

import concurrent.futures
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

import sqew
from sqew.backends.wakeups import InProcessWaiter
from sqew.core.clock import system_clock
from sqew.server.app import begin_shutdown

from .support import START_S, request_head

T = TypeVar("T")
CHECKPOINTER = "sqew-checkpoint"  # the WAL checkpointer's thread (sqew.backends.sqlite.checkpoint)
WAIT_MS = 15_000


WAIT_S = WAIT_MS / 1000


EARLY_S = WAIT_S / 2  # "returned early": well before its wait would have ended
WOKEN_S = WAIT_S / 2  # a woken poll answers by then; one left waiting does not


def waiter_of(server: Any) -> InProcessWaiter:
    """The waiter of an in-process server's service (it counts the polls parked on it)."""
    waiter = server.app.state.runtime.service.waiter
    assert isinstance(waiter, InProcessWaiter)
    return waiter


def park(server: Any, queue: str, count: int = 1) -> None:
    """Return once ``count`` long polls of ``queue`` wait in ``server``."""
    waiter = waiter_of(server)
    assert waiter.until_waiting(queue, count, START_S), (
        f"{waiter.waiting(queue)} of {count} polls of {queue!r} waiting after {START_S} s")


def answers(futures: list[Future[T]], within: float = WOKEN_S) -> list[T]:
    """The results of ``futures``, which must all be done within ``within`` seconds."""
    _, late = concurrent.futures.wait(futures, timeout=within)
    assert not late, f"{len(late)} of {len(futures)} still waiting after {within} s"
    return [f.result() for f in futures]


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


# --- a write wakes a wait ---------------------------------------------------------------------
def test_woken_by_an_enqueue_through_the_server(start_server: Callable[..., Any]) -> None:
    server = start_server()
    with sqew.Client(server.url) as consumer, sqew.Client(server.url) as producer:
        consumer.create_queue("q")
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(consumer.poll, "q", wait_ms=WAIT_MS)
            park(server, "q")
            producer.enqueue("q", {"n": 1})
            (got,) = answers([waiting])  # woken by the enqueue, not by the end of the wait
    assert [(m.payload, m.attempts) for m in got] == [({"n": 1}, 1)]


def test_woken_by_another_process_writing_the_same_file(
    start_server: Callable[..., Any], tmp_path: Path
) -> None:
    db = tmp_path / "shared.db"
    server = start_server(db=str(db))
    with sqew.Client(server.url) as client:
        client.create_queue("q")
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(client.poll, "q", wait_ms=WAIT_MS)
            park(server, "q")
            script = ("import sqew, sys; c = sqew.Client(sys.argv[1]); "
                      "c.enqueue('q', {'from': 'elsewhere'}); c.close()")
            subprocess.run([sys.executable, "-c", script, str(db)], check=True, timeout=60)
            (got,) = answers([waiting])  # woken by the write, not by the end of the wait
    assert [m.payload for m in got] == [{"from": "elsewhere"}]


# --- time passing wakes a wait ---------------------------------------------------------------
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


# --- other ends of a wait ---------------------------------------------------------------------
def test_deleting_the_queue_ends_a_waiting_poll_with_queue_not_found(
    server: Any, client: sqew.Client
) -> None:
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(httpx.post, f"{server.url}/queues/q/poll",
                              params={"wait_ms": WAIT_MS}, timeout=WAIT_S + 15)
        park(server, "q")
        client.delete_queue("q")
        (answer,) = answers([waiting])
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "QueueNotFound"


def test_shutdown_ends_waiting_polls_at_once(start_server: Callable[..., Any]) -> None:
    server = start_server()
    with sqew.Client(server.url) as client:
        client.create_queue("q")
        results: list[Any] = []
        waiter = threading.Thread(
            target=lambda: results.append(client.poll("q", wait_ms=WAIT_MS)), daemon=True
        )
        waiter.start()
        park(server, "q")
        begin_shutdown(server.app)
        waiter.join(WOKEN_S)  # ended by the shutdown, not by the end of its wait
        assert not waiter.is_alive()
        assert results == [[]]


def test_a_departed_client_stops_waiting_and_leases_nothing(
    start_server: Callable[..., Any],
) -> None:
    server = start_server()
    with sqew.Client(server.url) as c:
        c.create_queue("a")
        with socket.create_connection(("127.0.0.1", server.sock.getsockname()[1]), 10) as sock:
            sock.sendall(request_head("POST", f"/queues/a/poll?wait_ms={WAIT_MS}", length=0))
            park(server, "a")
        # The consumer has gone (its connection closed): the server ends its wait at once;
        # one left waiting would hold on for the whole 15 s.
        assert waiter_of(server).until_idle("a", WOKEN_S)
        # Nor does the departed poll lease what comes next: the next consumer gets it, as its
        # first delivery.
        c.enqueue("a", "for the next consumer")
        got_a = c.poll("a", wait_ms=5000)
        assert [(m.payload, m.attempts) for m in got_a] == [("for the next consumer", 1)]
        assert c.stats("a").leased == 1


# --- many waiters -----------------------------------------------------------------------------
def test_many_waiters_share_one_batch_each_message_once(
    server: Any, client: sqew.Client
) -> None:
    waiters = 30
    client.update_queue("q", visibility_ms=120_000)
    with ThreadPoolExecutor(waiters) as pool:
        futures = [pool.submit(poll, server.url, "q", wait_ms=WAIT_MS) for _ in range(waiters)]
        park(server, "q", waiters)
        sent = [r.message_id for r in
                client.enqueue_batch("q", [{"payload": i} for i in range(waiters)])]
        results = answers(futures)  # every one woken by the enqueue
    # Each waiter leases at most one (batch=1) and there is one message per waiter: every
    # waiter gets exactly one, and no message goes to two of them.
    got = [m["id"] for messages, _ in results for m in messages]
    assert sorted(got) == sorted(sent)
    assert all(len(messages) == 1 for messages, _ in results)


# --- what a wait costs ------------------------------------------------------------------------
class Statements(logging.Handler):
    """Collects the statements logged on ``sqew.sql``, but the WAL checkpointer's: its thread
    checkpoints on its own timer after commits, whatever a poll does."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:  # called holding the handler's lock
        if record.threadName != CHECKPOINTER:
            self.seen.append(record.getMessage())

    def take(self) -> list[str]:
        self.acquire()
        try:
            out, self.seen = self.seen, []
        finally:
            self.release()
        return out


def test_a_waiting_poll_runs_no_queries_only_a_cheap_change_check(
    start_server: Callable[..., Any],
) -> None:
    # The reaper (a timer, once a second by default) is set aside: only the poll is counted.
    server = start_server(clock=system_clock, trace_sql=True, reap_interval_ms=600_000)
    url = server.url
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
            with ThreadPoolExecutor(1) as pool:
                waiting = pool.submit(poll, url, "q", wait_ms=WAIT_MS)
                park(server, "q")
                assert http.post("/queues/q/messages", json={"payload": 1}).status_code == 201
                ((woken, _),) = answers([waiting])
            assert [m["payload"] for m in woken] == [1]
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
        for i in range(waiters):  # all waiting: their first claims are behind them
            park(server, f"idle{i}")
        logger.addHandler(claims)
        logger.setLevel(logging.DEBUG)
        try:
            for i in range(sends):
                c.enqueue("busy", i)
        finally:
            logger.removeHandler(claims)
            logger.setLevel(level)
            begin_shutdown(server.app)  # end the waits now
        assert all(messages == [] for messages, _ in answers(futures))
    # Nobody polls "busy": every claim counted is an idle waiter's. A waiter may look once
    # or twice; one claim per waiter per unrelated enqueue is the herd this test is about.
    assert claims.count <= 2 * waiters, claims.count
