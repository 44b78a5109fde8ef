"""The leases a Worker holds, and the thread that keeps them alive (batched heartbeats).

A message is held from the poll that leased it until its ack or nack is answered. While held,
its lease is extended every third of the lease's length, all held messages that are due in
one ``extend_leases`` call, so a handler never needs to know ``visibility_ms``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqew import models
from sqew.client.base import Client

log = logging.getLogger("sqew.worker")

MAX_EXTENDS = 1000
"""The most leases one ``extend_leases`` call extends (the API's batch limit)."""


@dataclass
class Lease:
    """One held message and when its lease is next extended (``time.monotonic`` seconds)."""

    message: models.LeasedMessage
    renew_at: float
    lost: bool = False


@dataclass
class Holdings:
    """The held leases, shared by the poll loop, the handlers, the settler and the keeper.

    ``changed`` is notified whenever a lease is let go (a slot frees) or the worker stops.
    """

    capacity: int
    leases: dict[int, Lease] = field(default_factory=dict)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def count(self) -> int:
        with self.changed:
            return len(self.leases)

    def add(self, messages: list[models.LeasedMessage], renew_in_s: float) -> None:
        at = time.monotonic() + renew_in_s
        with self.changed:
            for m in messages:
                self.leases[m.id] = Lease(m, at)

    def let_go(self, ids: list[int]) -> None:
        with self.changed:
            for msg_id in ids:
                self.leases.pop(msg_id, None)
            self.changed.notify_all()

    def wait_for_room(self, stopping: threading.Event) -> int:
        """Block until a slot is free (or the worker stops); the number of free slots."""
        with self.changed:
            while len(self.leases) >= self.capacity and not stopping.is_set():
                self.changed.wait()
            return self.capacity - len(self.leases)

    def wait_empty(self, deadline: float, given_up: threading.Event) -> bool:
        """Block until nothing is held, ``deadline`` (monotonic) passes or ``given_up`` is
        set; whether nothing is held."""
        with self.changed:
            while self.leases and not given_up.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(min(left, 0.5))
            return not self.leases

    def wake(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def due(self, now: float, slack: float) -> list[Lease]:
        with self.changed:
            return [lease for lease in self.leases.values()
                    if not lease.lost and lease.renew_at <= now + slack]

    def holds(self, lease: Lease) -> bool:
        """Whether ``lease`` is still held (its ack or nack not answered yet)."""
        with self.changed:
            return self.leases.get(lease.message.id) is lease

    def next_due(self) -> float | None:
        with self.changed:
            times = [lease.renew_at for lease in self.leases.values() if not lease.lost]
        return min(times) if times else None


class Keeper(threading.Thread):
    """Extends each held lease to ``lease_ms`` from now every ``lease_ms / 3``, the due ones
    in one call; marks as lost a lease the queue no longer knows (``lease_lost``,
    ``not_found``)."""

    def __init__(self, client: Client, queue: str, holdings: Holdings, lease_ms: int,
                 on_extended: Callable[[int], None]) -> None:
        super().__init__(name=f"sqew-worker-heartbeat-{queue}", daemon=True)
        self.client = client
        self.queue = queue
        self.holdings = holdings
        self.lease_ms = lease_ms
        self.interval_s = lease_ms / 3000
        self.on_extended = on_extended
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            due_at = self.holdings.next_due()
            wait = self.interval_s if due_at is None else due_at - time.monotonic()
            if wait > 0 and self.done.wait(wait):
                return
            # Leases due within half an interval go along: one call serves them all.
            due = self.holdings.due(time.monotonic(), self.interval_s / 2)
            for start in range(0, len(due), MAX_EXTENDS):
                self._extend(due[start:start + MAX_EXTENDS])

    def _extend(self, leases: list[Lease]) -> None:
        items = [(lease.message.id, lease.message.token, self.lease_ms) for lease in leases]
        try:
            results = self.client.extend_leases(self.queue, items)
        except Exception as exc:  # a SqewError, or a client closed under the worker
            # The lease still runs for up to two thirds of its length: try again soon.
            log.warning("heartbeat of %d leases failed: %s", len(items), exc)
            retry_at = time.monotonic() + min(self.interval_s / 4, 1.0)
            for lease in leases:
                lease.renew_at = retry_at
            return
        renew_at = time.monotonic() + self.interval_s
        extended = 0
        for lease, result in zip(leases, results, strict=True):
            if result.status == "extended":
                lease.renew_at = renew_at
                extended += 1
            elif self.holdings.holds(lease):  # (else it was acked meanwhile: all is well)
                lease.lost = True
                log.warning("message %d: lease %s while its handler runs (it may be delivered "
                            "again)", lease.message.id, result.status.replace("_", " "))
        self.on_extended(extended)
