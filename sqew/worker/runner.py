"""``sqew.Worker``: poll, run a handler on a thread pool (or an ``async def`` handler on an
event loop), ack; for any Client (docs/consumers.md).

Three kinds of thread serve one worker besides the one that calls ``run`` (which polls):
``concurrency`` handler threads (for an ``async def`` handler, one thread running an event
loop instead, ``aio.py``, with up to ``concurrency`` handlers at once as tasks), the settler
(batched acks and nacks, ``settle.py``) and the keeper (batched heartbeats, ``held.py``).
The poll asks for no more messages than there are free slots, and a slot frees only once its
message's ack or nack is answered, so the worker never holds a lease it cannot run at once:
there is nothing leased and not started to give back when it stops.
"""

from __future__ import annotations

import inspect
import logging
import queue as queues
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqew import errors, models
from sqew.client.base import Client
from sqew.worker import aio, signals
from sqew.worker.held import Holdings, Keeper
from sqew.worker.settle import Outcome, Settler

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger("sqew.worker")

Handler = Callable[[models.LeasedMessage], object]
"""A Worker's handler: called with each leased message; returning acks it."""

MIN_LEASE_MS = 300
"""The shortest lease a worker keeps alive (a heartbeat every third of it)."""

MAX_PAUSE_S = 30.0
"""The longest a worker waits before polling again after a failed poll (a ``Retry-After``
longer than this is cut short)."""


class Reject(Exception):
    """Raised by a Worker's handler for a permanent failure: the message moves to its queue's
    DLQ at once, with the exception's text as ``last_error``, whatever attempts it has left."""


class Retry(Exception):
    """Raised by a Worker's handler to try the message again later: it is nacked with the
    exception's text as ``error`` (as it is, without the type's name), ready again after
    ``delay_ms`` (None: the queue's backoff), or dead-lettered once delivered
    ``max_attempts`` times (a rate-limited downstream's ``Retry-After``, say)."""

    def __init__(self, error: str, delay_ms: int | None = None) -> None:
        super().__init__(error)
        self.delay_ms = None if delay_ms is None else max(0, min(delay_ms, models.MAX_TTL_MS))


