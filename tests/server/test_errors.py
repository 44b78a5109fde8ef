"""Bad input over real HTTP, per endpoint: every error is SPEC's envelope with the right status.

The basics (malformed and empty bodies, unknown fields, query ranges, 404/405, quotas with
Retry-After, payload limits, a 500 with a request id) are in ``tests/http/test_errors.py``.
This module adds the per-endpoint sweeps (every queue route on a missing queue, a wrong method
on every route, the schema pages never served), ids beyond 64 bits, how a body over the limit
is refused at the socket level, and the Idempotency-Key header.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

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
    """A client of a fresh server (body limit ``LIMIT``) with a queue ``q``."""
    server = start_server(max_body_bytes=LIMIT)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post("/queues", json={"name": "q"}).status_code == 201
        yield client


@pytest.fixture(scope="module")
def shared(module_server: Any) -> Iterator[httpx.Client]:
    """A client of the module's server, for tests that change nothing that others read."""
    with httpx.Client(base_url=module_server.url, timeout=30) as client:
        yield client


@pytest.fixture
def queue(shared: httpx.Client) -> Iterator[str]:
    """A new queue of its own on the module's server, as ``/queues/<name>``."""
    name = f"t{uuid.uuid4().hex[:12]}"
    assert shared.post("/queues", json={"name": name}).status_code == 201
    yield f"/queues/{name}"
    shared.delete(f"/queues/{name}")


# --- every route ---------------------------------------------------------------------------------
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
    "listDlq": [("", None)],
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


@pytest.mark.parametrize(
    "path", sorted({p.replace("{path}", "x") for p, _, _, doc in ROUTES
                    if p.startswith("/schema") and not doc})
)
def test_no_schema_page_is_served(shared: httpx.Client, path: str) -> None:
    # docs/openapi.yaml is the document; the app serves no schema UI or JSON at all.
    envelope(shared.get(path), 404, "NotFound")


# --- single ack/nack/extend answers with the error codes -----------------------------------------
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


# --- ids beyond 64 bits --------------------------------------------------------------------------
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
    assert got.status_code == 200 and got.json() == {"requeued": 0}, got.text


# --- bodies over the server's limit, at the socket -----------------------------------------------
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


def test_a_refused_upload_is_not_read_to_the_end(http: httpx.Client) -> None:
    # The 413 says `Connection: close` and the server closes, so the client stops sending
    # rather than the server reading (and dropping) the whole upload.
    total = 64 * 1024 * 1024
    sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal sent
        yield b'{"payload": "'
        chunk = b"x" * 65536
        while sent < total:
            sent += len(chunk)
            yield chunk
        yield b'"}'

    try:
        response: httpx.Response | None = http.post("/queues/q/messages", content=chunks())
    except httpx.TransportError:
        response = None  # the server closed while we were still sending
    if response is not None:
        envelope(response, 413, "PayloadTooLarge")
        assert response.headers["connection"] == "close"
    assert sent < total


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


# --- batch validation ----------------------------------------------------------------------------
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
