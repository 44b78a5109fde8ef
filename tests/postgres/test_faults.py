"""The database going away under load: one ``sqew serve`` on a PostgreSQL
server of the test's own, which is stopped (``pg_ctl stop -m fast``, or ``-m immediate``: a
crash) and started again while producers, a consumer and a readiness probe keep calling.

While it is down every call is answered ``503 Unavailable`` in the error envelope, or succeeds:
never another answer, never a hang (every request has a client timeout). Afterwards the server
recovers by itself: ``/readyz`` goes 503 → 200, enqueues succeed again, its ``LISTEN``
connection is back (a long poll wakes on another process's enqueue), and every message whose
enqueue was answered 201 is delivered and acked (or its ack was answered 503 or not at all:
such an ack may have committed).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pg_support
import pgserver
import pytest
from cli_support import Server
from prometheus_client.parser import text_string_to_metric_families

import sqew
from sqew.errors import SqewError

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]

REQUEST_TIMEOUT_S = 30  # a call that takes longer is a hang
PHASE_S = 60  # the most any phase (load before, outage seen, recovery, drain) may take
BEFORE = 100  # enqueues answered 201 before the database goes away
AFTER = 100  # … and after it is back


@pytest.fixture
def own_pg() -> Iterator[pgserver.PgServer]:
    """A PostgreSQL server of this test's own (durable settings), with a migrated ``sqew``
    database: the test stops and starts it."""
    reason = pg_support.backend_missing()
    if reason:
        pytest.skip(reason)
    pg_support.server_or_skip()
    server = pgserver.PgServer().start()
    try:
        server.create_database("sqew")
        pg_support.upgrade(server.url("sqew"))
        yield server
    finally:
        server.destroy()


@dataclass
class Load:
    """What the callers saw."""

    confirmed: set[int] = field(default_factory=set)  # payload numbers answered 201
    enqueue_503: int = 0
    poll_503: int = 0
    acked: Counter[int] = field(default_factory=Counter)  # payload number -> acks that took
    # Payload numbers of acks answered 503 or not at all: each may have committed (its
    # COMMIT reached the database, the answer did not) or not (the message comes back).
    ack_unknown: set[int] = field(default_factory=set)
    ack_statuses: Counter[str] = field(default_factory=Counter)
    ready: list[int] = field(default_factory=list)  # /readyz statuses in order
    metrics_up: list[float] = field(default_factory=list)  # sqew_queue_metrics_up in order
    wrong: list[str] = field(default_factory=list)  # any other answer, hang or error
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check_unavailable(self, what: str, response: httpx.Response) -> None:
        """A 503 must be the error envelope with code Unavailable."""
        try:
            body = response.json()
            ok = (response.status_code == 503 and set(body) == {"error"}
                  and body["error"]["code"] == "Unavailable" and body["error"]["message"])
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            self.fail(f"{what}: {response.status_code} {response.text[:300]}")

    def fail(self, text: str) -> None:
        with self.lock:
            self.wrong.append(text)


def _call(load: Load, what: str, fn: Callable[[], httpx.Response]) -> httpx.Response | None:
    try:
        return fn()
    except httpx.TimeoutException:
        load.fail(f"{what}: no answer within {REQUEST_TIMEOUT_S} s")
    except httpx.HTTPError as exc:
        load.fail(f"{what}: {exc!r}")
    return None


def _producer(url: str, load: Load, numbers: Iterator[int], stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        while not stop.is_set():
            n = next(numbers)
            r = _call(load, "enqueue", lambda n=n: http.post(
                "/queues/jobs/messages", json={"payload": {"n": n}}))
            if r is None:
                continue
            if r.status_code == 201 and isinstance(r.json().get("message_id"), int):
                with load.lock:
                    load.confirmed.add(n)
            elif r.status_code == 503:
                load.check_unavailable("enqueue", r)
                with load.lock:
                    load.enqueue_503 += 1
            else:
                load.fail(f"enqueue: {r.status_code} {r.text[:300]}")


def _consume_once(http: httpx.Client, load: Load) -> int:
    """One poll(10) and the ack of what it leased; returns how many it leased."""
    r = _call(load, "poll", lambda: http.post("/queues/jobs/poll", params={"batch": 10}))
    if r is None:
        return 0
    if r.status_code == 503:
        load.check_unavailable("poll", r)
        with load.lock:
            load.poll_503 += 1
        return 0
    if r.status_code != 200:
        load.fail(f"poll: {r.status_code} {r.text[:300]}")
        return 0
    leased = r.json()["messages"]
    if not leased:
        return 0
    numbers = {m["id"]: m["payload"]["n"] for m in leased}
    a = _call(load, "ack", lambda: http.post("/queues/jobs/ack", json={
        "acks": [{"id": m["id"], "token": m["token"]} for m in leased]}))
    if a is None or a.status_code == 503:
        with load.lock:
            load.ack_unknown.update(numbers.values())
    if a is None:
        return len(leased)
    if a.status_code == 503:
        load.check_unavailable("ack", a)  # the lease ends and the message comes back, or done
    elif a.status_code == 200:
        results = a.json()["results"]
        with load.lock:
            load.ack_statuses.update(x["status"] for x in results)
            load.acked.update(numbers[x["id"]] for x in results if x["status"] == "acked")
    else:
        load.fail(f"ack: {a.status_code} {a.text[:300]}")
    return len(leased)


def _consumer(url: str, load: Load, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        while not stop.is_set():
            if not _consume_once(http, load):
                stop.wait(0.02)  # nothing ready: the producers are the pace


def _prober(url: str, load: Load, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        while not stop.is_set():
            r = _call(load, "readyz", lambda: http.get("/readyz"))
            if r is not None:
                if r.status_code == 503:
                    load.check_unavailable("readyz", r)
                elif r.status_code != 200:
                    load.fail(f"readyz: {r.status_code} {r.text[:300]}")
                with load.lock:
                    load.ready.append(r.status_code)
            _scrape(http, load)
            stop.wait(0.05)  # a probe's pace, like a load balancer's


def _scrape(http: httpx.Client, load: Load) -> None:
    """/metrics answers during the outage too (the process's own metrics matter most then),
    with ``sqew_queue_metrics_up`` 0 while the queues' figures cannot be read."""
    r = _call(load, "metrics", lambda: http.get("/metrics"))
    if r is None:
        return
    if r.status_code != 200:
        load.fail(f"metrics: {r.status_code} {r.text[:300]}")
        return
    up = [s.value for f in text_string_to_metric_families(r.text)
          if f.name == "sqew_queue_metrics_up" for s in f.samples]
    with load.lock:
        load.metrics_up.extend(up[:1] or [-1.0])


def _until(what: str, condition: Callable[[], bool], load: Load) -> None:
    deadline = time.monotonic() + PHASE_S
    while not condition():
        assert not load.wrong, load.wrong[:5]
        assert time.monotonic() < deadline, f"timed out waiting for: {what}"
        time.sleep(0.02)


def _listening(pg: pgserver.PgServer) -> bool:
    """Whether a connection to the ``sqew`` database is in ``LISTEN`` (the server's waiter)."""
    with pg.connect() as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = 'sqew' "
                           "AND query LIKE 'LISTEN%%'").fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_the_database_restarting_under_load(
    own_pg: pgserver.PgServer, serve: Callable[..., Server], mode: str
) -> None:
    url = own_pg.url("sqew")
    # One long poll at a time: a second is refused while one waits (how the test sees it wait).
    server = serve(url, max_waiting_polls="1")
    with sqew.Client(server.url) as client:
        # A short lease: a message whose ack was lost to the outage comes back soon.
        client.create_queue("jobs", visibility_ms=3000)
        client.create_queue("wake")
        assert client.poll("wake", wait_ms=50) == []  # the server now LISTENs
    _until("the server's LISTEN connection", lambda: _listening(own_pg), Load())

    load, stop = Load(), threading.Event()
    numbers = itertools.count()
    threads = [threading.Thread(target=_producer, args=(server.url, load, numbers, stop)),
               threading.Thread(target=_producer, args=(server.url, load, numbers, stop)),
               threading.Thread(target=_consumer, args=(server.url, load, stop)),
               threading.Thread(target=_prober, args=(server.url, load, stop))]
    for t in threads:
        t.start()
    try:
        _until(f"{BEFORE} enqueues", lambda: len(load.confirmed) >= BEFORE, load)
        own_pg.stop(mode)
        _until("503 answers while the database is down",
               lambda: load.enqueue_503 > 0 and 503 in load.ready, load)
        own_pg.start()
        before = len(load.confirmed)
        _until("recovery: /readyz 200 and enqueues succeeding again",
               lambda: load.ready[-1] == 200 and len(load.confirmed) >= before + AFTER, load)
    finally:
        stop.set()
        for t in threads:
            t.join(REQUEST_TIMEOUT_S + 5)
    assert not load.wrong, load.wrong[:5]
    assert not any(t.is_alive() for t in threads)
    assert load.ready[0] == 200 and 503 in load.ready and load.ready[-1] == 200
    # /metrics answered 200 throughout (a scrape that waited for a connection may have got
    # one once the database was back, so a 0 is not always seen).
    assert load.metrics_up[0] == 1.0 and load.metrics_up[-1] == 1.0, load.metrics_up
    assert set(load.metrics_up) <= {0.0, 1.0}, load.metrics_up

    # Every message answered 201 is there: drain the queue (leases lost to the outage end
    # after visibility_ms and the messages come back) until a poll finds nothing and nothing
    # is leased or delayed. Each confirmed message was then acked, or its ack's answer was
    # lost (a 503 may have taken effect: a crash between the COMMIT and the answer).
    with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as http:

        def drained() -> bool:
            if _consume_once(http, load) > 0:
                return False
            stats = http.get("/queues/jobs/stats").json()
            return stats["ready"] + stats["leased"] + stats["delayed"] == 0

        _until("the queue drained", drained, load)
    assert not load.wrong, load.wrong[:5]
    assert set(load.ack_statuses) <= {"acked"}, load.ack_statuses
    missing = load.confirmed - set(load.acked)
    assert missing <= load.ack_unknown, sorted(missing - load.ack_unknown)[:20]

    # The listener is back: a long poll on the server wakes on another process's enqueue.
    _until("the server's LISTEN connection again", lambda: _listening(own_pg), load)
    _long_poll_wakes(server.url, url)


def _long_poll_wakes(server_url: str, db_url: str) -> None:
    got: list[Any] = []
    with sqew.Client(server_url) as probe:
        waiting = threading.Thread(target=lambda: got.extend(_wait(server_url)))
        waiting.start()
        try:
            deadline = time.monotonic() + PHASE_S
            while True:  # parked once a second long poll is refused (max_waiting_polls=1)
                assert waiting.is_alive() and time.monotonic() < deadline
                try:
                    assert probe.poll("wake", wait_ms=1) == []
                except SqewError as exc:
                    if "max_waiting_polls" in str(exc):
                        break
                    raise
            with sqew.Client(db_url) as other:  # another process's commit: NOTIFY
                sent = other.enqueue("wake", {"after": "restart"})
        finally:
            waiting.join(30)
    assert [(m.id, m.payload) for m in got] == [(sent.message_id, {"after": "restart"})]


def _wait(server_url: str) -> list[Any]:
    with sqew.Client(server_url) as client:
        while True:
            try:
                return client.poll("wake", wait_ms=20_000)
            except SqewError as exc:  # the probe held the one slot a moment
                if "max_waiting_polls" not in str(exc):
                    raise
