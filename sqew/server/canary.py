"""The canary: a synthetic message through the whole queue path, every ``canary_interval_s``.

Each server process with the setting on (``canary_interval_s`` > 0) runs one: every interval it
enqueues a message to the queue ``_canary`` (created on first use; a name no user queue can
take, as user names start with a letter or digit), long-polls that queue for one message and
acks it. What it measures is what a producer and a consumer see together: the time from a
message's enqueue to its ack, taken from the message's own ``enqueued_at`` on the service's
clock. With several replicas on one database every replica enqueues one and takes one per
round, so a replica may well take another's message: each message still measures the store's
enqueue-to-ack path, and none is left behind.

Metrics (labelled ``replica``: the setting ``canary_replica``, else the host name; with
``--workers N`` the workers of one host sum under that label):

- ``sqew_canary_latency_seconds``: a histogram of enqueue-to-ack times of canary messages;
- ``sqew_canary_failures_total``: rounds that failed (an error, nothing to take within the
  round's wait, or a round stuck past its time); each is also logged at warning level on
  ``sqew.canary``.

A canary message lives ``TTL_ROUNDS`` intervals at most, so one left over by a process that
stopped mid-round never reports a latency far in the past.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

import msgspec

from sqew import errors, models
from sqew.server.metrics import Metrics
from sqew.server.service_handle import ServiceHandle

QUEUE = "_canary"
TTL_ROUNDS = 3
"""A canary message expires after this many intervals (at least ``MIN_TTL_MS``)."""
MIN_TTL_MS = 60_000
MIN_TIMEOUT_S = 10.0
"""A round fails once it has run this long past its poll's wait (or an interval, if longer)."""
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)
log = logging.getLogger("sqew.canary")


def replica_label(setting: str) -> str:
    """The ``replica`` label: the setting when given, else this host's name."""
    return setting or socket.gethostname()


class Canary:
    """One process's canary (see the module docstring).

    Args:
        serving: the process's service (open while the canary runs).
        metrics: the app's metrics (the canary's are made with them).
        interval_s: seconds between rounds (the setting ``canary_interval_s``; > 0).
        replica: the ``replica`` label.
        draining: whether the server is shutting down (no round starts then, and one that
            its shutdown cut short is no failure).
    """

    def __init__(self, serving: ServiceHandle, metrics: Metrics, *, interval_s: float,
                 replica: str, draining: Callable[[], bool]) -> None:
        self._serving = serving
        self._draining = draining
        self._interval_s = interval_s
        self._wait_ms = min(models.MAX_WAIT_MS, max(1, int(interval_s * 1000)))
        self._ttl_ms = max(MIN_TTL_MS, int(interval_s * 1000) * TTL_ROUNDS)
        # A round stuck on the database (a lock held elsewhere) fails instead of hiding.
        self._timeout_s = self._wait_ms / 1000 + max(interval_s, MIN_TIMEOUT_S)
        self._replica = replica
        self._enabled = metrics.enabled
        self._created = False
        self._failing = False
        if self._enabled:
            self._latency = metrics.histogram(
                "sqew_canary_latency_seconds", "Enqueue-to-ack time of canary messages",
                ("replica",), buckets=LATENCY_BUCKETS).labels(replica)
            self._failures = metrics.counter(
                "sqew_canary_failures", "Canary rounds that failed (an error, or no message "
                "to take within the round's wait)", ("replica",)).labels(replica)

    async def run_forever(self) -> None:
        """A round now, then one every interval, until cancelled."""
        while True:
            await self.round()
            await asyncio.sleep(self._interval_s)

    async def round(self) -> None:
        """Enqueue one canary message, take one, ack it, and record the outcome."""
        if self._draining():
            return
        try:
            seconds = await asyncio.wait_for(self._round(), self._timeout_s)
        except TimeoutError:
            self._failed(f"the round took over {self._timeout_s:g} s")
            return
        except errors.SqewError as exc:
            if isinstance(exc, errors.QueueNotFound):
                self._created = False  # deleted under us: made again next round
            self._failed(f"{exc.code}: {exc.message}")
            return
        except Exception as exc:  # a round must never end the canary's task
            log.debug("canary round raised", exc_info=True)
            self._failed(f"{type(exc).__name__}: {exc}")
            return
        if seconds is None and self._draining():
            return  # the shutdown ended the round's wait
        if seconds is None:
            self._failed(f"no canary message to take within {self._wait_ms} ms")
            return
        if self._enabled:
            self._latency.observe(seconds)
        if self._failing:
            self._failing = False
            log.info("canary works again", extra={"event": "canary", "replica": self._replica})

    async def _round(self) -> float | None:
        service = self._serving.service
        if not self._created:
            await self._create()
        payload = msgspec.Raw(msgspec.json.encode({"canary": self._replica}))
        message = models.MessageIn(payload=payload, ttl_ms=self._ttl_ms)
        await service.enqueue(QUEUE, [message])
        got = await service.poll(QUEUE, wait_ms=self._wait_ms)
        if not got:
            return None
        (m,) = got
        await service.ack(QUEUE, [(m.id, m.token)])
        return max(0, service.clock() - m.enqueued_at) / 1000

    async def _create(self) -> None:
        service = self._serving.service
        with contextlib.suppress(errors.QueueExists):
            # Built directly, not decoded: the reserved name would fail the name pattern.
            await service.create_queue(models.QueueCreate(name=QUEUE))
        self._created = True

    def _failed(self, why: str) -> None:
        if self._enabled:
            self._failures.inc()
        self._failing = True
        log.warning("canary round failed: %s", why,
                    extra={"event": "canary", "replica": self._replica})
