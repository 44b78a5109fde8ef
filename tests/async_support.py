"""The contract suite's view of ``sqew.AsyncClient``: a synchronous facade over it.

``OnLoop`` is a real asyncio event loop running in a thread of its own (one per target);
``SyncFacade`` offers ``sqew.Client``'s methods by running each of the AsyncClient's
coroutines on that loop and waiting for its result in the calling thread, so the contract
tests, written against ``sqew.Client``, run unchanged on the AsyncClient (``async-local``,
``async-http`` in ``tests/targets.py``). Calls from several test threads at once (a long poll
in one, an enqueue in another) are concurrent tasks on the one loop, as in an asyncio app.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import random
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import msgspec
from targets import ServerThread, Store, Target, server_settings

import sqew
from sqew.core.clock import Clock
from sqew.core.service import QueueService

T = TypeVar("T")
CALL_TIMEOUT_S = 120


class OnLoop:
    """An event loop in a daemon thread: ``run(coro)`` runs a coroutine there and waits."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name=f"async-target-{name}")
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """The result of ``coro``, run on the loop (its exception re-raised here)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(CALL_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def stop(self) -> None:
        """Stop the loop and its thread (after the clients on it are closed)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


class SyncFacade:
    """``sqew.Client``'s methods over ``client`` (an AsyncClient) on ``on``'s loop.

    A coroutine method runs on the loop; ``export`` (an async iterator) is iterated a page at
    a time there; ``close`` is ``aclose``; any other attribute is the AsyncClient's own.
    """

    def __init__(self, client: sqew.AsyncClient, on: OnLoop) -> None:
        self.aclient = client
        self._on = on

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.aclient, name)
        if inspect.iscoroutinefunction(value):
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._on.run(value(*args, **kwargs))

            return call
        return value

    def export(self, queue: str, **kwargs: Any) -> Iterator[Any]:
        pages = self.aclient.export(queue, **kwargs)
        while True:
            try:
                yield self._on.run(_next(pages))
            except StopAsyncIteration:
                return

    def stream(self, queue: str, **kwargs: Any) -> SyncStream:
        return SyncStream(self._on.run(self.aclient.stream(queue, **kwargs)), self._on)

    def close(self) -> None:
        self._on.run(self.aclient.aclose())


class SyncStream:
    """``Client.stream``'s iterator over an ``AsyncMessageStream`` on ``on``'s loop."""

    def __init__(self, stream: Any, on: OnLoop) -> None:
        self.astream = stream
        self._on = on

    def __getattr__(self, name: str) -> Any:
        return getattr(self.astream, name)

    def __iter__(self) -> SyncStream:
        return self

    def __next__(self) -> Any:
        try:
            return self._on.run(_next(self.astream))
        except StopAsyncIteration:
            raise StopIteration from None

    def __enter__(self) -> SyncStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._on.run(self.astream.aclose())


async def _next(pages: Any) -> Any:
    return await pages.__anext__()


# --- the client kinds of the async targets (``tests/targets.py``) -----------------------------
def local(name: str, store: Store, clock: Clock, *, reap_interval_ms: int) -> Target:
    """An AsyncClient on the store (an ``AsyncLocalClient``: the service on the target's
    loop, on ``clock``), through a facade."""
    on = OnLoop(name)
    rng = random.Random()

    def make(other_clock: Clock, seeded: random.Random | None = None) -> SyncFacade:
        return SyncFacade(sqew.AsyncClient(store.url, clock=other_clock, rng=seeded,
                                           reap_interval_ms=reap_interval_ms), on)

    def connect(other_clock: Clock) -> sqew.Client:
        extra = make(other_clock)
        target._cleanups.append(extra.close)
        return extra  # type: ignore[return-value]

    client = make(clock, rng)
    service = on.run(_started(client.aclient))
    target = Target(name, client, clock, connect,  # type: ignore[arg-type]
                    url=store.url, sqlite_path=store.sqlite_path, service=service, rng=rng)
    target._cleanups.extend([on.stop, client.close])
    return target


async def _started(client: sqew.AsyncClient) -> QueueService:
    service: QueueService = client.service  # type: ignore[attr-defined]
    return service


def http(name: str, store: Store, clock: Clock, *, reap_interval_ms: int) -> Target:
    """An AsyncClient (``AsyncHttpClient``) to a real server on the store, as the ``http``
    kind's, through a facade."""
    settings = msgspec.structs.replace(server_settings(store.url),
                                       reap_interval_ms=reap_interval_ms)
    rng = random.Random()
    server = ServerThread(settings, clock, reaper_timer=False, rng=rng)
    on = OnLoop(name)

    def open_(key: str | None = None) -> Any:
        return SyncFacade(sqew.AsyncClient(server.url, api_key=key), on)

    def connect(other_clock: Clock) -> sqew.Client:
        extra = open_()  # one service, one clock: the server's
        target._cleanups.append(extra.close)
        return extra  # type: ignore[no-any-return]

    client = open_()
    target = Target(name, client, clock, connect, url=store.url,
                    sqlite_path=store.sqlite_path, service=server.app.state.runtime.service,
                    rng=rng, stops_slowly=True, open_with_key=open_)
    target._cleanups.extend([server.stop, on.stop, client.close])
    return target
