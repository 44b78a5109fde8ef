"""Bad input over real HTTP: every error is the documented envelope with the right status.

- routes: unknown paths; every queue route on a missing queue; a wrong method on every route;
  no schema page served;
- bodies and parameters: malformed and empty bodies, unknown fields, query ranges, a bad item
  of a batch named;
- not found and conflicts, single ack/nack/extend-lease failures, integers beyond 64 bits;
- limits: a payload over the queue's limit, a body over the server's (at the socket: declared,
  pipelined, streamed), the Idempotency-Key header, quotas (429 with Retry-After);
- a 500 hides the detail and gives a request id.
"""

from __future__ import annotations

import logging
import select
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import psutil
import pytest

from sqew.core.clock import ManualClock
from sqew.server.app import create_app

from .support import envelope, port_of, read_response, request_head

LIMIT = 64 * 1024  # max_body_bytes of the servers here
BIG = 2**64  # an id no database can hold (ids are signed 64-bit integers)


def _routes() -> list[tuple[str, frozenset[str], str | None, bool]]:
    """(path, methods, operation id, documented) of every route handler of the app."""
    out = []
    for route in create_app().routes:  # (their order varies between processes: sorted below)
        for handler in getattr(route, "route_handlers", []):
            out.append((route.path_format, frozenset(handler.http_methods),
                        handler.operation_id if isinstance(handler.operation_id, str) else None,
                        bool(handler.resolve_include_in_schema())))
    return sorted(out, key=lambda r: (r[0], sorted(r[1])))


ROUTES = _routes()


DOCUMENTED = [(p, m, op) for p, m, op, doc in ROUTES if doc]


@pytest.fixture
def http(start_server: Callable[..., Any]) -> Iterator[httpx.Client]:
    """A client of a fresh server (body limit ``LIMIT``, a ManualClock, so a rate limit's
    bucket does not refill between two requests) with a queue ``q`` (payloads up to 1000
    bytes, one attempt)."""
    server = start_server(clock=ManualClock(), max_body_bytes=LIMIT)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post("/queues", json={"name": "q", "max_payload_bytes": 1000,
                                            "max_attempts": 1}).status_code == 201
        yield client




# --- routes ------------------------------------------------------------------------------------
def test_unknown_paths_and_methods(http: httpx.Client) -> None:
    envelope(http.get("/nope"), 404, "NotFound")
    envelope(http.get("/queues/q/nope"), 404, "NotFound")
    envelope(http.get("/schema"), 404, "NotFound")  # no schema pages are served
    error = envelope(http.put("/queues"), 405, "MethodNotAllowed")
    assert "PUT" in error["message"]
    envelope(http.delete("/queues/q/poll"), 405, "MethodNotAllowed")
    envelope(http.get("/queues/q/ack"), 405, "MethodNotAllowed")


# A valid request to each queue route (by operation id); the queue is filled in per test.
QUEUE_REQUESTS: dict[str, list[tuple[str, dict[str, Any] | None]]] = {
    "getQueue": [("", None)],
    "updateQueue": [("", {"max_attempts": 3})],
    "deleteQueue": [("", None)],
    "compactQueue": [("", None)],
    "enqueue": [("", {"payload": 1}), ("", {"messages": [{"payload": 1}]})],
    "poll": [("", None), ("?batch=5", None), ("?wait_ms=200", None)],
    "ack": [("", {"id": 1, "token": "t"}), ("", {"acks": [{"id": 1, "token": "t"}]})],
    "nack": [("", {"id": 1, "token": "t"}), ("", {"nacks": [{"id": 1, "token": "t"}]})],
    "extendLease": [("", {"id": 1, "token": "t", "ms": 1000})],
    "getStats": [("", None)],
    "peek": [("", None)],
    "getMessage": [("", None)],
    "removeMessage": [("", None)],
    "purgeQueue": [("", None)],
    "pauseQueue": [("", None)],
    "resumeQueue": [("", None)],
    "streamMessages": [("", None)],
    "listDlq": [("", None)],
    "scanMessages": [("", None), ("?source=dlq&after_id=0", None),
                     ("?source=archive&max_id=9&limit=1000", None)],
    "requeueDlq": [("", None), ("", {"ids": [1]})],
    "purgeDlq": [("", None)],
}


def test_the_sweep_covers_every_queue_route() -> None:
    queue_ops = {op for path, _, op in DOCUMENTED if "{q}" in path}
    assert queue_ops == set(QUEUE_REQUESTS)


