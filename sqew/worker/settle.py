"""Settling a Worker's messages: acks and nacks in batches, on a thread of their own.

Handlers hand their outcomes over and go on; the settler sends whatever has gathered since
its last call as one ``ack_batch`` and one ``nack_batch``, so acks batch themselves under load
and cost no wait when idle. A message's slot frees when its settlement is answered: the
worker never holds more leases than it runs.
"""

from __future__ import annotations

import logging
import queue as queues
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqew import errors, models
from sqew.client.base import Client
from sqew.worker.held import Holdings

log = logging.getLogger("sqew.worker")

MAX_SETTLE = 1000
"""The most items one ack or nack call carries (the API's batch limit)."""

TRIES = 5
"""Calls of one batch before its leases are left to expire (and the messages delivered
again): a settlement that cannot be sent is retried after 0.1, 0.2, 0.4 and 0.8 s."""

ERROR_CHARS = 4096
"""The longest ``error`` a nack keeps (docs/rest.md)."""


@dataclass(frozen=True)
class Outcome:
    """What became of one handled message: ``ack``, or ``nack`` with ``error``
    (``dead_letter`` for a ``Reject``, ``delay_ms`` for a ``Retry`` that names one)."""

    message: models.LeasedMessage
    ack: bool
    error: str | None = None
    dead_letter: bool = False
    delay_ms: int | None = None


Counter = Callable[[str, int], None]
"""Adds to one of the worker's counts (``lost``: a settlement that found its lease gone)."""


class Settler(threading.Thread):
    """Sends the outcomes handed to ``put`` in batches until ``close`` (after the last)."""

    def __init__(self, client: Client, queue: str, holdings: Holdings, count: Counter) -> None:
        super().__init__(name=f"sqew-worker-settle-{queue}", daemon=True)
        self.client = client
        self.queue = queue
        self.holdings = holdings
        self.count = count
        self._inbox: queues.SimpleQueue[Outcome | None] = queues.SimpleQueue()

    def put(self, outcome: Outcome) -> None:
        self._inbox.put(outcome)

    def close(self) -> None:
        """Settle what was put, then end (``join`` to wait for it)."""
        self._inbox.put(None)

    def run(self) -> None:
        closing = False
        while not closing:
            first = self._inbox.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < MAX_SETTLE:
                try:
                    more = self._inbox.get_nowait()
                except queues.Empty:
                    break
                if more is None:
                    closing = True
                    break
                batch.append(more)
            self._settle(batch)

    def _settle(self, batch: list[Outcome]) -> None:
        acks = [o for o in batch if o.ack]
        nacks = [o for o in batch if not o.ack]
        try:
            if acks:
                self._send(acks, lambda: self.client.ack_batch(
                    self.queue, [(o.message.id, o.message.token) for o in acks]))
            if nacks:
                self._send(nacks, lambda: self.client.nack_batch(
                    self.queue, [_nack_item(o) for o in nacks]))
        finally:
            self.holdings.let_go([o.message.id for o in batch])

    def _send(self, outcomes: list[Outcome],
              call: Callable[[], list[models.ItemResult]]) -> None:
        verb = "ack" if outcomes[0].ack else "nack"
        for attempt in range(TRIES):
            try:
                results = call()
            except Exception as exc:  # a SqewError, or a client closed under the worker
                if attempt + 1 == TRIES or not _transient(exc):
                    log.error("%s of %d messages failed (their leases will expire and they "
                              "will be delivered again): %s", verb, len(outcomes), exc)
                    self.count("lost", len(outcomes))
                    return
                time.sleep(0.1 * 2 ** attempt)
                continue
            for outcome, result in zip(outcomes, results, strict=True):
                if result.status in errors.ITEM_ERRORS:
                    log.warning("message %d: %s found the lease %s (another consumer holds "
                                "it, or it is gone)", outcome.message.id, verb,
                                result.status.replace("_", " "))
                    self.count("lost", 1)
            return


def _nack_item(outcome: Outcome) -> dict[str, Any]:
    item: dict[str, Any] = {"id": outcome.message.id, "token": outcome.message.token,
                            "error": (outcome.error or "")[:ERROR_CHARS] or None}
    if outcome.dead_letter:
        item["dead_letter"] = True
    elif outcome.delay_ms is not None:
        item["delay_ms"] = outcome.delay_ms
    return item


def _transient(exc: Exception) -> bool:
    """Whether a call that failed so may succeed if sent again."""
    return isinstance(exc, errors.Unavailable | errors.Overloaded | errors.InternalError)
