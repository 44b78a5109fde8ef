"""uvicorn's HTTP/1.1 protocol, answering requests it cannot parse with SPEC's envelope.

A request the HTTP parser rejects (a control character in a header, a duplicate or negative
``Content-Length``, a bad chunk size, a URL too long to parse) never reaches the app: uvicorn
answers it itself, with ``text/plain`` "Invalid HTTP request received.". ``HttpProtocol``
answers ``{"error": {"code": "InvalidRequest", "message": ...}}`` instead, as JSON, with 400
(414 for a URL too long) and ``Connection: close``, as uvicorn does.

It is uvicorn's httptools protocol (what its ``auto`` picks: ``uvicorn[standard]`` installs
httptools). uvicorn calls ``send_400_response`` inside its ``except`` clause for the parser's
error, so ``sys.exc_info()`` there is that error: it decides the status and the message.
"""

from __future__ import annotations

import sys
from http import HTTPStatus

import httptools
import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from sqew import errors

MAX_URL_BYTES = 65535
"""The longest URL httptools parses (it counts offsets in 16 bits)."""


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing unparsable requests with SPEC's envelope."""

    def send_400_response(self, msg: str) -> None:
        url: bytes = getattr(self, "url", b"")  # set once the parser has begun a request
        status, message = refusal(sys.exc_info()[1], url)
        self.transport.write(response(status, message, self.server_state.default_headers))
        self.transport.close()


def refusal(exc: BaseException | None, url: bytes) -> tuple[int, str]:
    """The status and message refusing a request the parser failed on with ``exc``.

    Args:
        exc: the parser's error (None if unknown).
        url: the request's URL as read so far.
    """
    if isinstance(exc, httptools.HttpParserCallbackError):
        exc = exc.__context__  # raised in uvicorn's callback, e.g. while parsing the URL
    if len(url) > MAX_URL_BYTES:
        return 414, f"the request URL is longer than {MAX_URL_BYTES} bytes"
    if isinstance(exc, httptools.HttpParserError):
        return 400, f"the HTTP request is malformed: {exc}"
    return 400, "the HTTP request is malformed"


def response(status: int, message: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A complete HTTP/1.1 response carrying ``InvalidRequest`` with ``message``, closing.

    Args:
        status: the HTTP status.
        message: the error's message.
        default_headers: the server's headers for every response (``date``, …).
    """
    body = msgspec.json.encode(errors.InvalidRequest(message).to_dict())
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n".encode()]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head += [b"content-type: application/json\r\n",
             b"content-length: " + str(len(body)).encode() + b"\r\n",
             b"connection: close\r\n\r\n"]
    return b"".join(head) + body
