"""Background work of a server process, on a timer: the reaper and the steps of message move
tasks, in exactly one process per database, and backpressure's measures when nothing else
writes.

Every ``reap_interval_ms`` (at least every second) each server process (each worker of
``--workers N``, each server on the file) asks for the reaper's lead (``Backend.try_lead``,
without waiting). The one that holds it reaps (``QueueService.reap``) every
``reap_interval_ms`` and keeps it while it lives; the others only ask again at the next tick,
so when the leader dies (its lock goes with it) a follower takes over within a tick. The
embedded Client and the CLI reap only when they can take the lead for a moment
(``sqew.core.maintenance``): with a server running, the work is the server's.

Its metrics (``BackgroundMetrics``; with ``--workers N`` the scrape combines the workers', so
``sqew_reaper_leader`` is 1 while a server runs on the database):

- ``sqew_reaper_leader``: 1 in the process that leads the reaper, else 0;
- ``sqew_reaper_runs_total``, ``sqew_reaper_duration_seconds``: its runs in this process;
- ``sqew_reaper_removed_total{kind}``: what they did (``expired``, ``idempotency``,
  ``archived``, ``dead_lettered``);
- ``sqew_overloaded``: 1 while this process refuses enqueues (backpressure), with the measures
  ``sqew_backpressure_pending_writes``, ``sqew_backpressure_wal_bytes`` and
  ``sqew_backpressure_commit_seconds`` as of the last tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Iterator

from sqew import errors
from sqew.backends.base import Lead
from sqew.core import maintenance
from sqew.core.pressure import Pressure
from sqew.server.metrics import Metrics
from sqew.server.service_handle import ServiceHandle

MIN_TICK_S = 0.05
"""The shortest interval between ticks (``reap_interval_ms`` may be tiny in tests)."""
MAX_TICK_S = 1.0
"""The longest: followers ask for the lead, and an overloaded process measures again, at
least this often, however long ``reap_interval_ms`` is."""
REAP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
log = logging.getLogger("sqew.reaper")


class BackgroundMetrics:
    """The background work's metrics, made with the app's ``Metrics`` (none when the setting
    ``metrics`` is off). Gauges combine over ``--workers`` as their ``multiprocess_mode``
    says."""

    def __init__(self, metrics: Metrics) -> None:
        self.enabled = metrics.enabled
        if not self.enabled:
            return
        self.leader = metrics.gauge("sqew_reaper_leader", "1 in the process leading the reaper",
                                    multiprocess_mode="livesum")
        self.runs = metrics.counter("sqew_reaper_runs", "Reaper runs in this process")
        self.removed = metrics.counter(
            "sqew_reaper_removed", "Messages and records the reaper removed, by kind "
            "(dead_lettered: moved to a DLQ)", ("kind",))
        self.duration = metrics.histogram("sqew_reaper_duration_seconds", "Reaper run time",
                                          buckets=REAP_BUCKETS)
        self.overloaded = metrics.gauge("sqew_overloaded", "1 while enqueues are refused "
                                        "(backpressure)", multiprocess_mode="livemax")
        self.pending = metrics.gauge("sqew_backpressure_pending_writes", "Write operations "
                                     "waiting for the group commit", multiprocess_mode="livesum")
        self.wal = metrics.gauge("sqew_backpressure_wal_bytes", "Write log bytes not yet "
                                 "copied into the database", multiprocess_mode="livemax")
        self.commit = metrics.gauge("sqew_backpressure_commit_seconds", "Moving average of a "
                                    "group commit's transaction time", multiprocess_mode="livemax")

    def lead(self, held: bool) -> None:
        """This process took (or let go of) the reaper's lead."""
        if self.enabled:
            self.leader.set(1 if held else 0)

    def pressure(self, state: Pressure) -> None:
        """Show ``state`` (called when it changes, and at every tick)."""
        if not self.enabled:
            return
        self.overloaded.set(1 if state.overloaded else 0)
        self.pending.set(state.pending)
        self.wal.set(state.backlog)
        self.commit.set(state.commit_s)

    def reaped(self, reaped: maintenance.Reaped, seconds: float) -> None:
        """Count one run."""
        if not self.enabled:
            return
        self.runs.inc()
        self.duration.observe(seconds)
        for kind, n in (("expired", reaped.expired), ("idempotency", reaped.tombstones),
                        ("archived", reaped.archived), ("dead_lettered", reaped.dead_lettered)):
            if n:
                self.removed.labels(kind).inc(n)


