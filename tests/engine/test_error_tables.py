"""``sqew.errors`` holds the one table from HTTP status to error class and the one from an
ack/nack item's status to its error; the HTTP client reads the former for an answer without
sqew's envelope (a proxy's), checked here against a real plain HTTP server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import sqew
from sqew import errors


def test_status_table() -> None:
    expected = {
        400: errors.InvalidRequest, 401: errors.Unauthorized, 403: errors.Forbidden,
        404: errors.NotFound, 405: errors.MethodNotAllowed, 409: errors.InvalidRequest,
        413: errors.PayloadTooLarge, 418: errors.InvalidRequest, 429: errors.Overloaded,
        500: errors.InternalError, 502: errors.Unavailable, 503: errors.Unavailable,
        504: errors.Unavailable, 599: errors.InternalError,
    }
    assert {status: errors.by_status(status) for status in expected} == expected


def test_item_status_table() -> None:
    lost, gone = errors.for_item("lease_lost", 7), errors.for_item("not_found", 8)
    assert (type(lost), type(gone)) == (errors.LeaseLost, errors.MessageNotFound)
    assert "message 7" in lost.message and "message 8" in gone.message
    assert set(errors.ITEM_ERRORS) == {"lease_lost", "not_found"}
    custom = errors.for_item("lease_lost", 7, "2 of 3 acks failed")
    assert (type(custom), custom.message) == (errors.LeaseLost, "2 of 3 acks failed")


class _Plain(BaseHTTPRequestHandler):
    """Answers ``GET /<status>/healthz`` with that status and a plain-text body."""

    def do_GET(self) -> None:
        status = int(self.path.strip("/").split("/")[0])
        body = b"not sqew speaking"
        self.send_response(status)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def plain_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("status", [404, 418, 429, 502, 500])
def test_http_client_maps_a_bare_status_through_the_table(plain_server: str, status: int) -> None:
    with sqew.Client(f"{plain_server}/{status}") as client, pytest.raises(
        errors.SqewError
    ) as caught:
        client.health()
    assert type(caught.value) is errors.by_status(status)
    assert f"HTTP {status}" in caught.value.message