class Worker:
    """Consumes ``queue`` through ``client``, running ``handler`` on each message.

    ``run()`` long-polls in batches (never more messages than free handler slots), runs the
    handler on ``concurrency`` threads, acks each message whose handler returns, nacks with the
    exception's text one whose handler raises (retried after the queue's backoff, or after
    the ``delay_ms`` of a ``Retry``), and dead-letters at once one whose handler raises
    ``Reject``. Acks and nacks go in batches.
    While handlers run, their leases are extended in batched heartbeats every third of the
    lease. On ``stop()``, SIGINT or SIGTERM it stops polling, lets the handlers under way
    finish for up to ``drain_timeout_s`` (a second signal stops waiting), settles them and
    returns; a handler still running then keeps running in its thread, but its lease is no
    longer extended: the message is delivered again once it ends.

    Args:
        client: any ``sqew.Client`` (a database file, PostgreSQL, a server).
        queue: the queue to consume.
        handler: a function of one ``LeasedMessage``; an ``async def`` one (or an object
            whose ``__call__`` is) runs on an event loop of the worker's own thread, up to
            ``concurrency`` at once, each message's lease kept, acked and nacked as a plain
            handler's: the handler may ``await`` anything (an ``AsyncClient``, an HTTP call).
        concurrency: handler threads (or concurrent ``async`` handlers), 1 to 1000: the most
            messages held at once.
        wait_ms: how long one poll waits for a message (0 to 20000); ``stop()`` takes
            effect between polls, so this bounds how long it takes to notice.
        visibility_ms: the lease each poll asks for (default: the queue's ``visibility_ms``,
            at least 300): heartbeats keep it alive, so it only bounds how soon a message
            comes back after this process dies.
        drain_timeout_s: how long ``run`` waits for handlers under way once stopping.
        handle_signals: whether ``run``, called on the main thread, turns SIGINT and SIGTERM
            into ``stop()`` while it runs.
        registry: the prometheus-client registry that exports the counts below once ``run``
            starts (``sqew.worker.metrics``); None: the process's default registry, the one
            an app's ``/metrics`` usually serves.

    Attributes:
        processed: messages whose handler returned (acked).
        failed: messages whose handler raised (nacked, so retried or dead-lettered by the
            queue's ``max_attempts``).
        rejected: messages whose handler raised ``Reject`` (dead-lettered at once).
        lost: acks and nacks that found the lease gone or could not be sent (those messages
            are delivered again).
        lease_extensions: leases extended by heartbeats.
    """

    def __init__(
        self, client: Client, queue: str, handler: Handler, *, concurrency: int = 1,
        wait_ms: int = 1000, visibility_ms: int | None = None, drain_timeout_s: float = 30.0,
        handle_signals: bool = True, registry: CollectorRegistry | None = None,
    ) -> None:
        self.check_handler(handler)
        self._async = aio.is_async(handler)
        _check_range("concurrency", concurrency, 1, 1000)
        _check_range("wait_ms", wait_ms, 0, models.MAX_WAIT_MS)
        if visibility_ms is not None:
            _check_range("visibility_ms", visibility_ms, MIN_LEASE_MS, models.MAX_VISIBILITY_MS)
        if drain_timeout_s < 0:
            raise ValueError("drain_timeout_s must be >= 0")
        self.client = client
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.wait_ms = wait_ms
        self.visibility_ms = visibility_ms
        self.drain_timeout_s = drain_timeout_s
        self.handle_signals = handle_signals
        self.registry = registry
        self.processed = self.failed = self.rejected = self.lost = self.lease_extensions = 0
        self._counts = threading.Lock()
        self._holdings = Holdings(concurrency)
        self._stopping = threading.Event()
        self._given_up = threading.Event()  # a second signal: stop waiting for handlers
        self._ran = False
        self._work: queues.SimpleQueue[models.LeasedMessage | None] = queues.SimpleQueue()
        self._loop: aio.HandlerLoop | None = None

    @staticmethod
    def check_handler(handler: object) -> None:
        """Raise ``TypeError`` unless ``handler`` is callable (plain or ``async def``)."""
        if not callable(handler):
            raise TypeError(f"the handler must be callable, not {type(handler).__name__}")

    @property
    def in_flight(self) -> int:
        """Messages held now: leased and not yet settled."""
        return self._holdings.count()

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` was called (or a signal came)."""
        return self._stopping.is_set()

    def stop(self) -> None:
        """Stop polling; ``run`` then drains and returns. Safe from any thread or a signal
        handler; a second call (or signal) stops waiting for the handlers under way."""
        if self._stopping.is_set():
            self._given_up.set()
        self._stopping.set()
        self._holdings.wake()

    def run(self) -> None:
        """Consume until ``stop()`` (or SIGINT/SIGTERM), then drain and return.

        Raises:
            SqewError: a poll failed for a reason that waiting does not cure (``QueueNotFound``,
                ``Forbidden``, …), after the handlers under way were drained.
        """
        if self._ran:
            raise RuntimeError("a Worker runs once: make a new one to run again")
        self._ran = True
        from sqew.worker import metrics  # (prometheus-client: loaded by a running Worker only)

        metrics.export(self, self.registry)
        lease_ms = self._lease_ms()
        log.info("consuming %s: %d handler threads, leases of %d ms", self.queue,
                 self.concurrency, lease_ms)
        keeper = Keeper(self.client, self.queue, self._holdings, lease_ms,
                        lambda n: self._add("lease_extensions", n))
        settler = Settler(self.client, self.queue, self._holdings, self._add)
        self._loop = aio.HandlerLoop(self.queue) if self._async else None
        threads = [] if self._async else [
            threading.Thread(target=self._serve, args=(settler,), daemon=True,
                             name=f"sqew-worker-{self.queue}-{n}")
            for n in range(self.concurrency)]
        with signals.stopping_on_signals(self.stop, self.handle_signals):
            for t in (keeper, settler, *threads):
                t.start()
            try:
                self._poll_loop(lease_ms, settler)
            finally:
                self._stopping.set()
                self._drain(keeper, settler)

    # --- the poll loop -------------------------------------------------------------------------
    def _lease_ms(self) -> int:
        if self.visibility_ms is not None:
            return self.visibility_ms
        return max(self.client.get_queue(self.queue).visibility_ms, MIN_LEASE_MS)

    def _poll_loop(self, lease_ms: int, settler: Settler) -> None:
        pause = 0.0
        while not self._stopping.is_set():
            free = self._holdings.wait_for_room(self._stopping)
            if self._stopping.is_set():
                return
            try:
                messages = self.client.poll(self.queue, batch=min(free, models.MAX_POLL_BATCH),
                                            wait_ms=self.wait_ms, visibility_ms=lease_ms)
            except errors.SqewError as exc:
                if not _worth_waiting(exc):
                    raise
                pause = (min(exc.retry_after, MAX_PAUSE_S) if exc.retry_after
                         else min(max(pause * 2, 0.1), 5.0))
                log.warning("poll of %s failed, again in %.1f s: %s", self.queue, pause, exc)
                self._stopping.wait(pause)
                continue
            pause = 0.0
            # Started even when a stop came during the poll: each has a free slot, and the
            # drain waits for it (there is no way to hand a lease back without its attempt).
            self._holdings.add(messages, lease_ms / 3000)
            for m in messages:
                if self._loop is not None:
                    self._loop.start(self._handle_async(m), settler.put)
                else:
                    self._work.put(m)

    # --- the handler threads -------------------------------------------------------------------
    def _serve(self, settler: Settler) -> None:
        while (m := self._work.get()) is not None:
            settler.put(self._handle(m))

    def _handle(self, m: models.LeasedMessage) -> Outcome:
        try:
            result = self.handler(m)
            if inspect.isawaitable(result):
                close = getattr(result, "close", None)
                if close is not None:
                    close()  # never awaited: say so once, not as a warning at exit
                raise TypeError("the handler returned an awaitable from a plain function: "
                                "make it an async def (or its __call__) to have it awaited")
        except BaseException as exc:  # (SystemExit too: the slot and the lease must end)
            return self._failed(m, exc)
        self._add("processed", 1)
        return Outcome(m, ack=True)

    async def _handle_async(self, m: models.LeasedMessage) -> Outcome:
        try:
            await self.handler(m)  # type: ignore[misc]
        except BaseException as exc:  # (cancelled too: the slot and the lease must end)
            return self._failed(m, exc)
        self._add("processed", 1)
        return Outcome(m, ack=True)

    def _failed(self, m: models.LeasedMessage, exc: BaseException) -> Outcome:
        """The outcome of a handler that raised ``exc`` (counted and logged)."""
        if isinstance(exc, Reject):
            error = str(exc) or "rejected"
            self._add("rejected", 1)
            log.warning("message %d rejected (to the DLQ): %s", m.id, error)
            return Outcome(m, ack=False, error=error, dead_letter=True)
        if isinstance(exc, Retry):
            error = str(exc) or "retry"
            self._add("failed", 1)
            log.warning("message %d failed (attempt %d): %s", m.id, m.attempts, error)
            return Outcome(m, ack=False, error=error, delay_ms=exc.delay_ms)
        error = f"{type(exc).__name__}: {exc}"
        self._add("failed", 1)
        log.warning("message %d failed (attempt %d): %s", m.id, m.attempts, error)
        log.debug("message %d failed", m.id, exc_info=exc)
        return Outcome(m, ack=False, error=error)

    def _add(self, name: str, n: int) -> None:
        with self._counts:
            setattr(self, name, getattr(self, name) + n)

    # --- stopping ------------------------------------------------------------------------------
    def _drain(self, keeper: Keeper, settler: Settler) -> None:
        held = self.in_flight
        if held:
            log.info("stopping: waiting up to %.0f s for %d messages under way",
                     self.drain_timeout_s, held)
        deadline = time.monotonic() + self.drain_timeout_s
        drained = self._holdings.wait_empty(deadline, self._given_up)
        for _ in range(self.concurrency):
            self._work.put(None)  # idle handler threads end; busy ones after their message
        settler.close()
        if drained:
            settler.join()
        if self._loop is not None:  # undrained handlers go on running on it, as threads do
            self._loop.close(wait=drained)
        keeper.done.set()
        left = self.in_flight
        if left:
            log.warning("stopped with %d messages still being handled: their leases are no "
                        "longer extended, and they will be delivered again", left)


def _worth_waiting(exc: errors.SqewError) -> bool:
    """Whether a poll that failed so may succeed later (a server restarting, overloaded)."""
    return isinstance(exc, errors.Unavailable | errors.Overloaded | errors.InternalError)


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, not {value!r}")