class Background:
    """The timer of one server process (see the module docstring).

    Args:
        serving: the process's service (open while the timer runs) and database threads.
        metrics: the app's metrics (the background work's are made with them).
        reap_interval_ms: how often the leader reaps (the setting).
        reap: lead and run the reaper (off: polls and reads reap once due by the service's
            clock, ``create_app(reaper_timer=False)``).
    """

    def __init__(self, serving: ServiceHandle, metrics: Metrics, *, reap_interval_ms: int,
                 reap: bool) -> None:
        self._serving = serving
        self._interval_s = reap_interval_ms / 1000
        self._reap = reap
        self._lead: Lead | None = None
        self._next_reap = 0.0  # (monotonic) when the leader reaps next
        self.metrics = BackgroundMetrics(metrics)
        self._failures = _Failures()

    @property
    def leader(self) -> bool:
        """Whether this process leads the reaper now."""
        return self._lead is not None and self._lead.held

    def watch(self, pressure: Pressure | None) -> None:
        """Show backpressure's state changes in the metrics and the log as they happen."""
        if pressure is None:
            return

        def changed(state: Pressure) -> None:
            self.metrics.pressure(state)
            if state.overloaded:
                log.warning("overloaded (%s): refusing enqueues until writes catch up",
                            state.describe(), extra={"reasons": list(state.reasons)})
            else:
                log.info("no longer overloaded: accepting enqueues again")

        pressure.on_change = changed

    async def run_forever(self) -> None:
        """Tick every ``reap_interval_ms`` (at most ``MAX_TICK_S``) until cancelled, starting
        now."""
        interval = min(MAX_TICK_S, max(MIN_TICK_S, self._interval_s))
        while True:
            if self._reap:
                with self._failures.watch("reaping", event="reap"):
                    await self._lead_and_reap()
            with self._failures.watch("measuring backpressure"):
                await self._measure()
            await asyncio.sleep(interval)

    async def _lead_and_reap(self) -> None:
        if self._lead is not None and not self._lead.held:
            log.warning("lost the reaper's lead (pid %d)", os.getpid())
            self._lead = None
            self.metrics.lead(False)
        if self._lead is None:
            try:
                self._lead = await self._try_lead()
            except errors.SqewError as exc:
                log.warning("cannot take the reaper's lead: %s", exc.message)
                return
            if self._lead is None:
                log.debug("another process leads the reaper (pid %d follows)", os.getpid())
                return
            log.info("this process (pid %d) leads the reaper", os.getpid(),
                     extra={"pid": os.getpid()})
            self.metrics.lead(True)
        started = time.monotonic()
        if started < self._next_reap:
            return
        self._next_reap = started + self._interval_s
        reaped = await self._serving.service.reap()
        seconds = time.monotonic() - started
        # Message move tasks run here too: in one process per database, each step a
        # transaction of its own (``sqew.core.move_tasks``).
        await self._serving.service.run_move_tasks()
        self.metrics.reaped(reaped, seconds)
        # At info level when it did something; a run every second that finds nothing is no news.
        log.log(logging.INFO if reaped.total else logging.DEBUG,
                "reaper removed %d (expired %d, idempotency records %d, archived %d; moved %d "
                "to DLQs)", reaped.total, reaped.expired, reaped.tombstones, reaped.archived,
                reaped.dead_lettered,
                extra={"event": "reap", "removed": reaped.total, **reaped._asdict(),
                       "duration_ms": round(seconds * 1000, 3)})

    async def _try_lead(self) -> Lead | None:
        """``try_lead`` on a thread (a database across a network answers in a round trip).

        Should shutdown cancel the wait, a lead the thread takes after all is let go at once:
        held by nobody, it would stop every other process from reaping.
        """
        backend = self._serving.service.backend
        taking = asyncio.ensure_future(self._serving.offload(lambda: backend.try_lead(
            maintenance.ROLE)))
        try:
            return await asyncio.shield(taking)
        except asyncio.CancelledError:
            taking.add_done_callback(_let_go)
            raise

    async def _measure(self) -> None:
        state = self._serving.service.pressure
        if state is None:
            return
        if state.overloaded:  # enqueues refused: an empty group takes the measures again
            await self._serving.service.probe()
        self.metrics.pressure(state)

    def release(self) -> None:
        """Let another process lead the reaper (shutdown)."""
        if self._lead is not None:
            self._lead.release()
            self._lead = None
            self.metrics.lead(False)
            log.info("released the reaper's lead (pid %d)", os.getpid())


def _let_go(taking: asyncio.Future[Lead | None]) -> None:
    """Release a lead that arrived after nobody waited for it any more."""
    if not taking.cancelled() and taking.exception() is None:
        lead = taking.result()
        if lead is not None:
            lead.release()


class _Failures:
    """Logs a background task's failures once per outage, not once per tick: the first as a
    warning with the reason when the database is unavailable (read-only, unreachable,
    restarting: the operator's news, not a defect), else with its traceback; the rest at
    debug level, and a line when the task works again (a database down for a minute would
    otherwise log every second in every process)."""

    def __init__(self) -> None:
        self._failing: set[str] = set()

    @contextlib.contextmanager
    def watch(self, task: str, **extra: str) -> Iterator[None]:
        """Run a tick of ``task``; keep going whatever it raises (retried next tick)."""
        try:
            yield
        except errors.Unavailable as exc:
            self._failed(task, extra, f"{task} failed ({exc.code}: {exc.message}); retrying "
                         "every tick, logged again once it works", traceback=False)
            return
        except Exception:
            self._failed(task, extra, f"{task} failed; retrying every tick, logged again once "
                         "it works", traceback=True)
            return
        if task in self._failing:
            self._failing.discard(task)
            log.info("%s works again", task, extra=extra)

    def _failed(self, task: str, extra: dict[str, str], message: str, *,
                traceback: bool) -> None:
        """Log the failure being handled: once per outage, later ones at debug level."""
        if task in self._failing:
            log.debug("%s failed again", task, exc_info=True, extra=extra)
        elif traceback:
            self._failing.add(task)
            log.exception(message, extra=extra)
        else:
            self._failing.add(task)
            log.warning(message, extra=extra)
