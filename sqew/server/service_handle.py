"""What the runtime lends the parts it owns: the open service and its database threads.

``sqew.server.runtime.Runtime`` builds the authenticator and the background timer, then opens
the service on startup. They reach the service through this protocol, which the runtime
satisfies, rather than through the runtime itself: a part depends on what it uses, and the
runtime stays the one module that knows them all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from sqew.core.service import QueueService

T = TypeVar("T")


class ServiceHandle(Protocol):
    """The service once the server has started, and the threads for blocking calls."""

    @property
    def service(self) -> QueueService:
        """The open service (``sqew.errors.Unavailable`` before startup or after shutdown)."""
        ...

    def offload(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Run a blocking call on the database threads, with the caller's context variables."""
        ...
