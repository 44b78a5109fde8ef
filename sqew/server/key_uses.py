"""When each API key was last used (``last_used_at``), written in batches by a background task.

The authenticator notes a key's use at most once a minute per key (``TOUCH_EVERY_S`` there);
``KeyUses`` writes the uses noted in one transaction every ``FLUSH_EVERY_S``, and what is left
when the server stops. The times are news, not state: a write that fails is logged and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqew import errors
from sqew.server.service_handle import ServiceHandle

log = logging.getLogger("sqew.server")

FLUSH_EVERY_S = 1.0
"""How often the uses to record are written."""


class KeyUses:
    """The uses of keys noted in one process, until written.

    Args:
        serving: the service once started (its clock and the write).
    """

    def __init__(self, serving: ServiceHandle) -> None:
        self._serving = serving
        self._used: dict[str, int] = {}  # key id -> ms, to record
        self._flusher: asyncio.Task[None] | None = None

    def note(self, key_id: str) -> None:
        """Record that ``key_id`` is used now (by the service's clock), with the next write."""
        self._used[key_id] = self._serving.service.clock()

    def start(self) -> None:
        """Start writing the uses in the background (on the server's loop, after startup)."""
        self._flusher = asyncio.get_running_loop().create_task(self._flush_forever())

    async def stop(self) -> None:
        """Stop the background task and write what is left."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        await self.flush()

    async def flush(self) -> None:
        """Write the noted ``last_used_at`` times now (one transaction)."""
        if not self._used:
            return
        used, self._used = list(self._used.items()), {}
        try:
            await self._serving.service.touch_keys(used)
        except errors.SqewError as exc:  # a busy or read-only database: the times are only news
            log.warning("recording when API keys were last used failed: %s", exc.message)

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY_S)
            await self.flush()
