"""Opening a server's message stream (``GET /queues/{q}/stream``) for ``HttpClient.stream``.

The events are read by ``sqew.client.streams.SseStream`` with httpx's streaming response: the
server's events are simple (one ``data:`` line of JSON, an ``id:``, comments), so a few lines
read them and no SSE library is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from sqew import errors, telemetry
from sqew.client import tls
from sqew.client.streams import SseStream

if TYPE_CHECKING:
    from sqew.client.http import HttpClient

READ_TIMEOUT_S = 60.0
"""A stream that sends nothing for this long (the server sends a comment every 15 s) is
taken for broken (``Unavailable``)."""


def open_sse(
    client: HttpClient, path: str, queue: str, max_in_flight: int, visibility_ms: int | None,
) -> SseStream:
    """Open the stream at ``path`` of ``client``'s server; its error answer raised as the
    SqewError it stands for, an unreachable server as ``Unavailable``."""
    from sqew.client.http import _error

    headers: dict[str, Any] = {**client._headers, "accept": "text/event-stream"}
    telemetry.inject_headers(headers)
    params: dict[str, Any] = {"max_in_flight": max_in_flight}
    if visibility_ms is not None:
        params["visibility_ms"] = visibility_ms
    http = client._http
    request = http.build_request(
        "GET", client._url(path), params=params, headers=headers,
        timeout=httpx.Timeout(client.timeout, read=READ_TIMEOUT_S))
    try:
        response = http.send(request, stream=True)
    except httpx.TimeoutException as exc:
        raise errors.Unavailable(
            f"the server at {client.base_url} did not answer in time ({type(exc).__name__})"
        ) from exc
    except httpx.TransportError as exc:
        if tls.certificate_error(exc):
            raise errors.Unavailable(
                f"cannot verify the TLS certificate of {client.base_url}: {exc} (for a "
                "server with a private CA, give its CA certificate: ca_cert, --ca-cert)"
            ) from exc
        raise errors.Unavailable(f"cannot reach server at {client.base_url}: {exc}") from exc
    if response.status_code >= 400:
        try:
            response.read()
        finally:
            response.close()
        raise _error(response)
    return SseStream(queue, max_in_flight, response)
