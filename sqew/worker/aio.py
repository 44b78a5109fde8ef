"""Where a Worker runs an ``async def`` handler: an event loop on a thread of its own.

The poll loop, the settler and the keeper stay the plain worker's (threads, a synchronous
client), so holding a lease, heartbeats and the drain are the same for both kinds of
handler; only the handler's call differs: a task on this loop instead of a handler thread.
The poll asks for no more messages than there are free slots, so at most ``concurrency``
handler tasks run at once.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
STOP_S = 10.0
"""How long closing waits for the loop's thread to end."""


def is_async(handler: object) -> bool:
    """Whether ``handler`` is an ``async def`` function, or an object whose ``__call__`` is."""
    call = type(handler).__call__
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


class HandlerLoop:
    """An event loop running in a daemon thread, on which handler coroutines run as tasks."""

    def __init__(self, queue: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"sqew-worker-{queue}-loop")
        self._thread.start()

    def start(self, coro: Coroutine[Any, Any, T], then: Callable[[T], None]) -> None:
        """Run ``coro`` on the loop; ``then`` gets its result (on the loop's thread).

        ``coro`` must return rather than raise (the worker's handler wrapper does).
        """
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        future.add_done_callback(lambda f: None if f.cancelled() else then(f.result()))

    def close(self, *, wait: bool) -> None:
        """Stop the loop once its tasks are done (``wait``); else leave it running for the
        handlers still under way (daemon: it ends with the process)."""
        if not wait:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(STOP_S)
        if not self._thread.is_alive():
            self._loop.close()