QUEUE_CASES = [
    pytest.param(path, method, suffix, body, id=f"{op}{i}")
    for path, methods, op in DOCUMENTED if "{q}" in path and op is not None
    for method in methods
    for i, (suffix, body) in enumerate(QUEUE_REQUESTS[op])
]


@pytest.mark.parametrize(("path", "method", "suffix", "body"), QUEUE_CASES)
@pytest.mark.parametrize("missing", ["nope", "nope.dlq"])
def test_every_queue_route_on_a_missing_queue_is_queue_not_found(
    shared: httpx.Client, path: str, method: str, suffix: str, body: Any, missing: str
) -> None:
    url = path.replace("{q}", missing).replace("{id}", "1") + suffix
    error = envelope(shared.request(method, url, json=body), 404, "QueueNotFound")
    assert missing in error["message"]


def _other_method(methods: frozenset[str]) -> str:
    return next(m for m in ("PUT", "POST", "GET", "DELETE", "PATCH") if m not in methods)


@pytest.mark.parametrize("path", sorted({p for p, _, _ in DOCUMENTED}))
def test_a_wrong_method_on_every_route_is_method_not_allowed(
    shared: httpx.Client, path: str
) -> None:
    allowed = {m for p, methods, _ in DOCUMENTED if p == path for m in methods}
    wrong = _other_method(frozenset(allowed))
    url = path.replace("{q}", "q").replace("{id}", "1")
    response = shared.request(wrong, url)
    error = envelope(response, 405, "MethodNotAllowed")
    assert wrong in error["message"]
    assert allowed <= {m.strip() for m in response.headers["allow"].split(",")}


@pytest.mark.parametrize("path", sorted({p for p, _, _ in DOCUMENTED}))
def test_options_on_every_route_lists_every_method_it_serves(
    shared: httpx.Client, path: str
) -> None:
    # The same methods as the document and the 405 answers, not only the first handler's.
    allowed = {m for p, methods, _ in DOCUMENTED if p == path for m in methods}
    response = shared.options(path.replace("{q}", "q").replace("{id}", "1"))
    assert response.status_code == 204, response.text
    assert {m.strip() for m in response.headers["allow"].split(",")} == allowed | {"OPTIONS"}


@pytest.mark.parametrize(
    "path", sorted({p.replace("{path}", "x") for p, _, _, doc in ROUTES
                    if p.startswith("/schema") and not doc})
)
def test_no_schema_page_is_served(shared: httpx.Client, path: str) -> None:
    # docs/openapi.yaml is the document; the app serves no schema UI or JSON at all.
    envelope(shared.get(path), 404, "NotFound")


# --- malformed bodies and parameters -------------------------------------------------------
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


@pytest.mark.parametrize(("body", "field"), [
    ({"messages": [{"payload": 1}, {"payload": 2, "bogus": 1}]}, "messages[1]"),
    ({"messages": [{"payload": 1}, {"payload": 2, "priority": 1001}]}, "messages[1].priority"),
    ({"messages": [{"payload": 1}, {"priority": 1}]}, "messages[1]"),
    ({"messages": [{"payload": i} for i in range(1001)]}, "messages"),
    ({"messages": []}, "messages"),
    ({"acks": [{"id": 1}]}, "acks[0]"),
    ({"nacks": [{"id": 1, "token": "t", "delay_ms": -1}]}, "nacks[0].delay_ms"),
])
def test_a_bad_item_of_a_batch_is_named_and_nothing_is_written(
    shared: httpx.Client, queue: str, body: dict[str, Any], field: str
) -> None:
    http = shared
    path = f"{queue}/messages" if "messages" in body else f"{queue}/{next(iter(body))[:-1]}"
    error = envelope(http.post(path, json=body), 400, "ValidationError")
    assert [d["field"] for d in error["details"]] == [field]
    assert http.get(f"{queue}/stats").json()["enqueued_total"] == 0


# --- not found, conflicts, single ack/nack/extend answers ------------------------------------
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


