"""QueueService: every rule of the queue (docs/rest.md) behind one method per operation, the only
writer of state.

The rules live in the modules of their job — ``producing`` (enqueue), ``delivering`` (claim,
ack, nack, extend-lease), ``administering`` (queues, purges, the DLQ), ``maintenance`` (reaper,
compaction), ``waiting`` (long polls) — as operations (``sqew.core.writer.Op``). This facade
validates arguments, hands each operation to the writer chosen when the service was built, and
runs reads through ``offload``. Writes that may take long (purges, removing a queue, the DLQ's
requeue, compaction) run in a transaction of their own through ``offload`` too, so that in a
server they never stop the event loop. Every transport calls these same methods.

The methods are coroutines. The embedded Client's writer and offload never suspend (it runs
them with ``writer.run_sync``; a long poll that waits needs a loop); a server builds the service
on its loop with ``group_commit=True`` and a thread pool as ``offload``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import msgspec
from opentelemetry.trace import Tracer

from sqew import errors, models
from sqew.backends.base import Backend, KeyRow, Lead, Tx
from sqew.core import administering as admin
from sqew.core import (
    delivering,
    keys,
    long_poll,
    maintenance,
    pressure,
    producing,
    signing,
    views,
    writer_choice,
)
from sqew.core.clock import Clock
from sqew.core.dead_letters import DeadLetterMethods
from sqew.core.move_tasks import MoveTaskMethods
from sqew.core.rules import check_choice, check_range
from sqew.core.sqs_data import SqsDataMethods
from sqew.core.streaming import StreamMethods
from sqew.core.writer import NO_OBSERVER, Offload, Op, WriteObserver, inline

log = logging.getLogger("sqew.service")
T = TypeVar("T")


class QueueService(SqsDataMethods, DeadLetterMethods, MoveTaskMethods, StreamMethods):
    """The queue engine over a storage backend.

    Args:
        backend: where state lives.
        clock: returns epoch milliseconds (tests inject a manual clock); None: the
            backend's (``Backend.clock``: the database server's time on PostgreSQL).
        reap_interval_ms: how often expired messages and tombstones are removed (by a
            server's timer, or by the next poll or read once due).
        rng: randomness for backoff jitter.
        group_commit: run writes in shared transactions on the running event loop (a
            server's; build the service on it) instead of one transaction per call.
        offload: runs blocking reads and long writes (a server: its thread pool).
        observer: told about each write transaction (a server's metrics).
        tracer: trace the write transactions with it (``sqew.core.tracing``'s writers);
            ``TracedService`` (operations and reads too) passes it; None: tracing off.
        reap_when_due: polls and reads run the reaper once ``reap_interval_ms`` has passed,
            if this process can take the reaper's lead at that moment (the embedded Client;
            a server whose timer reaps passes False; see ``sqew.core.maintenance``).
        backpressure: with ``group_commit``, refuse enqueues (``Overloaded``) while writes
            back up past these thresholds (``sqew.core.pressure``); None: never.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        clock: Clock | None = None,
        reap_interval_ms: int = 1000,
        rng: random.Random | None = None,
        group_commit: bool = False,
        offload: Offload[Any] = inline,
        observer: WriteObserver = NO_OBSERVER,
        tracer: Tracer | None = None,
        reap_when_due: bool = True,
        backpressure: pressure.Thresholds | None = None,
    ) -> None:
        self.backend = backend
        self.clock: Clock = backend.clock if clock is None else clock
        self.waiter = backend.waiter()
        self._rng = rng or random.Random()
        self._offload = offload
        self.pressure: pressure.Pressure | None = (
            pressure.Pressure(backpressure) if group_commit and backpressure is not None else None)
        """The overload state (a server's group commit with ``backpressure``), else None."""
        self._direct, self._writer = writer_choice.choose(
            backend, self.clock, self.waiter, group_commit=group_commit, offload=offload,
            observer=observer, tracer=tracer, pressure=self.pressure)
        # How a read runs in a span (``TracedService`` sets it); None: untraced.
        self._read_spans: Callable[[Callable[[], Any]], Callable[[], Any]] | None = None
        self._reaps = maintenance.ReapSchedule(reap_interval_ms, when_due=reap_when_due)

    # --- running --------------------------------------------------------------------------------
    async def _blocking_write(self, op: Op[T]) -> T:
        """A write that may take long (purges, cascades): its own transaction, offloaded."""
        return cast(T, await self._offload(lambda: self._direct.run(op)))

    def _reap_lead(self) -> Lead | None:
        """The reaper's lead if a reap is due and this process can take it: the caller runs
        ``_reap`` first, so a poll, stats, peek and the DLQ agree about expired messages and
        ended last leases. (Not a coroutine: a poll asks each time, nearly always in vain.)"""
        return self._reaps.lead_if_due(self.backend, self.clock())

    async def _reap(self, lead: Lead) -> None:
        """A reaper run under ``lead`` (``_reap_lead``), which it lets go of after; a failure
        (a read-only or busy database) is logged and the call goes on."""
        try:
            reaped = await self._reap_run()
        except errors.SqewError as exc:
            log.info("reaping failed: %s", exc.message)
            return
        finally:
            lead.release()
        maintenance.log_reaped(reaped)

    async def _reap_run(self) -> maintenance.Reaped:
        """One reaper run: the share of each queue with work in a transaction of its own
        (``maintenance.reap``)."""
        names = await self._read_now(
            lambda tx, now: tx.queues_to_reap(now, maintenance.REAP_LIMIT))
        return await maintenance.reap(self._writer, names)

    async def _read(self, fn: Callable[[Tx, int], T]) -> T:
        lead = self._reap_lead()
        if lead is not None:
            await self._reap(lead)
        return await self._read_now(fn)

    async def _read_now(self, fn: Callable[[Tx, int], T]) -> T:
        def run() -> T:
            with self.backend.read() as tx:
                return fn(tx, self.clock())

        if self._read_spans is not None:
            run = self._read_spans(run)
        return cast(T, await self._offload(run))

    # --- queues ---------------------------------------------------------------------------------
    async def create_queue(self, spec: models.QueueCreate) -> models.Queue:
        """Create a queue and its DLQ."""
        return await self.sqs_data_gone(self._writer.write(admin.CreateQueue(spec)))

    async def list_queues(self) -> list[models.Queue]:
        """Every queue (DLQs included) by name."""
        return await self._read(lambda tx, now: [views.queue(r) for r in tx.list_queues()])

    async def get_queue(self, name: str) -> models.Queue:
        """One queue with its stats."""
        return await self._read(lambda tx, now: views.queue(
            row := delivering.queue_row(tx, name), admin.stats(tx, row, now)))

    async def update_queue(self, name: str, settings: models.QueueSettings) -> models.Queue:
        """Change some settings of a queue."""
        return await self._writer.write(admin.UpdateQueue(name, settings))

    async def set_paused(self, name: str, paused: bool) -> models.Queue:
        """Pause a queue's delivery (polls return nothing, enqueues go on) or resume it."""
        return await self._writer.write(admin.SetPaused(name, paused))

    async def delete_queue(self, name: str) -> None:
        """Remove a queue with its DLQ and all their messages."""
        await self.sqs_data_gone(self._blocking_write(admin.DeleteQueue(name)))

    # --- messages -------------------------------------------------------------------------------
    async def enqueue(
        self, queue: str, messages: Sequence[models.MessageIn],
        proof: signing.Proof | None = None, groups: Sequence[str | None] | None = None,
    ) -> list[models.EnqueueResult]:
        """Enqueue messages all-or-nothing; duplicates (idempotency) return the first id.

        Args:
            queue: the queue's name.
            messages: the validated messages.
            proof: what a remote caller offers for a queue with an ``hmac_secret``: the
                ``X-Sqew-Signature`` header (None if absent) and the exact raw request body.
                A transport that takes requests from others (the REST server) gives one for
                every enqueue, whatever the queue; on a queue with a secret it must hold, else
                ``InvalidSignature``. None means the caller is trusted: the embedded Client
                and the local CLI run as the database file's owner, who can read the secret
                anyway, and are not checked.
            groups: each message's ordered group or None (``sql_sqs.GROUP_HEAD``).

        Raises:
            sqew.errors.Overloaded: writes back up (``backpressure``); nothing was enqueued.
            sqew.errors.InvalidSignature: ``proof`` given, and missing, malformed, outside
                ``signing.TOLERANCE_S`` of the service's clock, or not matching the body.
        """
        if self.pressure is not None and self.pressure.overloaded:  # one flag, kept by the writer
            raise errors.Overloaded(
                f"the server is overloaded ({self.pressure.describe()}); enqueue later, "
                "polls and acks go on", retry_after=pressure.RETRY_AFTER_S)
        return await self._writer.write(producing.Enqueue(queue, messages, proof, groups))

    async def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        gone: Callable[[], bool] | None = None, order: str = "priority",
    ) -> list[models.LeasedMessage]:
        """Lease up to ``batch`` ready messages (``order="shuffle"``: random ones among the
        first of the delivery order, ``SqlTx.claim``), waiting up to ``wait_ms`` for some.

        Cancelling the call (a server does when the client disconnects) ends a wait at once
        and leases nothing that was not leased yet; so does ``gone`` turning true (the caller
        left), and leases of a group commit still running are then given back (``Claim``).
        """
        check_range("batch", batch, 1, models.MAX_POLL_BATCH)
        check_range("wait_ms", wait_ms, 0, models.MAX_WAIT_MS)
        if visibility_ms is not None:
            check_range("visibility_ms", visibility_ms, 0, models.MAX_VISIBILITY_MS)
        check_choice("order", order, models.POLL_ORDERS)
        lead = self._reap_lead()
        if lead is not None:
            await self._reap(lead)
        return await long_poll.long_poll(self._writer, self.waiter, self.clock, queue, batch,
                                         wait_ms, visibility_ms, gone, shuffle=order == "shuffle")

    async def ack(self, queue: str, items: Sequence[tuple[int, str]]) -> list[models.ItemResult]:
        """Acknowledge messages; per-item status ``acked`` / ``lease_lost`` / ``not_found``."""
        return await self._writer.write(delivering.Ack(queue, items))

    async def nack(
        self, queue: str, items: Sequence[models.NackIn]
    ) -> list[models.ItemResult]:
        """Release leases for a retry with backoff, or dead-letter at ``max_attempts`` (at
        once for an item with ``dead_letter``)."""
        return await self._writer.write(delivering.Nack(queue, items, self._rng))

    async def extend_lease(
        self, queue: str, msg_id: int, token: str, ms: int
    ) -> models.LeaseExtended:
        """Heartbeat: the lease of a held message ends ``ms`` from now."""
        check_range("ms", ms, 0, models.MAX_VISIBILITY_MS)
        op = delivering.ExtendLease(queue, [(msg_id, token, ms)], single=True)
        (done,) = await self._writer.write(op)  # (a miss raised)
        return models.LeaseExtended(done.id, cast(int, done.lease_expires_at))

    async def extend_leases(self, queue: str, items: delivering.Extends) -> delivering.ItemResults:
        """Heartbeats of ``(id, token, ms)``: each ``extended``, ``lease_lost`` or ``not_found``."""
        for *_, ms in items:
            check_range("ms", ms, 0, models.MAX_VISIBILITY_MS)
        return await self._writer.write(delivering.ExtendLease(queue, items))

    async def stats(self, queue: str) -> models.Stats:
        """Depths and counters of a queue."""
        return await self._read(lambda tx, now: admin.queue_stats(tx, queue, now))

    async def all_stats(self) -> list[models.Stats]:
        """The stats of every queue, DLQs included, by name: one statement, however many
        queues (what a metrics scrape reads)."""
        return await self._read(lambda tx, now: admin.all_stats(tx, now))

    async def peek(self, queue: str, limit: int = 10) -> list[models.Message]:
        """The next ready messages in delivery order, without leasing them."""
        check_range("limit", limit, 1, 100)
        return await self._read(lambda tx, now: admin.peek(tx, queue, limit, now))

    async def get_message(self, queue: str, msg_id: int) -> models.Message:
        """One message by id."""
        return await self._read(lambda tx, now: admin.get_message(tx, queue, msg_id))

    async def remove_message(self, queue: str, msg_id: int) -> None:
        """Delete one message by id."""
        await self._writer.write(admin.RemoveMessage(queue, msg_id))

    async def purge(self, queue: str) -> int:
        """Delete every message of a queue (not of its DLQ)."""
        return await self._blocking_write(admin.Purge(queue))

    async def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> models.ScanPage:
        """One page of a queue's messages by id (``source``: ``queue``, ``dlq`` or
        ``archive``), ids in ``(after_id, max_id]``, each with its state; no lease, no side
        effect. ``next_after_id`` is set when the page is full (there may be more)."""
        if source not in models.SCAN_SOURCES:
            raise errors.ValidationError(
                f"source must be one of {', '.join(models.SCAN_SOURCES)}",
                details=[{"field": "source", "message": "must be queue, dlq or archive"}],
            )
        check_range("limit", limit, 1, models.MAX_SCAN_LIMIT)
        if after_id is not None:
            check_range("after_id", after_id, 0, models.MAX_ID)
        if max_id is not None:
            check_range("max_id", max_id, 0, models.MAX_ID)
        return await self._read(lambda tx, now: admin.scan(
            tx, queue, source, after_id or 0, max_id, limit, now
        ))

    # --- DLQ ------------------------------------------------------------------------------------
    async def dlq_list(
        self, queue: str, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        """Messages in a queue's DLQ by id, after ``after_id``."""
        check_range("limit", limit, 1, 1000)
        if after_id is not None:
            check_range("after_id", after_id, 0)
        return await self._read(lambda tx, now: admin.dlq_list(tx, queue, limit, after_id or 0))

    async def dlq_requeue(
        self, queue: str, ids: Sequence[int] | None = None
    ) -> models.Requeued:
        """Move DLQ messages (all or ``ids``) back to their queue, attempts reset to 0, as
        many as its ``max_depth`` admits (``admin.RequeueDlq``)."""
        return await self._blocking_write(admin.RequeueDlq(queue, ids))

    async def dlq_purge(self, queue: str) -> int:
        """Delete every message of a queue's DLQ."""
        return await self._blocking_write(admin.Purge(queue, dlq=True))

    # --- API keys -------------------------------------------------------------------------------
    async def create_key(self, spec: models.KeyCreate) -> models.KeyCreated:
        """Mint a key; the answer is the only time the key itself is seen."""
        key_id, key, stored_hash = keys.minted(spec.sqs)
        key_hash = await self._offload(stored_hash)
        stored = await self._writer.write(keys.CreateKey(keys.new_row(spec, key_id, key_hash)))
        return models.KeyCreated(**msgspec.structs.asdict(stored), key=key)

    async def list_keys(self) -> list[models.ApiKey]:
        """Every key, oldest first (never a key or its hash)."""
        return await self._read(lambda tx, now: [keys.view(r) for r in tx.list_keys()])

    async def revoke_key(self, key_id: str) -> None:
        """Remove a key (``NotFound`` if there is none)."""
        await self._writer.write(keys.RevokeKey(key_id))

    async def find_key(self, key_id: str) -> KeyRow | None:
        """The stored key with id ``key_id`` (with its hash: for authentication only)."""
        return await self._read(lambda tx, now: tx.get_key(key_id))

    async def auth_required(self) -> bool:
        """Whether API keys are enforced on this database (from its first key on, until
        ``open_access``)."""
        return await self._read(lambda tx, now: tx.auth_required())

    async def open_access(self) -> None:
        """Stop enforcing API keys on a database with none left (``keys.OpenAccess``)."""
        await self._writer.write(keys.OpenAccess())
        log.warning("API keys are no longer required on this database",
                    extra={"event": "auth_switched_off"})

    async def touch_keys(self, used: Sequence[tuple[str, int]]) -> None:
        """Record when keys were last used: ``(key id, epoch ms)`` pairs."""
        await self._writer.write(keys.TouchKeys(used))

    # --- housekeeping ---------------------------------------------------------------------------
    async def compact(self, queue: str) -> int:
        """Remove the queue's expired messages and tombstones, then maintain the database."""
        removed = await self._blocking_write(maintenance.Compact(queue))
        await self._offload(self.backend.maintain)
        return removed

    async def reap(self) -> maintenance.Reaped:
        """Run the reaper now (a server's timer, in the process that leads it): remove a
        bounded number of expired messages, tombstones and archived messages past retention
        in every queue, and dead-letter messages whose last allowed lease ended."""
        self._reaps.due(self.clock())
        reaped = await self._reap_run()
        maintenance.log_reaped(reaped)
        return reaped

    async def probe(self) -> None:
        """Commit an empty group, so that backpressure's measures are taken again when nothing
        else writes (enqueues refused, no consumer); nothing without group commit."""
        if self.pressure is not None:
            await self._writer.write(maintenance.Probe())

    async def ping(self) -> None:
        """Raise ``Unavailable`` unless the database answers."""
        await self._offload(self.backend.ping)

    def close(self) -> None:
        """Wake every long poll and close the backend (a service without group commit)."""
        self.waiter.close()
        self.backend.close()

    async def drain(self) -> None:
        """Wake every long poll and finish the writes pending in the writer (call on the loop
        the service was built on); ``close`` then closes the backend."""
        self.waiter.close()
        await self._writer.aclose()

    async def aclose(self) -> None:
        """``drain``, then ``close``."""
        await self.drain()
        self.close()


