"""``Client.stream``: leased messages as they come, at most ``max_in_flight`` unacknowledged
(docs/consumers.md#the-stream).

``MessageStream`` is the iterator every client returns (``AsyncMessageStream`` every
``AsyncClient``). Over HTTP (``SseStream``, ``AsyncSseStream``) it reads the server's
``GET /queues/{q}/stream`` (server-sent events); on a database (``PollStream``,
``AsyncPollStream``) it is built on long polls, each asking for no more than the free
slots. Either way it ends only when closed (``close()``/``aclose()``, the ``with`` block),
and closing gives back the leases it still holds: the messages are ready again at once, their
attempts not counted. Acks and nacks go through the client's usual calls.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

import msgspec

from sqew import errors, models, payloads
from sqew.core.rules import check_range

if TYPE_CHECKING:
    import httpx

HELD_RECHECK_S = 0.25
"""At its bound, a ``PollStream`` asks this often which of its leases are still held (acks
from other threads or processes tell it nothing)."""
_DECODE_LEASED = msgspec.json.Decoder(models.LeasedMessage)
_DECODE_RAW = msgspec.json.Decoder(payloads.RawPayload)
_ENVELOPE = msgspec.json.Decoder(dict[str, dict[str, str]])


def check_arguments(max_in_flight: int, visibility_ms: int | None) -> None:
    """Refuse a ``max_in_flight`` or ``visibility_ms`` out of range (``ValidationError``)."""
    check_range("max_in_flight", max_in_flight, 1, models.MAX_STREAM_IN_FLIGHT)
    if visibility_ms is not None:
        check_range("visibility_ms", visibility_ms, 0, models.MAX_VISIBILITY_MS)


class MessageStream(abc.ABC, Iterator[models.LeasedMessage]):
    """An iterator of leased messages of one queue, as they become ready; a context manager
    that closes it (giving back the leases it holds)."""

    def __init__(self, queue: str, max_in_flight: int) -> None:
        self.queue = queue
        self.max_in_flight = max_in_flight
        self.closed = False

    def __iter__(self) -> MessageStream:
        return self

    def __enter__(self) -> MessageStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @abc.abstractmethod
    def __next__(self) -> models.LeasedMessage:
        """The next leased message, waiting for one as long as it takes."""

    @abc.abstractmethod
    def close(self) -> None:
        """End the stream; the leases it still holds are given back at once."""


class _Events:
    """The server's events, fed its lines one by one."""

    def __init__(self) -> None:
        self.kind, self.data = "message", list[str]()

    def feed(self, line: str) -> tuple[str, str] | None:
        """The ``(kind, data)`` of an event that ``line`` ends, else None."""
        if line == "":  # an event ends
            event = (self.kind, "\n".join(self.data)) if self.data else None
            self.kind, self.data = "message", []
            return event
        if not line.startswith(":"):  # (a comment: the stream's open or keep-alive lines)
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                self.data.append(value)
            elif field == "event":
                self.kind = value
        return None


def _message(kind: str, data: str) -> models.LeasedMessage:
    """The leased message an event carries; an ``error`` event raises its error."""
    raw = data.encode()
    if kind == "error":
        try:
            body = _ENVELOPE.decode(raw)["error"]
            error = errors.by_code(body["code"])(body["message"])
        except (msgspec.MsgspecError, KeyError) as exc:
            raise errors.InternalError(f"unexpected stream event: {data[:200]}") from exc
        raise error
    try:
        message = _DECODE_LEASED.decode(raw)
        payloads.keep_text(message, bytes(_DECODE_RAW.decode(raw).payload).decode())
    except msgspec.MsgspecError as exc:
        raise errors.InternalError(f"unexpected stream event: {exc}") from exc
    return message


def _broke(queue: str, exc: Exception | None) -> errors.Unavailable:
    if exc is None:
        return errors.Unavailable(f"the server ended the stream of {queue!r}")
    return errors.Unavailable(f"the stream of {queue!r} broke: {exc}")