def test_single_nack_and_extend_lease_failures_use_the_error_codes(
    shared: httpx.Client, queue: str
) -> None:
    http = shared
    http.post(f"{queue}/messages", json={"payload": 1})
    (leased,) = http.post(f"{queue}/poll").json()["messages"]
    stale = {"id": leased["id"], "token": "not-the-token"}
    envelope(http.post(f"{queue}/nack", json=stale), 409, "LeaseLost")
    envelope(http.post(f"{queue}/nack", json={"id": 999, "token": "t"}), 404, "MessageNotFound")
    envelope(http.post(f"{queue}/extend-lease", json={"id": 999, "token": "t", "ms": 10}), 404,
             "MessageNotFound")
    # The batch form answers 200 with a status per item, in order.
    got = http.post(f"{queue}/nack", json={"nacks": [stale, {"id": 999, "token": "t"}]})
    assert got.status_code == 200
    assert got.json() == {"results": [{"id": leased["id"], "status": "lease_lost"},
                                      {"id": 999, "status": "not_found"}]}
    # None of that touched the lease: the real token still acks.
    ack = http.post(f"{queue}/ack", json={"id": leased["id"], "token": leased["token"]})
    assert ack.json() == {"results": [{"id": leased["id"], "status": "acked"}]}


# --- integers beyond 64 bits ------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path", "params"), [
    ("GET", f"/queues/q/messages/{BIG}", None),
    ("DELETE", f"/queues/q/messages/{BIG}", None),
    ("GET", "/queues/q/dlq", {"after_id": BIG}),
])
def test_ids_beyond_64_bits_in_a_path_or_query_are_validation_errors(
    shared: httpx.Client, queue: str, method: str, path: str, params: Any
) -> None:
    http, path = shared, path.replace("/queues/q", queue)
    error = envelope(http.request(method, path, params=params), 400, "ValidationError")
    assert error["details"][0]["field"] in ("id", "after_id")


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("POST", "/queues/q/ack", {"id": BIG, "token": "t"}, "id"),
    ("POST", "/queues/q/ack", {"acks": [{"id": BIG, "token": "t"}]}, "acks[0].id"),
    ("POST", "/queues/q/nack", {"id": BIG, "token": "t"}, "id"),
    ("POST", "/queues/q/nack", {"nacks": [{"id": BIG, "token": "t"}]}, "nacks[0].id"),
    ("POST", "/queues/q/extend-lease", {"id": BIG, "token": "t", "ms": 1}, "id"),
    ("POST", "/queues/q/dlq/requeue", {"ids": [BIG]}, "ids[0]"),
    ("POST", "/queues", {"name": "huge", "max_depth": BIG}, "max_depth"),
    ("PATCH", "/queues/q", {"max_depth": 2**63}, "max_depth"),
    ("POST", "/queues/q/ack", {"id": -BIG, "token": "t"}, "id"),
])
def test_integers_beyond_64_bits_in_a_body_are_validation_errors(
    shared: httpx.Client, queue: str, method: str, path: str, body: Any, field: str
) -> None:
    http, path = shared, path.replace("/queues/q", queue)
    error = envelope(http.request(method, path, json=body), 400, "ValidationError")
    assert [d["field"] for d in error["details"]] == [field]
    assert http.get("/queues/huge").status_code == 404


def test_the_largest_64_bit_integers_in_a_body_are_accepted(
    shared: httpx.Client, queue: str
) -> None:
    http, top = shared, 2**63 - 1
    patched = http.patch(queue, json={"max_depth": top})
    assert patched.status_code == 200 and patched.json()["max_depth"] == top, patched.text
    envelope(http.post(f"{queue}/ack", json={"id": top, "token": "t"}), 404, "MessageNotFound")
    got = http.post(f"{queue}/dlq/requeue", json={"ids": [top]})
    assert got.status_code == 200 and got.json() == {"requeued": 0, "left": 0}, got.text


# --- payloads and bodies over the limits ------------------------------------------------------
def test_payload_over_the_queue_limit(http: httpx.Client) -> None:
    envelope(http.post("/queues/q/messages", json={"payload": "x" * 2000}), 413,
             "PayloadTooLarge")
    batch = {"messages": [{"payload": 1}, {"payload": "x" * 2000}]}
    envelope(http.post("/queues/q/messages", json=batch), 413, "PayloadTooLarge")
    assert http.get("/queues/q/stats").json()["enqueued_total"] == 0  # all or nothing


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(
    start_server: Callable[..., Any],
) -> None:
    # Only the headers go out: a server that waited for the body would never answer.
    server = start_server(max_body_bytes=LIMIT)
    with socket.create_connection(("127.0.0.1", port_of(server.url)), timeout=10) as sock:
        sock.sendall(request_head("POST", "/queues/q/messages", length=100 * 1024 * 1024))
        got = read_response(sock)
    assert got.status == 413
    assert got.body == (b'{"error":{"code":"PayloadTooLarge",'
                        b'"message":"the request body exceeds 65536 bytes"}}')
    assert got.headers["connection"] == "close"
    assert (got.closed, got.rest) == (True, b"")


