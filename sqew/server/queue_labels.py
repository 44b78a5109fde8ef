"""Which names label the per-queue counters of a process: only queues that exist.

A refusal names the queue of its path (``/queues/{q}/…``), whatever the client wrote there,
and a client without any key may write anything: labels taken from paths as they come would
let anyone grow ``/metrics`` without bound and use up the labels that real queues need. So a
name becomes a label once it is known to be a queue:

- from a scrape (the names ``QueueService.all_stats`` read: ``settle``);
- from a look-up of every queue's name, at most once per ``LOOKUP_EVERY_S``, made when a
  refusal names a queue not known yet;
- from a success on it (``add``: an enqueue answered with duplicates).

A refusal naming a queue not known yet is held (``hold``) until the next look-up or scrape,
then counted under its name if the queue exists, else under ``UNKNOWN``. At most
``MAX_PENDING`` distinct (name, reason) pairs are held; beyond them a refusal is counted under
``UNKNOWN`` at once. Names stay known while the process runs (a deleted queue keeps its
label), up to ``size`` of them; past that, a queue not known yet is counted under ``""``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from sqew import errors

UNKNOWN = "_unknown"
"""The label of refusals naming a queue that does not exist (no queue name starts with
``_``)."""
LOOKUP_EVERY_S = 1.0
"""The least time between two look-ups of the queues' names."""
MAX_PENDING = 10_000
"""Distinct (name, reason) refusals held while their names are looked up."""

log = logging.getLogger("sqew.server")

Count = Callable[[str, str, int], None]
"""Counts ``n`` refusals under a queue label and a reason."""
Lookup = Callable[[], Awaitable[Iterable[str]]]
"""Every queue's name, from the database."""


class QueueLabels:
    """The queue labels of one process's counters (see the module docstring).

    Args:
        count: counts refusals once their label is known.
        size: most names kept as labels.
    """

    def __init__(self, count: Count, size: int) -> None:
        self._count = count
        self._size = size
        self._known: set[str] = set()
        self._pending: dict[tuple[str, str], int] = {}
        self._lookup: Lookup | None = None
        self._task: asyncio.Task[None] | None = None
        self._looked_up = -LOOKUP_EVERY_S  # time.monotonic() of the last look-up

    def label(self, queue: str | None) -> str | None:
        """The label of ``queue``: ``""`` for none (or past ``size``), the name of a known
        queue; None when it is not known yet (``hold`` the refusal)."""
        if not queue:
            return ""
        if queue in self._known:
            return queue
        return "" if len(self._known) >= self._size else None

    def add(self, queue: str) -> str:
        """``queue`` exists (a request on it succeeded): its label."""
        if queue not in self._known and len(self._known) < self._size:
            self._known.add(queue)
        return queue if queue in self._known else ""

    def hold(self, queue: str, reason: str) -> None:
        """Count a refusal naming ``queue`` (not known yet) once its name is looked up."""
        key = (queue, reason)
        if key not in self._pending and len(self._pending) >= MAX_PENDING:
            self._count(UNKNOWN, reason, 1)
            return
        self._pending[key] = self._pending.get(key, 0) + 1
        self._look_up_soon()

    def settle(self, names: Iterable[str]) -> None:
        """``names`` are every queue there is: learn them, and count what was held."""
        existing = set(names)
        for name in existing:
            self.add(name)
        pending, self._pending = self._pending, {}
        for (queue, reason), n in pending.items():
            if queue in self._known:
                self._count(queue, reason, n)
            else:  # a queue past ``size``, or none
                self._count("" if queue in existing else UNKNOWN, reason, n)

    # --- looking names up -----------------------------------------------------------------------
    def look_up_with(self, lookup: Lookup) -> None:
        """Read the queues' names with ``lookup`` when a refusal names one not known yet
        (set once the database is open)."""
        self._lookup = lookup
        if self._pending:
            self._look_up_soon()

    def _look_up_soon(self) -> None:
        if self._lookup is None or (self._task is not None and not self._task.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the server's loop: the next scrape settles them
            return
        self._task = loop.create_task(self._look_up(self._lookup))

    async def _look_up(self, lookup: Lookup) -> None:
        while self._pending:
            wait = self._looked_up + LOOKUP_EVERY_S - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._looked_up = time.monotonic()
            try:
                names = await lookup()
            except errors.SqewError as exc:  # the database is away: try again later
                log.debug("reading the queues' names for metrics failed: %s", exc.message)
                continue
            self.settle(names)

    async def close(self) -> None:
        """Stop looking names up (what is still held is not counted)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