class SseStream(MessageStream):
    """A server's stream, read from an open ``text/event-stream`` response."""

    def __init__(self, queue: str, max_in_flight: int, response: httpx.Response) -> None:
        super().__init__(queue, max_in_flight)
        self._response = response
        self._lines = response.iter_lines()
        self._events = _Events()

    def __next__(self) -> models.LeasedMessage:
        if self.closed:
            raise StopIteration
        try:
            for line in self._lines:
                event = self._events.feed(line)
                if event is not None:
                    return _message(*event)
            broke = _broke(self.queue, None)
        except errors.SqewError:
            self.close()
            raise
        except Exception as exc:  # the connection broke, or timed out
            self.close()
            raise _broke(self.queue, exc) from exc
        self.close()
        raise broke

    def close(self) -> None:
        """Close the connection: the server gives back the leases of this stream."""
        if not self.closed:
            self.closed = True
            self._response.close()


class _Slots:
    """What a stream on long polls holds: its leases (as far as it knows: an ack from another
    thread or process tells it nothing until it asks) and the messages leased but not yet
    iterated. At its bound it asks which leases are still held; below it, a stale count only
    asks for fewer messages."""

    def __init__(self, max_in_flight: int, clock: Callable[[], int]) -> None:
        self.max_in_flight = max_in_flight
        self._clock = clock
        self.held: dict[int, tuple[str, int]] = {}
        """id -> (token, lease end)."""
        self.ready: deque[models.LeasedMessage] = deque()

    def full(self) -> bool:
        return len(self.held) >= self.max_in_flight

    def leases(self) -> list[tuple[int, str]]:
        return [(i, token) for i, (token, _) in self.held.items()]

    def still_held(self, ends: dict[int, int]) -> None:
        """Keep the leases ``ends`` names (id -> lease end), the others were settled."""
        self.held = {i: (self.held[i][0], end) for i, end in ends.items()}

    def free(self) -> int:
        """How many messages the next poll may ask for."""
        return min(self.max_in_flight - len(self.held), models.MAX_POLL_BATCH)

    def leased(self, messages: list[models.LeasedMessage]) -> None:
        for m in messages:
            self.held[m.id] = (m.token, m.lease_expires_at)
        self.ready.extend(messages)

    def pause_s(self) -> float:
        """At the bound: how long to wait before asking again (a lease may be settled, or
        end)."""
        ends = min(end for _, end in self.held.values())
        return min(HELD_RECHECK_S, max(0.0, (ends - self._clock()) / 1000))

    def give_up(self) -> list[tuple[int, str]]:
        """Forget everything; the leases to give back."""
        leases = self.leases()
        self.held, self.ready = {}, deque()
        return leases


class PollStream(MessageStream):
    """A stream on long polls (a database client): each poll asks for the free slots only.

    Args:
        queue, max_in_flight, visibility_ms: as ``Client.stream``.
        poll: the client's ``poll``.
        held: of ``(id, token)`` leases, those still held, id -> lease end (the service's).
        give_back: gives ``(id, token)`` leases back at once (the service's).
        clock: the service's clock (epoch ms).
        wait_ms: each poll's wait.
    """

    def __init__(
        self, queue: str, max_in_flight: int, visibility_ms: int | None, *,
        poll: Callable[..., list[models.LeasedMessage]],
        held: Callable[[Sequence[tuple[int, str]]], dict[int, int]],
        give_back: Callable[[Sequence[tuple[int, str]]], None],
        clock: Callable[[], int], wait_ms: int = 5000,
    ) -> None:
        super().__init__(queue, max_in_flight)
        self.visibility_ms = visibility_ms
        self._poll, self._held, self._give_back = poll, held, give_back
        self._wait_ms = wait_ms
        self._slots = _Slots(max_in_flight, clock)

    def __next__(self) -> models.LeasedMessage:
        slots = self._slots
        while not slots.ready:
            if self.closed:
                raise StopIteration
            if slots.full():
                slots.still_held(self._held(slots.leases()))
            if slots.free() > 0:
                slots.leased(self._poll(self.queue, batch=slots.free(), wait_ms=self._wait_ms,
                                        visibility_ms=self.visibility_ms))
            else:
                time.sleep(slots.pause_s())
        return slots.ready.popleft()

    def close(self) -> None:
        """Give back the leases still held (those not yet iterated too)."""
        if not self.closed:
            self.closed = True
            leases = self._slots.give_up()
            if leases:
                self._give_back(leases)


