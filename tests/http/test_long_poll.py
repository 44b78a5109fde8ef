"""Long polls over HTTP: woken by an enqueue through the server or by another process's write,
ended by a disconnect or by shutdown.

(The contract suite also covers waking through the same server, on both targets.)
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

import sqew
from sqew.server.app import begin_shutdown

WAIT_MS = 15_000


def test_woken_by_an_enqueue_through_the_server(start_server: Callable[..., Any]) -> None:
    server = start_server()
    with sqew.Client(server.url) as consumer, sqew.Client(server.url) as producer:
        consumer.create_queue("q")
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(consumer.poll, "q", wait_ms=WAIT_MS)
            time.sleep(0.3)  # the poll is waiting by now (if not, it finds the message at once)
            producer.enqueue("q", {"n": 1})
            written = time.monotonic()
            got = waiting.result(timeout=WAIT_MS / 1000 + 5)
            woken_after = time.monotonic() - written
    assert [(m.payload, m.attempts) for m in got] == [({"n": 1}, 1)]
    assert woken_after < WAIT_MS / 1000 / 3  # woken by the enqueue, not by the end of the wait


def test_woken_by_another_process_writing_the_same_file(
    start_server: Callable[..., Any], tmp_path: Any
) -> None:
    db = tmp_path / "shared.db"
    server = start_server(db=str(db))
    with sqew.Client(server.url) as client:
        client.create_queue("q")
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(client.poll, "q", wait_ms=WAIT_MS)
            time.sleep(0.3)
            script = ("import sqew, sys; c = sqew.Client(sys.argv[1]); "
                      "c.enqueue('q', {'from': 'elsewhere'}); c.close()")
            subprocess.run([sys.executable, "-c", script, str(db)], check=True, timeout=60)
            written = time.monotonic()
            got = waiting.result(timeout=WAIT_MS / 1000 + 5)
            woken_after = time.monotonic() - written
    assert [m.payload for m in got] == [{"from": "elsewhere"}]
    assert woken_after < WAIT_MS / 1000 / 3  # woken by the write, not by the end of the wait


def test_a_client_that_leaves_leases_nothing(start_server: Callable[..., Any]) -> None:
    # One poll thread: a second waiting poll can only start once the departed client's poll
    # has given its thread back, which tells the test that the server noticed the departure.
    server = start_server(poll_threads=1)
    with sqew.Client(server.url) as client:
        client.create_queue("q")
        client.create_queue("probe")
        with pytest.raises(httpx.ReadTimeout):  # the consumer gives up after 0.5 s
            httpx.post(f"{server.url}/queues/q/poll", params={"wait_ms": WAIT_MS}, timeout=0.5)
        left = time.monotonic()
        assert client.poll("probe", wait_ms=1) == []
        assert time.monotonic() - left < WAIT_MS / 1000 / 3  # not after the departed wait
        client.enqueue("q", "for the next consumer")
        got = client.poll("q", wait_ms=5000)
        assert [(m.payload, m.attempts) for m in got] == [("for the next consumer", 1)]
        assert client.stats("q").leased == 1


def test_shutdown_ends_waiting_polls_at_once(start_server: Callable[..., Any]) -> None:
    server = start_server()
    with sqew.Client(server.url) as client:
        client.create_queue("q")
        results: list[Any] = []
        waiter = threading.Thread(
            target=lambda: results.append(client.poll("q", wait_ms=WAIT_MS)), daemon=True
        )
        waiter.start()
        time.sleep(0.3)
        started = time.monotonic()
        begin_shutdown(server.app)
        waiter.join(WAIT_MS / 1000)
        assert results == [[]]
        assert time.monotonic() - started < WAIT_MS / 1000 / 3
