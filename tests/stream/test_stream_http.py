"""``GET /queues/{q}/stream`` over real HTTP: the events as sent (``id:``, ``data:`` the leased
message as a poll answers it), the error envelope before a stream begins, the consume scope,
a client that drops its connection getting its leases given back, the ``max_waiting_polls``
bound, the stream metrics, and a shutdown ending streams."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from auth_support import create_queue, mint
from server.support import envelope, port_of
from targets import server_settings

import sqew
from sqew import errors, models
from sqew.server.app import begin_shutdown
from sqew.server.runtime import Runtime
from sqew.server.streams import Stream

DEADLINE_S = 20.0


@pytest.fixture
def queue(module_server: Any) -> Iterator[str]:
    """A queue of its own on the module's server (leases of a minute)."""
    name = f"s{uuid.uuid4().hex[:12]}"
    with httpx.Client(base_url=module_server.url, timeout=DEADLINE_S) as http:
        assert http.post("/queues", json={"name": name, "visibility_ms": 60_000}
                         ).status_code == 201
        yield name
        http.delete(f"/queues/{name}")


def events(lines: Iterator[str], count: int) -> list[dict[str, Any]]:
    """The next ``count`` events of an open stream's ``lines`` (``response.iter_lines()``,
    kept by the caller: a line iterator that is dropped closes the response), each as its
    fields (``comment``s kept)."""
    got: list[dict[str, Any]] = []
    event: dict[str, Any] = {}
    for line in lines:
        if line == "":
            got.append(event)
            event = {}
            if len(got) == count:
                return got
        elif line.startswith(":"):
            event.setdefault("comment", []).append(line[1:].strip())
        else:
            field, _, value = line.partition(": ")
            event[field] = value
    raise AssertionError(f"the stream ended after {len(got)} of {count} events")


