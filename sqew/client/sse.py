"""Opening a server's message stream (``GET /queues/{q}/stream``) for the HTTP clients'
``stream``.

The events are read by ``sqew.client.streams`` (``SseStream``, ``AsyncSseStream``) with
httpx's streaming response: the server's events are simple (one ``data:`` line of JSON, an
``id:``, comments), so a few lines read them and no SSE library is needed.
"""

from __future__ import annotations

import httpx

from sqew.client.http_wire import Call, Prepared, Wire
from sqew.client.streams import AsyncSseStream, SseStream

READ_TIMEOUT_S = 60.0
"""A stream that sends nothing for this long (the server sends a comment every 15 s) is
taken for broken (``Unavailable``)."""


def _request(http: httpx.Client | httpx.AsyncClient, r: Prepared) -> httpx.Request:
    return http.build_request(r.method, r.url, headers=r.headers,
                              timeout=httpx.Timeout(r.timeout, read=READ_TIMEOUT_S))


def open_sse(http: httpx.Client, wire: Wire, call: Call[None], queue: str,
             max_in_flight: int) -> SseStream:
    """Open the stream ``call`` asks for; its error answer raised as the SqewError it stands
    for, an unreachable server as ``Unavailable``."""
    try:
        response = http.send(_request(http, wire.prepare(call, http)), stream=True)
    except httpx.HTTPError as exc:
        raise wire.failed(exc) from exc
    if response.status_code >= 400:
        try:
            response.read()
        finally:
            response.close()
        wire.answer(call, response)  # (raises its error)
    return SseStream(queue, max_in_flight, response)


async def open_async_sse(http: httpx.AsyncClient, wire: Wire, call: Call[None], queue: str,
                         max_in_flight: int) -> AsyncSseStream:
    """``open_sse`` on asyncio."""
    try:
        response = await http.send(_request(http, wire.prepare(call, http)), stream=True)
    except httpx.HTTPError as exc:
        raise wire.failed(exc) from exc
    if response.status_code >= 400:
        try:
            await response.aread()
        finally:
            await response.aclose()
        wire.answer(call, response)  # (raises its error)
    return AsyncSseStream(queue, max_in_flight, response)
