"""Errors at the edge of the wire: what the HTTP parser refuses, headers, field paths.

Requests the HTTP parser rejects never reach the app; they still get the error envelope (checked
on raw sockets against a real ``sqew serve``). A repeated or malformed ``Idempotency-Key`` and a
too-long attribute key are ValidationErrors whose message and ``details`` a person can act on.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .support import Served, envelope, read_response, serve


# --- what the HTTP parser refuses ----------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A real ``sqew serve`` (subprocess) with a queue ``q``."""
    with serve(tmp_path_factory.mktemp("wire") / "w.db") as server:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.post("/queues", json={"name": "q"}).status_code == 201
        yield server


def _head(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


MALFORMED = [
    pytest.param(_head("GET /healthz HTTP/1.1", "Host: t", "X-Note: a\x01b"), 400,
                 id="control-character-in-header"),
    pytest.param(_head("POST /queues/q/messages HTTP/1.1", "Host: t", "Content-Length: 14",
                       "Content-Length: 14") + b'{"payload": 1}', 400,
                 id="duplicate-content-length"),
    pytest.param(_head("POST /queues/q/messages HTTP/1.1", "Host: t", "Content-Length: -1")
                 + b'{"payload": 1}', 400, id="negative-content-length"),
    pytest.param(_head("POST /queues/q/messages HTTP/1.1", "Host: t",
                       "Content-Type: application/json", "Transfer-Encoding: chunked")
                 + b"zz\r\n{}\r\n0\r\n\r\n", 400, id="bad-chunk-size"),
    pytest.param(_head("GET /healthz?" + "a" * 100_000 + " HTTP/1.1", "Host: t"), 414,
                 id="100KB-url"),
    pytest.param(_head("G@T /healthz HTTP/1.1", "Host: t"), 400, id="bad-method"),
    pytest.param(_head("GET /healthz HTTP/9.9", "Host: t"), 400, id="bad-version"),
]


@pytest.mark.parametrize(("request_bytes", "status"), MALFORMED)
def test_a_request_the_parser_refuses_gets_the_error_envelope(
    served: Served, request_bytes: bytes, status: int
) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(request_bytes)
        got = read_response(sock)
    assert got.status == status
    assert got.headers["content-type"] == "application/json"
    assert got.headers["connection"] == "close" and got.closed
    error = json.loads(got.body)
    assert set(error) == {"error"} and set(error["error"]) == {"code", "message"}
    assert error["error"]["code"] == "InvalidRequest"
    assert error["error"]["message"].startswith(("the HTTP request is malformed",
                                                 "the request URL is longer than"))
    # The server goes on serving.
    assert httpx.get(f"{served.url}/healthz", timeout=10).status_code == 200


# --- headers and field paths ---------------------------------------------------------------------


def _stats(http: httpx.Client, queue: str) -> int:
    total: int = http.get(f"{queue}/stats").json()["enqueued_total"]
    return total


@pytest.mark.parametrize("keys", [["a", "b"], ["a", "a"]], ids=["different", "same"])
def test_two_idempotency_key_headers_are_a_validation_error(
    shared: httpx.Client, queue: str, keys: list[str]
) -> None:
    headers = [("Idempotency-Key", k) for k in keys]
    response = shared.post(f"{queue}/messages", json={"payload": 1}, headers=headers)
    error = envelope(response, 400, "ValidationError")
    assert "one Idempotency-Key header" in error["message"]
    assert error["details"][0]["field"] == "Idempotency-Key"
    assert _stats(shared, queue) == 0


@pytest.mark.parametrize("key", ["k" * 129, "tab\there", "caf\xc3\xa9".encode("latin-1"), ""],
                         ids=["too-long", "tab", "not-ascii", "empty"])
def test_a_bad_idempotency_key_header_says_what_a_key_may_be(
    shared: httpx.Client, queue: str, key: str | bytes
) -> None:
    response = shared.post(f"{queue}/messages", json={"payload": 1},
                           headers={"Idempotency-Key": key})
    error = envelope(response, 400, "ValidationError")
    assert error["message"] == "Idempotency-Key must be 1-128 printable ASCII characters"
    assert error["details"] == [{"field": "Idempotency-Key", "message": error["message"],
                                 "in": "header"}]
    assert _stats(shared, queue) == 0


def test_a_good_idempotency_key_header_still_deduplicates(
    shared: httpx.Client, queue: str
) -> None:
    key = {"Idempotency-Key": "order-42 ~!"}
    first = shared.post(f"{queue}/messages", json={"payload": 1}, headers=key)
    again = shared.post(f"{queue}/messages", json={"payload": 2}, headers=key)
    assert first.status_code == again.status_code == 201
    assert again.json() == {"message_id": first.json()["message_id"], "duplicate": True}


@pytest.mark.parametrize(("body", "field"), [
    ({"payload": 1, "attributes": {"ok": "v", "k" * 65: "v"}}, "attributes"),
    ({"messages": [{"payload": 1}, {"payload": 2, "attributes": {"k" * 65: "v"}}]},
     "messages[1].attributes"),
])
def test_a_too_long_attribute_key_names_the_field_and_the_key(
    shared: httpx.Client, queue: str, body: dict[str, Any], field: str
) -> None:
    error = envelope(shared.post(f"{queue}/messages", json=body), 400, "ValidationError")
    assert [d["field"] for d in error["details"]] == [field]
    assert "key 'kkkkkkkkkkkkkkkkkkk…'" in error["message"]
    assert "1 to 64 characters" in error["message"]
    assert "`key` in" not in error["message"]
    assert _stats(shared, queue) == 0


def test_the_local_client_names_the_attribute_key_too(tmp_path: Path) -> None:
    import sqew
    from sqew import errors

    with sqew.Client(str(tmp_path / "q.db")) as client:
        client.create_queue("q")
        with pytest.raises(errors.ValidationError) as caught:
            client.enqueue("q", 1, attributes={"k" * 65: "v"})
    assert caught.value.details is not None
    assert [d["field"] for d in caught.value.details] == ["attributes"]
    assert "key 'kkkkkkkkkkkkkkkkkkk…'" in caught.value.message


# --- numbers as JSON Schema reads them ------------------------------------------------------------
def test_an_integer_field_takes_a_whole_number_written_with_a_fraction(served: Served) -> None:
    """docs/openapi.yaml says "integer", which JSON Schema reads as any number without a
    fraction: 5.0 and 5e0 are 5. A payload keeps its text as sent."""
    with httpx.Client(base_url=served.url, timeout=30) as http:
        created = http.post("/queues", content=b'{"name": "floats", "max_attempts": 5.0,'
                            b' "visibility_ms": 3e4}', headers={"content-type": "application/json"})
        assert created.status_code == 201, created.text
        assert (created.json()["max_attempts"], created.json()["visibility_ms"]) == (5, 30_000)
        sent = http.post("/queues/floats/messages", content=b'{"payload": {"n": 2.0},'
                         b' "priority": 3.0}', headers={"content-type": "application/json"})
        assert sent.status_code == 201, sent.text
        polled = http.post("/queues/floats/poll")
        (m,) = polled.json()["messages"]
        assert m["priority"] == 3
        assert b'{"n": 2.0}' in polled.content, polled.text  # the payload's own text
        fraction = http.patch("/queues/floats", json={"max_attempts": 5.5})
        assert envelope(fraction, 400, "ValidationError")["details"][0]["field"] == "max_attempts"
