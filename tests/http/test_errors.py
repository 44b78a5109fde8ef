"""Bad input per endpoint over real HTTP: every error is SPEC's envelope with the right status."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import msgspec
import pytest

from sqew.core.clock import ManualClock

LIMIT = 64 * 1024  # the server's max_body_bytes in these tests


def envelope(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Check ``response`` is exactly SPEC's error envelope; return its ``error`` object."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) <= {"code", "message", "details"} and {"code", "message"} <= set(error)
    assert error["code"] == code, body
    assert isinstance(error["message"], str) and error["message"]
    assert "Traceback" not in response.text
    return dict(error)


@pytest.fixture
def http(start_server: Callable[..., Any]) -> Iterator[httpx.Client]:
    clock = ManualClock()
    server = start_server(clock=clock, max_body_bytes=LIMIT)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post("/queues", json={"name": "q", "max_payload_bytes": 1000,
                                            "max_attempts": 1}).status_code == 201
        client.clock = clock  # type: ignore[attr-defined]
        yield client


def test_unknown_paths_and_methods(http: httpx.Client) -> None:
    envelope(http.get("/nope"), 404, "NotFound")
    envelope(http.get("/queues/q/nope"), 404, "NotFound")
    envelope(http.get("/schema"), 404, "NotFound")  # no schema pages are served
    error = envelope(http.put("/queues"), 405, "MethodNotAllowed")
    assert "PUT" in error["message"]
    envelope(http.delete("/queues/q/poll"), 405, "MethodNotAllowed")
    envelope(http.get("/queues/q/ack"), 405, "MethodNotAllowed")


BODY_ENDPOINTS = [
    ("POST", "/queues"), ("PATCH", "/queues/q"), ("POST", "/queues/q/messages"),
    ("POST", "/queues/q/ack"), ("POST", "/queues/q/nack"), ("POST", "/queues/q/extend-lease"),
    ("POST", "/queues/q/dlq/requeue"),
]


@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
def test_malformed_bodies(http: httpx.Client, method: str, path: str) -> None:
    envelope(http.request(method, path, content=b"{bad"), 400, "InvalidRequest")
    envelope(http.request(method, path, content=b'{"a": "\xff\xfe"}'), 400, "InvalidRequest")
    error = envelope(http.request(method, path, json={"unknown_field": 1, "id": 1}), 400,
                     "ValidationError")
    assert error.get("details"), error
    envelope(http.request(method, path, content=b"[1, 2]"), 400, "ValidationError")


@pytest.mark.parametrize(("method", "path"), [p for p in BODY_ENDPOINTS if "requeue" not in p[1]])
def test_empty_body_where_one_is_needed(http: httpx.Client, method: str, path: str) -> None:
    envelope(http.request(method, path, content=b""), 400, "InvalidRequest")


@pytest.mark.parametrize(("query", "bound"), [
    ({"batch": 0}, "between 1 and 100"), ({"batch": 101}, "between 1 and 100"),
    ({"batch": "x"}, "between 1 and 100"), ({"wait_ms": 20001}, "between 0 and 20000"),
    ({"wait_ms": -1}, "between 0 and 20000"), ({"visibility_ms": -1}, "between 0 and 43200000"),
])
def test_poll_parameters_out_of_range(
    http: httpx.Client, query: dict[str, Any], bound: str
) -> None:
    # Worded as the service words its own range checks, so a local client says the same.
    error = envelope(http.post("/queues/q/poll", params=query), 400, "ValidationError")
    (name,) = query
    assert error["message"] == f"{name} must be an integer {bound}"
    assert error["details"] == [
        {"field": name, "message": f"must be an integer {bound}", "in": "query"}
    ]


def test_several_bad_parameters_are_all_named(http: httpx.Client) -> None:
    error = envelope(http.post("/queues/q/poll", params={"batch": 0, "wait_ms": "x"}), 400,
                     "ValidationError")
    assert error["message"] == ("batch must be an integer between 1 and 100; "
                                "wait_ms must be an integer between 0 and 20000")
    assert [d["field"] for d in error["details"]] == ["batch", "wait_ms"]


def test_other_parameters_out_of_range(http: httpx.Client) -> None:
    envelope(http.get("/queues/q/peek", params={"limit": 0}), 400, "ValidationError")
    envelope(http.get("/queues/q/peek", params={"limit": 101}), 400, "ValidationError")
    envelope(http.get("/queues/q/dlq", params={"limit": 0}), 400, "ValidationError")
    envelope(http.get("/queues/q/messages/0"), 400, "ValidationError")
    envelope(http.get("/queues/q/messages/abc"), 404, "NotFound")  # no such route
    envelope(http.post("/queues", json={"name": "x", "visibility_ms": -5}), 400,
             "ValidationError")
    envelope(http.post("/queues/q/messages", json={"payload": 1}, headers={
        "Idempotency-Key": "k" * 129}), 400, "ValidationError")


def test_not_found_and_conflicts(http: httpx.Client) -> None:
    envelope(http.get("/queues/nope"), 404, "QueueNotFound")
    envelope(http.post("/queues/nope/messages", json={"payload": 1}), 404, "QueueNotFound")
    envelope(http.post("/queues/nope/poll"), 404, "QueueNotFound")
    envelope(http.get("/queues/q/messages/99"), 404, "MessageNotFound")
    envelope(http.delete("/queues/q/messages/99"), 404, "MessageNotFound")
    envelope(http.post("/queues/q/ack", json={"id": 99, "token": "t"}), 404, "MessageNotFound")
    envelope(http.post("/queues", json={"name": "q"}), 409, "QueueExists")
    envelope(http.post("/queues", json={"name": "q.dlq"}), 400, "ValidationError")
    http.post("/queues/q/messages", json={"payload": 1})
    leased = http.post("/queues/q/poll").json()["messages"][0]
    envelope(http.post("/queues/q/ack", json={"id": leased["id"], "token": "wrong"}), 409,
             "LeaseLost")
    envelope(http.post("/queues/q/extend-lease", json={"id": leased["id"], "token": "wrong",
                                                      "ms": 10}), 409, "LeaseLost")
    # Batch forms answer 200 with per-item statuses instead.
    got = http.post("/queues/q/ack", json={"acks": [{"id": leased["id"], "token": "wrong"},
                                                    {"id": 99, "token": "t"}]})
    assert got.status_code == 200
    assert got.json() == {"results": [{"id": leased["id"], "status": "lease_lost"},
                                      {"id": 99, "status": "not_found"}]}


def test_payload_over_the_queue_limit(http: httpx.Client) -> None:
    envelope(http.post("/queues/q/messages", json={"payload": "x" * 2000}), 413,
             "PayloadTooLarge")
    batch = {"messages": [{"payload": 1}, {"payload": "x" * 2000}]}
    envelope(http.post("/queues/q/messages", json=batch), 413, "PayloadTooLarge")
    assert http.get("/queues/q/stats").json()["enqueued_total"] == 0  # all or nothing


def test_body_over_the_server_limit_with_a_length(http: httpx.Client) -> None:
    body = b'{"payload": "' + b"x" * (LIMIT * 2) + b'"}'
    envelope(http.post("/queues/q/messages", content=body), 413, "PayloadTooLarge")


def test_streamed_body_over_the_limit_is_answered_before_it_is_all_sent(
    http: httpx.Client,
) -> None:
    # A chunked upload (no Content-Length) of 100 MB from a generator that counts what it gave:
    # the 413 must arrive while most of the generator is still unread, and the server must not
    # hold the body (it runs in this process, so its memory is ours to measure).
    # httpx sends a whole body before it reads the answer, so this client is a raw socket that
    # watches for the answer between chunks.
    import psutil

    total = 100 * 1024 * 1024
    given = 0

    def chunks() -> Iterator[bytes]:
        nonlocal given
        yield b'{"payload": "'
        chunk = b"x" * 65536
        while given < total:
            given += len(chunk)
            yield chunk
        yield b'"}'

    me = psutil.Process()
    before = me.memory_info().rss
    url = httpx.URL(str(http.base_url))
    head = (f"POST /queues/q/messages HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    answer = b""
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        sock.sendall(head.encode())
        deadline = time.monotonic() + 30
        for chunk in chunks():
            readable, _, _ = select.select([sock], [], [], 0)
            if readable or time.monotonic() > deadline:
                break  # the server has answered (or closed): stop sending
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:
                break  # closed by the server while we were still sending
        while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
            part = sock.recv(65536)
            if not part:
                break
            answer += part
    head_bytes, _, body = answer.partition(b"\r\n\r\n")
    assert head_bytes.startswith(b"HTTP/1.1 413 "), answer[:300]
    error = msgspec.json.decode(body)
    assert list(error) == ["error"] and set(error["error"]) == {"code", "message"}, error
    assert error["error"]["code"] == "PayloadTooLarge", error
    assert given < total // 4, given  # answered long before the upload ended
    assert me.memory_info().rss - before < 50 * 1024 * 1024
    assert http.get("/queues/q/stats").json()["enqueued_total"] == 0
    assert http.get("/healthz").json() == {"status": "ok"}


def test_quotas_answer_429_with_retry_after(http: httpx.Client) -> None:
    http.post("/queues", json={"name": "small", "max_depth": 1})
    http.post("/queues/small/messages", json={"payload": 1})
    full = http.post("/queues/small/messages", json={"payload": 2})
    envelope(full, 429, "QueueFull")
    assert int(full.headers["retry-after"]) >= 0
    http.post("/queues", json={"name": "slow", "rate_limit_per_s": 1})
    http.post("/queues/slow/messages", json={"payload": 1})
    limited = http.post("/queues/slow/messages", json={"payload": 2})
    envelope(limited, 429, "RateLimited")
    assert int(limited.headers["retry-after"]) >= 1


def test_internal_errors_hide_the_detail_and_give_a_request_id(
    start_server: Callable[..., Any], tmp_path: Any,
) -> None:
    # A real failure the service does not expect: a table disappears under the running server
    # (another program damaging the file).
    import logging
    import sqlite3

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    db = tmp_path / "broken.db"
    server = start_server(db=str(db))
    logger = logging.getLogger("sqew.server")
    keep = Keep(logging.ERROR)
    logger.addHandler(keep)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            http.post("/queues", json={"name": "q"})
            conn = sqlite3.connect(db)
            conn.execute("DROP TABLE dedup")
            conn.commit()
            conn.close()
            response = http.post("/queues/q/messages",
                                 json={"payload": 1, "idempotency_key": "k"})
    finally:
        logger.removeHandler(keep)
    error = envelope(response, 500, "InternalError")
    request_id = response.headers["x-request-id"]
    assert request_id in error["message"]
    assert "dedup" not in response.text and "sqlite" not in response.text.lower()
    logged = [r for r in records if request_id in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the detail is in the log