class AsyncMessageStream(abc.ABC, AsyncIterator[models.LeasedMessage]):
    """``MessageStream`` on asyncio: an async iterator of leased messages, and an async
    context manager that closes it (``aclose``), giving back the leases it holds."""

    def __init__(self, queue: str, max_in_flight: int) -> None:
        self.queue = queue
        self.max_in_flight = max_in_flight
        self.closed = False

    def __aiter__(self) -> AsyncMessageStream:
        return self

    async def __aenter__(self) -> AsyncMessageStream:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    @abc.abstractmethod
    async def __anext__(self) -> models.LeasedMessage:
        """The next leased message, waiting for one as long as it takes."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """End the stream; the leases it still holds are given back at once."""


class AsyncSseStream(AsyncMessageStream):
    """``SseStream`` on asyncio."""

    def __init__(self, queue: str, max_in_flight: int, response: httpx.Response) -> None:
        super().__init__(queue, max_in_flight)
        self._response = response
        self._lines = response.aiter_lines()
        self._events = _Events()

    async def __anext__(self) -> models.LeasedMessage:
        if self.closed:
            raise StopAsyncIteration
        try:
            async for line in self._lines:
                event = self._events.feed(line)
                if event is not None:
                    return _message(*event)
            broke = _broke(self.queue, None)
        except errors.SqewError:
            await self.aclose()
            raise
        except Exception as exc:  # the connection broke, or timed out
            await self.aclose()
            raise _broke(self.queue, exc) from exc
        await self.aclose()
        raise broke

    async def aclose(self) -> None:
        """Close the connection: the server gives back the leases of this stream."""
        if not self.closed:
            self.closed = True
            await self._response.aclose()


class AsyncPollStream(AsyncMessageStream):
    """``PollStream`` on asyncio: ``poll``, ``held`` and ``give_back`` are coroutines."""

    def __init__(
        self, queue: str, max_in_flight: int, visibility_ms: int | None, *,
        poll: Callable[..., Awaitable[list[models.LeasedMessage]]],
        held: Callable[[Sequence[tuple[int, str]]], Awaitable[dict[int, int]]],
        give_back: Callable[[Sequence[tuple[int, str]]], Awaitable[None]],
        clock: Callable[[], int], wait_ms: int = 5000,
    ) -> None:
        super().__init__(queue, max_in_flight)
        self.visibility_ms = visibility_ms
        self._poll, self._held, self._give_back = poll, held, give_back
        self._wait_ms = wait_ms
        self._slots = _Slots(max_in_flight, clock)

    async def __anext__(self) -> models.LeasedMessage:
        slots = self._slots
        while not slots.ready:
            if self.closed:
                raise StopAsyncIteration
            if slots.full():
                slots.still_held(await self._held(slots.leases()))
            if slots.free() > 0:
                slots.leased(await self._poll(self.queue, batch=slots.free(),
                                              wait_ms=self._wait_ms,
                                              visibility_ms=self.visibility_ms))
            else:
                await asyncio.sleep(slots.pause_s())
        return slots.ready.popleft()

    async def aclose(self) -> None:
        """Give back the leases still held (those not yet iterated too)."""
        if not self.closed:
            self.closed = True
            leases = self._slots.give_up()
            if leases:
                await self._give_back(leases)
