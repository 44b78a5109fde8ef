"""A thousand long polls waiting at once on a real server.

A wait is a future on the event loop, not a thread: the server's thread count does not move
while a thousand polls are parked, another queue's poll is answered meanwhile, and when
messages come every wait ends and none is left behind.

The server runs in this process (a thread), so the service's waiter says when the polls are
parked; the polls are raw HTTP/1.1 connections on an asyncio loop, which adds no thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import psutil

import sqew
from sqew.backends.wakeups import InProcessWaiter

from .support import START_S

WAITERS = 1000
WAIT_MS = 20_000
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def threads() -> tuple[int, int]:
    """This process's threads: as the OS counts them, and as ``threading`` does."""
    return psutil.Process().num_threads(), threading.active_count()


async def open_polls(port: int, queue: str, count: int) -> list[Connection]:
    """``count`` connections, each with a long poll of ``queue`` sent."""
    request = (f"POST /queues/{queue}/poll?wait_ms={WAIT_MS} HTTP/1.1\r\nHost: test\r\n"
               "Content-Length: 0\r\n\r\n").encode()
    conns: list[Connection] = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        conns.append((reader, writer))
    await asyncio.gather(*(writer.drain() for _, writer in conns))
    return conns


async def answer(conn: Connection) -> tuple[int, Any]:
    """The status and JSON body of the one response on ``conn``."""
    reader, _ = conn
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in
               (line.split(":", 1) for line in lines[1:] if line)}
    body = await reader.readexactly(int(headers["content-length"]))
    return int(lines[0].split()[1]), json.loads(body)


def test_a_thousand_waiting_polls_hold_no_thread_and_hold_up_no_other_poll(
    start_server: Callable[..., Any],
) -> None:
    server = start_server(reap_interval_ms=600_000)
    port = server.sock.getsockname()[1]
    waiter = server.app.state.runtime.service.waiter
    assert isinstance(waiter, InProcessWaiter)
    with sqew.Client(server.url) as c:
        c.create_queue("idle", visibility_ms=120_000)
        c.create_queue("busy")
        # Every kind of request of the test once, so whatever threads the server starts on
        # first use exist before counting: a poll that waits and ends, an enqueue, a read.
        assert c.poll("idle", wait_ms=100) == []
        c.enqueue("busy", "ready")
        assert c.stats("busy").ready == 1
        before = threads()

        async def main() -> list[tuple[int, Any]]:
            conns = await open_polls(port, "idle", WAITERS)
            try:
                # (Blocking this loop is harmless: the requests are sent, the answers wait.)
                assert waiter.until_waiting("idle", WAITERS, 120), waiter.waiting("idle")
                parked = threads()
                assert parked == before, (before, parked)
                # Another queue's poll is answered while every one of them still waits.
                got = httpx.post(f"{server.url}/queues/busy/poll", timeout=30)
                assert [m["payload"] for m in got.json()["messages"]] == ["ready"]
                assert waiter.waiting("idle") == WAITERS
                # Then a message for each: every wait ends with one.
                c.enqueue_batch("idle", [{"payload": i} for i in range(WAITERS)])
                return await asyncio.wait_for(
                    asyncio.gather(*(answer(conn) for conn in conns)), START_S)
            finally:
                for _, writer in conns:
                    writer.close()

        answers = asyncio.run(main())
        assert all(status == 200 for status, _ in answers)
        payloads = [m["payload"] for _, body in answers for m in body["messages"]]
        assert sorted(payloads) == list(range(WAITERS))  # each one message, none twice
        assert waiter.waiting("idle") == 0  # no wait left behind
        stats = c.stats("idle")
        assert (stats.leased, stats.ready) == (WAITERS, 0)
        # The database pool starts its threads lazily: the batch and the reads after the waits
        # may have found every started thread busy (a checkpoint, a key confirmation) and
        # started one more. A wait holding a thread would show as hundreds here, not a few.
        grown = [now - was for now, was in zip(threads(), before, strict=True)]
        assert max(grown) <= 3, (before, threads())