def test_each_event_is_a_leased_message_as_a_poll_answers_it(
        module_server: Any, queue: str) -> None:
    with httpx.Client(base_url=module_server.url, timeout=DEADLINE_S) as http:
        enqueued = [http.post(f"/queues/{queue}/messages", content=body).json()["message_id"]
                    for body in (b'{"payload": {"a": 2.50}}', b'{"payload": [1, "two"]}')]
        with http.stream("GET", f"/queues/{queue}/stream",
                         params={"max_in_flight": 2}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            opened, first, second = events(lines, 3)
            assert opened == {"comment": ["open"]}
            for event, msg_id in zip((first, second), enqueued, strict=True):
                assert int(event["id"]) == msg_id
                message = json.loads(event["data"])
                assert message["id"] == msg_id and message["queue"] == queue
                assert message["token"] and message["attempts"] == 1
                assert message["lease_expires_at"] > message["enqueued_at"]
            assert '"payload":{"a": 2.50}' in first["data"]  # the payload as sent
            acked = http.post(f"/queues/{queue}/ack", json={
                "id": enqueued[0], "token": json.loads(first["data"])["token"]})
            assert acked.json()["results"][0]["status"] == "acked"
        # The stream closed: its other lease (of a minute) is given back, its attempt not
        # counted; this poll waits 10 s, so only a lease given back answers it.
        (again,) = http.post(f"/queues/{queue}/poll", params={"wait_ms": 10_000}
                             ).json()["messages"]
        assert (again["id"], again["attempts"]) == (enqueued[1], 1)
        assert http.get(f"/queues/{queue}/stats").json()["acked_total"] == 1


def test_errors_before_the_stream_are_the_error_envelope(module_server: Any, queue: str) -> None:
    with httpx.Client(base_url=module_server.url, timeout=DEADLINE_S) as http:
        envelope(http.get("/queues/nope/stream"), 404, "QueueNotFound")
        for bad in ({"max_in_flight": 0}, {"max_in_flight": 1001}, {"max_in_flight": "x"},
                    {"visibility_ms": -1}):
            envelope(http.get(f"/queues/{queue}/stream", params=bad), 400, "ValidationError")


def test_a_dropped_connection_gives_the_leases_back(module_server: Any, queue: str) -> None:
    with httpx.Client(base_url=module_server.url, timeout=DEADLINE_S) as http:
        for n in range(3):
            http.post(f"/queues/{queue}/messages", json={"payload": n})
        sock = socket.create_connection(("127.0.0.1", port_of(module_server.url)))
        sock.sendall(f"GET /queues/{queue}/stream?max_in_flight=2 HTTP/1.1\r\n"
                     "Host: test\r\n\r\n".encode())
        received = b""
        while received.count(b"\ndata: ") < 2:  # both leased and sent
            chunk = sock.recv(65536)
            assert chunk, "the server closed the stream"
            received += chunk
        sock.close()  # no goodbye: the server sees the connection end
        # Leased for a minute; this poll waits 10 s: only leases given back answer it.
        got = http.post(f"/queues/{queue}/poll", params={"batch": 10, "wait_ms": 10_000}
                        ).json()["messages"]
        while len(got) < 3:
            more = http.post(f"/queues/{queue}/poll", params={"batch": 10, "wait_ms": 10_000}
                             ).json()["messages"]
            assert more, f"only {len(got)} of 3 messages came back"
            got += more
        assert sorted(m["attempts"] for m in got) == [1, 1, 1]


def test_consume_scope_and_the_waiting_bound(
        start_server: Callable[..., Any], tmp_path: Path) -> None:
    db = tmp_path / "auth.db"
    create_queue(db, "jobs")
    producer, consumer = mint(db, "produce").key, mint(db, "consume").key
    server = start_server(db=db, max_waiting_polls=1)
    with httpx.Client(base_url=server.url, timeout=DEADLINE_S) as http:
        envelope(http.get("/queues/jobs/stream"), 401, "Unauthorized")
        envelope(http.get("/queues/jobs/stream", headers={"authorization": f"Bearer {producer}"}),
                 403, "Forbidden")
        auth = {"authorization": f"Bearer {consumer}"}
        with http.stream("GET", "/queues/jobs/stream", headers=auth) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            events(lines, 1)  # open: it counts as a waiting poll
            refused = http.get("/queues/jobs/stream", headers=auth)
            envelope(refused, 503, "Overloaded")
            assert refused.headers["retry-after"]


def test_streams_are_counted_in_the_metrics(module_server: Any, queue: str) -> None:
    def sample(text: str, name: str) -> float:
        (line,) = [x for x in text.splitlines() if x.startswith(name + " ")]
        return float(line.split()[1])

    with httpx.Client(base_url=module_server.url, timeout=DEADLINE_S) as http:
        before = http.get("/metrics").text
        http.post(f"/queues/{queue}/messages", json={"payload": 1})
        with http.stream("GET", f"/queues/{queue}/stream") as response:
            lines = response.iter_lines()
            events(lines, 2)
            during = http.get("/metrics").text
            assert sample(during, "sqew_streams_open") == sample(before, "sqew_streams_open") + 1
            assert (sample(during, "sqew_stream_events_total")
                    == sample(before, "sqew_stream_events_total") + 1)


def test_a_server_shutting_down_ends_its_streams_giving_their_leases_back(
        start_server: Callable[..., Any]) -> None:
    server = start_server()
    with sqew.Client(server.url) as client, ThreadPoolExecutor(1) as pool:
        client.create_queue("q")
        client.enqueue("q", 1)
        stream = client.stream("q", visibility_ms=60_000)
        assert next(stream).payload == 1
        waiting = pool.submit(next, stream)
        begin_shutdown(server.app)  # as on SIGTERM: long polls and streams end
        with pytest.raises(errors.Unavailable, match="ended the stream"):
            waiting.result(DEADLINE_S)
        stats = client.stats("q")  # given back before the stream's answer ended
        assert (stats.ready, stats.leased) == (1, 0)


def test_a_stream_whose_client_has_gone_ends_and_frees_the_server(tmp_path: Path) -> None:
    """A poll for a client that has gone answers at once (nothing leased); a stream that went
    on polling would spin and hold the event loop, and the server would answer nobody. It
    happened when a client acked a message and hung up while its stream looked at its leases:
    here the client is gone before the first poll, the same state, every time."""
    outcome: dict[str, Any] = {}

    async def main() -> None:
        rt = Runtime(server_settings(tmp_path / "s.db"))
        rt.startup()
        try:
            await rt.service.create_queue(models.QueueCreate(name="q"))
            await rt.service.enqueue("q", [models.MessageIn(payload=1)])
            stream = Stream(rt, "q", max_in_flight=1, visibility_ms=60_000, gone=lambda: True)
            outcome["events"] = [e async for e in stream.events()]
            outcome["stats"] = await rt.service.stats("q")
        finally:
            await rt.shutdown()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the stream of a client that has gone did not end"
    assert [e.comment for e in outcome["events"]] == ["open"]
    assert (outcome["stats"].ready, outcome["stats"].leased) == (1, 0)