def test_after_a_body_over_the_limit_the_connection_is_closed_or_still_in_step(
    start_server: Callable[..., Any],
) -> None:
    # A pipelined request after a refused body: the server may close the connection, or read
    # past the refused body and answer the next request, but never parse body bytes as a
    # request.
    server = start_server(max_body_bytes=LIMIT)
    body = b'{"payload": "' + b"GET /healthz HTTP/1.1\r\n\r\n" * 5000 + b'"}'
    follow = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port_of(server.url)), timeout=10) as sock:
        sock.sendall(request_head("POST", "/queues/q/messages", length=len(body)) + body + follow)
        got = read_response(sock)
    assert got.status == 413
    if got.rest:
        assert got.rest.startswith(b"HTTP/1.1 200 OK\r\n") and got.rest.endswith(
            b'{"status":"ok"}'), got.rest[:300]
    else:
        assert got.closed


def test_streamed_body_over_the_limit_is_answered_before_it_is_all_sent(
    http: httpx.Client,
) -> None:
    # A chunked upload (no Content-Length) of 100 MB from a generator that counts what it gave:
    # the 413 (with `Connection: close`, and the server closes) must arrive while most of the
    # generator is still unread, so the client stops sending rather than the server reading
    # and dropping the whole upload; and the server must not hold the body (it runs in this
    # process, so its memory is ours to measure).
    # httpx sends a whole body before it reads the answer, so this client is a raw socket that
    # watches for the answer between chunks.
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
    assert b"\r\nconnection: close" in head_bytes.lower(), head_bytes
    error = msgspec.json.decode(body)
    assert list(error) == ["error"] and set(error["error"]) == {"code", "message"}, error
    assert error["error"]["code"] == "PayloadTooLarge", error
    assert given < total // 4, given  # answered long before the upload ended
    assert me.memory_info().rss - before < 50 * 1024 * 1024
    assert http.get("/queues/q/stats").json()["enqueued_total"] == 0
    assert http.get("/healthz").json() == {"status": "ok"}


# --- Idempotency-Key header ----------------------------------------------------------------------
def test_the_idempotency_key_header(shared: httpx.Client, queue: str) -> None:
    http = shared
    def send(body: Any, key: str | bytes | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key is not None else {}
        return http.post(f"{queue}/messages", json=body, headers=headers)

    first = send({"payload": 1}, "order-1")
    assert first.status_code == 201 and first.json()["duplicate"] is False
    again = send({"payload": 2}, "order-1")  # header again: a duplicate of the first
    assert again.json() == {"message_id": first.json()["message_id"], "duplicate": True}
    in_body = send({"payload": 3, "idempotency_key": "order-1"})  # the same key, in the body
    assert in_body.json() == again.json()
    same = send({"payload": 4, "idempotency_key": "order-1"}, "order-1")
    assert same.json() == again.json()
    envelope(send({"payload": 5, "idempotency_key": "a"}, "b"), 400, "ValidationError")
    envelope(send({"messages": [{"payload": 6}]}, "c"), 400, "ValidationError")
    for bad in ("k" * 129, "tab\there", "caf\xc3\xa9".encode("latin-1")):
        envelope(send({"payload": 7}, bad), 400, "ValidationError")
    assert http.get(f"{queue}/stats").json()["enqueued_total"] == 1


# --- quotas, internal errors -----------------------------------------------------------------
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
    start_server: Callable[..., Any], tmp_path: Path,
) -> None:
    # A real failure the service does not expect: a table disappears under the running server
    # (another program damaging the file).
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
    logged = [r for r in records if getattr(r, "request_id", None) == request_id]
    assert logged and logged[0].exc_info is not None  # the detail is in the log


def test_every_bad_queue_setting_is_in_one_answer(http: httpx.Client) -> None:
    body = {"name": "twice-wrong", "max_attempts": 0, "retention_ms": 5}
    error = envelope(http.post("/queues", json=body), 400, "ValidationError")
    assert [d["field"] for d in error["details"]] == ["max_attempts", "retention_ms"]
    patched = http.patch("/queues/q", json={"visibility_ms": -1, "max_depth": -2})
    assert [d["field"] for d in envelope(patched, 400, "ValidationError")["details"]] == [
        "visibility_ms", "max_depth"]
