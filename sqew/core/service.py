"""QueueService: every rule of SPEC §1, the only writer of state.

It validates, decides (backoff, dead-lettering, quotas, idempotency) and runs each operation
as one backend transaction. Transports (CLI, REST, SQS) call it and only render results.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import msgspec

from sqew import errors, models
from sqew.backends.base import Backend, NewMessage, QueueRow, Tx
from sqew.core import merge, rules, views
from sqew.core.clock import Clock, system_clock
from sqew.core.group_commit import GroupCommitter
from sqew.core.waker import Waker

_encode = msgspec.json.encode
log = logging.getLogger("sqew.service")
CHANGE_POLL_S = 0.05
"""How often a long poll looks for commits made by other processes (a cheap header read)."""
REAP_LIMIT = 1000
T = TypeVar("T")


def check_range(name: str, value: int, low: int, high: int | None = None) -> None:
    """Raise ValidationError unless ``low <= value <= high``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
        high is not None and value > high
    ):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise errors.ValidationError(
            f"{name} must be an integer {bound}",
            details=[{"field": name, "message": f"must be an integer {bound}"}],
        )


class QueueService:
    """The queue engine over a storage backend.

    Args:
        backend: where state lives.
        clock: returns epoch milliseconds (tests inject a manual clock).
        reap_interval_ms: how often a poll also removes expired messages and tombstones.
        rng: randomness for backoff jitter.
        commit_loop: group-commit hot-path writes of concurrent callers on this event loop
            (a server's): they share transactions, run on the loop (see ``GroupCommitter``),
            and the ``*_soon`` methods become available.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        clock: Clock = system_clock,
        reap_interval_ms: int = 1000,
        rng: random.Random | None = None,
        commit_loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.waker = Waker()
        self._reap_interval = reap_interval_ms
        self._last_reap = 0
        self._rng = rng or random.Random()
        self._committer: GroupCommitter | None = None
        self._merger: merge.Merger | None = None
        if commit_loop is not None:
            self._committer = GroupCommitter(backend, commit_loop, on_commit=self.waker.notify)
            self._merger = merge.Merger(self._committer.submit, commit_loop)

    # --- helpers --------------------------------------------------------------------------------
    def _write(self, op: Callable[[Tx], T], *, notify: tuple[str, ...] = ()) -> T:
        """Run a hot-path write: in the shared group commit when on, else its own transaction.

        With group commit, call it from a thread other than the loop's (it waits).
        """
        if self._committer is not None:
            return self._committer.run(op, notify=notify)
        with self.backend.write() as tx:
            result = op(tx)
        if notify:
            self.waker.notify(notify)
        return result

    def _write_soon(
        self, op: Callable[[Tx], T], *, notify: tuple[str, ...] = ()
    ) -> asyncio.Future[T]:
        """``_write`` for a caller on the commit loop: a future of the committed result.

        ``notify``: queues whose long polls to wake once it committed.
        """
        if self._committer is None:
            raise RuntimeError("the *_soon methods need a commit_loop")
        return self._committer.submit(op, notify=notify)

    @staticmethod
    def _queue(tx: Tx, name: str) -> QueueRow:
        row = tx.get_queue(name)
        if row is None:
            raise errors.queue_not_found(name)
        return row

    def _dlq_of(self, tx: Tx, q: QueueRow) -> QueueRow:
        if q.parent_id is not None:
            raise errors.ValidationError(f"'{q.name}' is a dead-letter queue; name its queue")
        dlq = tx.get_queue(rules.dlq_name(q.name))
        if dlq is None:  # pragma: no cover - created and removed with its queue
            raise errors.InternalError()
        return dlq

    # --- queues ---------------------------------------------------------------------------------
    def create_queue(self, spec: models.QueueCreate) -> models.Queue:
        """Create a queue and its DLQ."""
        values = _settings_columns(spec, dict(rules.DEFAULTS))
        now = self.clock()
        with self.backend.write() as tx:
            if tx.get_queue(spec.name) is not None:
                raise errors.QueueExists(f"queue '{spec.name}' already exists")
            qid = tx.insert_queue({"name": spec.name, "created_at": now, **values})
            dlq_values = _settings_columns(models.QueueSettings(), dict(rules.DEFAULTS))
            tx.insert_queue(
                {"name": rules.dlq_name(spec.name), "parent_id": qid, "created_at": now,
                 **dlq_values}
            )
            row = tx.get_queue_by_id(qid)
        assert row is not None
        return views.queue(row)

    def list_queues(self) -> list[models.Queue]:
        """Every queue (DLQs included) by name."""
        with self.backend.read() as tx:
            return [views.queue(r) for r in tx.list_queues()]

    def get_queue(self, name: str) -> models.Queue:
        """One queue with its stats."""
        now = self.clock()
        with self.backend.read() as tx:
            row = self._queue(tx, name)
            return views.queue(row, self._stats(tx, row, now))

    def update_queue(self, name: str, settings: models.QueueSettings) -> models.Queue:
        """Change some settings of a queue."""
        with self.backend.write() as tx:
            row = self._queue(tx, name)
            current = {
                **{k: getattr(row, k) for k in rules.DEFAULTS if hasattr(row, k)},
                "order": "lifo" if row.lifo else "fifo",
            }
            values = _settings_columns(settings, current)
            tx.update_queue(row.id, values)
            if bool(values["lifo"]) != bool(row.lifo):
                tx.set_messages_lifo(row.id, bool(values["lifo"]))
            updated = tx.get_queue_by_id(row.id)
        assert updated is not None
        return views.queue(updated)

    def delete_queue(self, name: str) -> None:
        """Remove a queue with its DLQ and all their messages."""
        with self.backend.write() as tx:
            row = self._queue(tx, name)
            if row.parent_id is not None:
                raise errors.ValidationError(
                    f"'{name}' is a dead-letter queue; it is removed with its queue"
                )
            tx.delete_queue(row.id)
        self.waker.notify((name, rules.dlq_name(name)))  # their waiters see QueueNotFound

    # --- enqueue --------------------------------------------------------------------------------
    def enqueue(
        self, queue: str, messages: Sequence[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        """Enqueue messages all-or-nothing; duplicates (idempotency) return the first id."""
        return self._write(self._enqueue_op(queue, messages), notify=(queue,))

    def enqueue_soon(
        self, queue: str, messages: Sequence[models.MessageIn]
    ) -> asyncio.Future[list[models.EnqueueResult]]:
        """``enqueue`` for a caller on the commit loop: a future of its committed result.

        The operation joins the next group's transaction; nothing waits in the meantime.
        Enqueues without idempotency keys to one queue are merged into one write per group
        (``sqew.core.merge``).
        """
        _check_batch_size(messages)
        if self._merger is None or any(m.idempotency_key is not None for m in messages):
            return self._write_soon(self._enqueue_op(queue, messages), notify=(queue,))
        return self._merger.add(("enqueue", queue), messages, self.clock(),
                                functools.partial(self._merged_enqueue, queue),
                                notify=(queue,))

    def _merged_enqueue(
        self, queue: str, tx: Tx, parts: list[merge.Part[Sequence[models.MessageIn]]]
    ) -> list[merge.Outcome]:
        """Plain enqueues to ``queue`` of one group: one reservation and one insert for all."""
        total = sum(len(messages) for messages, _, _ in parts)
        q = tx.reserve(queue, total)
        if q is None:
            raise errors.queue_not_found(queue)
        outcomes: list[merge.Outcome] = []
        if q.max_depth or q.rate_limit_per_s:  # quotas admit request by request, in order
            tx.add_counters(q.id, depth=-total, enqueued_total=-total)
            for messages, now, _ in parts:
                try:
                    with tx.savepoint():
                        current = self._queue(tx, queue)
                        outcomes.append((True, self._enqueue_in(tx, current, messages, now, False)))
                except errors.SqewError as exc:
                    outcomes.append((False, exc))
            return outcomes
        rows: list[NewMessage] = []
        spans: list[tuple[int, int] | None] = []
        for messages, now, _ in parts:
            try:
                part = [_row(q, m, i, now) for i, m in enumerate(messages)]
            except errors.SqewError as exc:
                outcomes.append((False, exc))
                spans.append(None)
                continue
            outcomes.append((True, None))
            spans.append((len(rows), len(part)))
            rows.extend(part)
        if len(rows) < total:
            missing = total - len(rows)
            tx.add_counters(q.id, depth=-missing, enqueued_total=-missing)
        ids = tx.insert_messages(rows) if rows else []
        for index, span in enumerate(spans):
            if span is not None:
                start, count = span
                outcomes[index] = (
                    True, [models.EnqueueResult(i, False) for i in ids[start:start + count]]
                )
        return outcomes

    def _enqueue_op(
        self, queue: str, messages: Sequence[models.MessageIn]
    ) -> Callable[[Tx], list[models.EnqueueResult]]:
        """The write that enqueues ``messages`` (validated here, before it is queued)."""
        _check_batch_size(messages)
        now = self.clock()
        keyed = any(m.idempotency_key is not None for m in messages)

        def op(tx: Tx) -> list[models.EnqueueResult]:
            if keyed:  # duplicates are found inside: count after
                return self._enqueue_in(tx, self._queue(tx, queue), messages, now, False)
            # hot path: one statement finds the queue and counts the batch
            q = tx.reserve(queue, len(messages))
            if q is None:
                raise errors.queue_not_found(queue)
            return self._enqueue_in(tx, q, messages, now, True)

        return op

    def _enqueue_in(
        self,
        tx: Tx,
        q: QueueRow,
        messages: Sequence[models.MessageIn],
        now: int,
        reserved: bool,
    ) -> list[models.EnqueueResult]:
        """Insert ``messages`` into ``q``; ``reserved`` means the counters already count them."""
        rows: list[NewMessage] = []
        slots: list[int | str] = []  # per input: index into rows, or the dedup key
        seen: dict[str, int] = {}  # key → index into rows (first of the batch)
        known: dict[str, int] = {}  # key → stored message id
        for i, m in enumerate(messages):
            key = m.idempotency_key
            if key is not None:
                if key in seen or key in known:
                    slots.append(key)
                    continue
                first = tx.find_dedup(q.id, key, now)
                if first is not None:
                    known[key] = first
                    slots.append(key)
                    continue
                seen[key] = len(rows)
            slots.append(len(rows))
            rows.append(_row(q, m, i, now))
        if rows:
            self._admit(tx, q, len(rows), q.depth - len(rows) if reserved else q.depth, now)
            ids = tx.insert_messages(rows)
            if seen:
                exp = now + q.dedup_window_ms
                tx.put_dedup([(q.id, k, ids[j], exp) for k, j in seen.items()])
            if not reserved:
                tx.add_counters(q.id, depth=len(rows), enqueued_total=len(rows))
        else:
            ids = []
        if len(ids) == len(slots):  # no duplicates: results are the new ids in order
            return [models.EnqueueResult(i, False) for i in ids]
        out: list[models.EnqueueResult] = []
        for slot in slots:
            if isinstance(slot, int):
                out.append(models.EnqueueResult(ids[slot], False))
            else:
                mid = known[slot] if slot in known else ids[seen[slot]]
                out.append(models.EnqueueResult(mid, True))
        return out

    def _admit(self, tx: Tx, q: QueueRow, count: int, depth: int, now: int) -> None:
        """Quotas: max_depth (``depth`` before this enqueue) and the rate limit's token bucket."""
        if q.max_depth and depth + count > q.max_depth:
            raise errors.QueueFull(
                f"queue '{q.name}' holds {depth} of at most {q.max_depth} messages",
                retry_after=1.0,
            )
        if q.rate_limit_per_s:
            level, retry = rules.rate_limit(q.rl_tokens, q.rl_at, q.rate_limit_per_s, now, count)
            if retry is not None:
                raise errors.RateLimited(
                    f"queue '{q.name}' accepts {q.rate_limit_per_s:g} messages/s",
                    retry_after=retry,
                )
            tx.update_queue(q.id, {"rl_tokens": level, "rl_at": now})

    # --- poll -----------------------------------------------------------------------------------
    def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        cancel: threading.Event | None = None,
    ) -> list[models.LeasedMessage]:
        """Lease up to ``batch`` ready messages, waiting up to ``wait_ms`` for some.

        ``cancel`` ends a wait early, leasing nothing (a server sets it when the client that
        asked has gone, so no message is leased to nobody); it is checked every 50 ms.
        """
        check_range("batch", batch, 1, models.MAX_POLL_BATCH)
        check_range("wait_ms", wait_ms, 0, models.MAX_WAIT_MS)
        if visibility_ms is not None:
            check_range("visibility_ms", visibility_ms, 0, 43_200_000)
        self._maybe_reap()
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            generation = self.waker.generation(queue)
            marker = self.backend.change_marker() if wait_ms else None
            got, due = self._claim(queue, batch, visibility_ms, want_due=wait_ms > 0)
            remaining = deadline - time.monotonic()
            if got or remaining <= 0 or self.waker.closed:
                return got
            until = deadline
            if due is not None:
                until = min(until, time.monotonic() + max(due - self.clock(), 0) / 1000)
            self._sleep(queue, generation, marker, until, cancel)
            if cancel is not None and cancel.is_set():
                return []

    def _sleep(
        self, queue: str, generation: int, marker: object, until: float,
        cancel: threading.Event | None,
    ) -> None:
        """Wait for an in-process write that may have made messages of ``queue`` ready,
        another process's commit, ``cancel`` or ``until``."""
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return
            if self.waker.wait(queue, generation, min(left, CHANGE_POLL_S)):
                return
            if cancel is not None and cancel.is_set():
                return
            current = self.backend.change_marker()
            if current != marker:
                # Some connection committed: another process, or this one's other writes
                # (which the waker already reports per queue). A read tells whether a claim
                # (a write) is worth it.
                ready, due = self._look(queue)
                if ready:
                    return
                marker = current
                if due is not None:  # a message it added is due before the wait ends
                    until = min(until, time.monotonic() + max(due - self.clock(), 0) / 1000)

    def _look(self, queue: str) -> tuple[bool, int | None]:
        """Whether a claim on ``queue`` is worth it now (a message is ready, or the queue is
        gone), and else when one is due (epoch ms), by reading only."""
        now = self.clock()
        with self.backend.read() as tx:
            q = tx.get_queue(queue)
            if q is None or tx.peek(q.id, bool(q.lifo), now, 1):
                return True, None
            return False, tx.next_due(q.id, now)

    def poll_soon(
        self, queue: str, *, batch: int = 1, visibility_ms: int | None = None
    ) -> asyncio.Future[list[models.LeasedMessage]]:
        """A poll that does not wait, for callers that must not block (see ``enqueue_soon``).

        Like ``poll``, it reaps first when a reap is due (queued ahead of the claim, not
        waited for).
        """
        check_range("batch", batch, 1, models.MAX_POLL_BATCH)
        if visibility_ms is not None:
            check_range("visibility_ms", visibility_ms, 0, 43_200_000)
        if self.clock() - self._last_reap >= self._reap_interval:
            # Runs before the claim (writes keep their order); its outcome is logged, not awaited.
            self._write_soon(self._reap_op()).add_done_callback(_log_reap_failure)
        if self._merger is None:
            claim = self._claim_op(queue, batch, visibility_ms, want_due=False)
            return self._write_soon(lambda tx: claim(tx)[0])
        return self._merger.add(("poll", queue, visibility_ms), batch, self.clock(),
                                functools.partial(self._merged_claim, queue, visibility_ms))

    def _merged_claim(
        self, queue: str, visibility_ms: int | None, tx: Tx, parts: list[merge.Part[int]]
    ) -> list[merge.Outcome]:
        """Polls of ``queue`` of one group: one claim of all their batches, handed out in
        delivery order (the first poll gets the first messages)."""
        now = max(part_now for _, part_now, _ in parts)
        total = sum(batch for batch, _, _ in parts)
        leased, _ = self._claim_in(tx, queue, total, visibility_ms, now, want_due=False)
        outcomes: list[merge.Outcome] = []
        start = 0
        for batch, _, _ in parts:
            outcomes.append((True, leased[start:start + batch]))
            start += batch
        return outcomes

    def _claim(
        self, queue: str, batch: int, visibility_ms: int | None, *, want_due: bool
    ) -> tuple[list[models.LeasedMessage], int | None]:
        return self._write(self._claim_op(queue, batch, visibility_ms, want_due=want_due))

    def _claim_op(
        self, queue: str, batch: int, visibility_ms: int | None, *, want_due: bool
    ) -> Callable[[Tx], tuple[list[models.LeasedMessage], int | None]]:
        now = self.clock()
        return lambda tx: self._claim_in(tx, queue, batch, visibility_ms, now, want_due=want_due)

    def _claim_in(
        self, tx: Tx, queue: str, batch: int, visibility_ms: int | None, now: int, *,
        want_due: bool,
    ) -> tuple[list[models.LeasedMessage], int | None]:
        """Lease up to ``batch`` messages of ``queue`` (and when the next is due, if asked
        and none was ready)."""
        found = tx.get_queue_for_claim(queue, now)
        if found is None:
            raise errors.queue_not_found(queue)
        q, expired_leases = found
        if expired_leases:
            self._expire_leases(tx, q, now)
        vis = q.visibility_ms if visibility_ms is None else visibility_ms
        rows = tx.claim(q.id, bool(q.lifo), now, batch, now + vis)
        due = tx.next_due(q.id, now) if want_due and not rows else None
        return [views.leased(r, q) for r in rows], due

    def _expire_leases(self, tx: Tx, q: QueueRow, now: int) -> None:
        if q.parent_id is None:
            dlq = self._dlq_of(tx, q)
            moved = tx.dead_letter_expired(q.id, now, q.max_attempts, dlq, q.name)
            if moved:
                tx.add_counters(q.id, depth=-moved, dead_lettered_total=moved)
                tx.add_counters(dlq.id, depth=moved)
        tx.release_expired(q.id, now)

    # --- ack / nack / extend --------------------------------------------------------------------
    def ack(self, queue: str, items: Sequence[tuple[int, str]]) -> list[models.ItemResult]:
        """Acknowledge messages; per-item status ``acked`` / ``lease_lost`` / ``not_found``."""
        return self._write(self._ack_op(queue, items))

    def ack_soon(
        self, queue: str, items: Sequence[tuple[int, str]]
    ) -> asyncio.Future[list[models.ItemResult]]:
        """``ack`` for callers that must not block (see ``enqueue_soon``); acks of one queue
        in one group share the statement that finds and counts the queue."""
        if self._merger is None:
            return self._write_soon(self._ack_op(queue, items))
        return self._merger.add(("ack", queue), items, self.clock(),
                                functools.partial(self._merged_ack, queue))

    def _merged_ack(
        self, queue: str, tx: Tx, parts: list[merge.Part[Sequence[tuple[int, str]]]]
    ) -> list[merge.Outcome]:
        return [(True, out) for out in self._ack_in(tx, queue, [(i, n) for i, n, _ in parts])]

    def _ack_op(
        self, queue: str, items: Sequence[tuple[int, str]]
    ) -> Callable[[Tx], list[models.ItemResult]]:
        now = self.clock()
        return lambda tx: self._ack_in(tx, queue, [(items, now)])[0]

    def _ack_in(
        self, tx: Tx, queue: str, requests: list[tuple[Sequence[tuple[int, str]], int]]
    ) -> list[list[models.ItemResult]]:
        """Acknowledge each request's ``(id, token)`` items (with its ``now``), in order."""
        # Count every item as acked in the statement that finds the queue (acks rarely
        # miss), then take the misses back.
        n = sum(len(items) for items, _ in requests)
        q = tx.add_counters_by_name(queue, depth=-n, acked_total=n)
        if q is None:
            raise errors.queue_not_found(queue)
        missed = 0
        results: list[list[models.ItemResult]] = []
        for items, now in requests:
            out: list[models.ItemResult] = []
            for msg_id, token in items:
                if tx.ack(q.id, msg_id, token, bool(q.archive), now):
                    out.append(models.ItemResult(msg_id, "acked"))
                else:
                    missed += 1
                    out.append(models.ItemResult(msg_id, self._miss(tx, q, msg_id)))
            results.append(out)
        tx.add_counters(q.id, depth=missed, acked_total=-missed)  # nothing when none missed
        return results

    @staticmethod
    def _miss(tx: Tx, q: QueueRow, msg_id: int) -> str:
        return "lease_lost" if tx.message_exists(q.id, msg_id) else "not_found"

    def nack(self, queue: str, items: Sequence[models.NackIn]) -> list[models.ItemResult]:
        """Release leases for a retry with backoff, or dead-letter at ``max_attempts``."""
        now = self.clock()

        def op(tx: Tx) -> list[models.ItemResult]:
            out: list[models.ItemResult] = []
            q = self._queue(tx, queue)
            dlq = self._dlq_of(tx, q) if q.parent_id is None else None
            nacked = dead = 0
            for item in items:
                attempts = tx.attempts_if_token(q.id, item.id, item.token)
                if attempts is None:
                    out.append(models.ItemResult(item.id, self._miss(tx, q, item.id)))
                    continue
                nacked += 1
                if dlq is not None and attempts >= q.max_attempts:
                    tx.dead_letter(item.id, dlq, now, item.error, q.name)
                    dead += 1
                    out.append(models.ItemResult(item.id, "dead_lettered"))
                    continue
                delay = item.delay_ms
                if delay is None:
                    delay = rules.backoff_ms(
                        attempts, q.backoff_base_ms, q.backoff_max_ms, self._rng
                    )
                tx.release(item.id, now + delay, item.error)
                out.append(models.ItemResult(item.id, "requeued"))
            tx.add_counters(q.id, depth=-dead, nacked_total=nacked, dead_lettered_total=dead)
            if dlq is not None:
                tx.add_counters(dlq.id, depth=dead)
            return out

        # Requeued messages become ready later (backoff); dead-lettered ones are ready now.
        return self._write(op, notify=(queue, rules.dlq_name(queue)))

    def extend_lease(self, queue: str, msg_id: int, token: str, ms: int) -> models.LeaseExtended:
        """Heartbeat: the lease of a held message ends ``ms`` from now."""
        check_range("ms", ms, 0, 43_200_000)
        now = self.clock()

        def op(tx: Tx) -> None:
            q = self._queue(tx, queue)
            if not tx.extend(q.id, msg_id, token, now + ms):
                raise _item_error(self._miss(tx, q, msg_id), msg_id)

        self._write(op)
        return models.LeaseExtended(msg_id, now + ms)

    # --- reads ----------------------------------------------------------------------------------
    def _stats(self, tx: Tx, row: QueueRow, now: int) -> models.Stats:
        dlq_depth = 0
        if row.parent_id is None:
            dlq = tx.get_queue(rules.dlq_name(row.name))
            dlq_depth = dlq.depth if dlq else 0
        return views.stats(row, dlq_depth, tx.counts(row.id, now), now)

    def stats(self, queue: str) -> models.Stats:
        """Depths and counters of a queue."""
        now = self.clock()
        with self.backend.read() as tx:
            return self._stats(tx, self._queue(tx, queue), now)

    def peek(self, queue: str, limit: int = 10) -> list[models.Message]:
        """The next ready messages in delivery order, without leasing them."""
        check_range("limit", limit, 1, 100)
        now = self.clock()
        with self.backend.read() as tx:
            q = self._queue(tx, queue)
            return [views.message(r, q.name) for r in tx.peek(q.id, bool(q.lifo), now, limit)]

    def get_message(self, queue: str, msg_id: int) -> models.Message:
        """One message by id."""
        with self.backend.read() as tx:
            q = self._queue(tx, queue)
            row = tx.get_message(q.id, msg_id)
            if row is None:
                raise _item_error("not_found", msg_id)
            return views.message(row, q.name)

    def remove_message(self, queue: str, msg_id: int) -> None:
        """Delete one message by id."""
        with self.backend.write() as tx:
            q = self._queue(tx, queue)
            if not tx.delete_message(q.id, msg_id):
                raise _item_error("not_found", msg_id)
            tx.add_counters(q.id, depth=-1)

    def purge(self, queue: str) -> int:
        """Delete every message of a queue (not of its DLQ)."""
        with self.backend.write() as tx:
            q = self._queue(tx, queue)
            n = tx.purge(q.id)
            tx.add_counters(q.id, depth=-n)
        return n

    # --- DLQ ------------------------------------------------------------------------------------
    def dlq_list(
        self, queue: str, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        """Messages in a queue's DLQ by id, after ``after_id``."""
        check_range("limit", limit, 1, 1000)
        if after_id is not None:
            check_range("after_id", after_id, 0)
        with self.backend.read() as tx:
            dlq = self._dlq_of(tx, self._queue(tx, queue))
            rows = tx.list_messages(dlq.id, after_id or 0, limit)
            return [views.message(r, dlq.name) for r in rows]

    def dlq_requeue(self, queue: str, ids: Sequence[int] | None = None) -> int:
        """Move DLQ messages (all or ``ids``) back to their queue, attempts reset to 0."""
        now = self.clock()
        with self.backend.write() as tx:
            q = self._queue(tx, queue)
            dlq = self._dlq_of(tx, q)
            n = tx.move_all(dlq.id, q, None if ids is None else list(ids), now)
            tx.add_counters(dlq.id, depth=-n)
            tx.add_counters(q.id, depth=n)
        self.waker.notify((queue,))
        return n

    def dlq_purge(self, queue: str) -> int:
        """Delete every message of a queue's DLQ."""
        with self.backend.write() as tx:
            dlq = self._dlq_of(tx, self._queue(tx, queue))
            n = tx.purge(dlq.id)
            tx.add_counters(dlq.id, depth=-n)
        return n

    # --- housekeeping ---------------------------------------------------------------------------
    def compact(self, queue: str) -> int:
        """Remove the queue's expired messages and tombstones, then maintain the database."""
        now = self.clock()
        removed = 0
        with self.backend.write() as tx:
            q = self._queue(tx, queue)
            while True:
                reaped = tx.reap_messages(q.id, now, 10_000)
                tx.add_counters(q.id, depth=-reaped, expired_total=reaped)
                tombstones = tx.reap_dedup(q.id, now, 10_000)
                removed += reaped + tombstones
                if not reaped and not tombstones:
                    break
        self.backend.maintain()
        return removed

    def reap(self) -> int:
        """Remove a bounded number of expired messages and tombstones in every queue."""
        return self._write(self._reap_op())

    def _reap_op(self) -> Callable[[Tx], int]:
        now = self.clock()
        self._last_reap = now

        def op(tx: Tx) -> int:
            removed = 0
            for q in tx.list_queues():
                reaped = tx.reap_messages(q.id, now, REAP_LIMIT)
                tx.add_counters(q.id, depth=-reaped, expired_total=reaped)
                removed += reaped
            return removed + tx.reap_dedup(None, now, REAP_LIMIT)

        return op

    def _maybe_reap(self) -> None:
        if self.clock() - self._last_reap >= self._reap_interval:
            self.reap()

    def close(self) -> None:
        """Wake every long poll, finish pending writes and close the backend."""
        self.waker.close()
        self.backend.close()

    async def aclose(self) -> None:
        """``close`` for a service with a commit loop (call on that loop): pending writes of
        the group commit finish first."""
        self.waker.close()
        if self._merger is not None:
            self._merger.close()
        if self._committer is not None:
            await self._committer.aclose()
        self.backend.close()


def _check_batch_size(messages: Sequence[models.MessageIn]) -> None:
    if not 1 <= len(messages) <= models.MAX_BATCH_ENQUEUE:
        raise errors.ValidationError(f"a batch holds 1 to {models.MAX_BATCH_ENQUEUE} messages")


def _row(q: QueueRow, m: models.MessageIn, index: int, now: int) -> NewMessage:
    """The row of message ``index`` of an enqueue into ``q``, checked against its limits."""
    payload = bytes(m.payload)
    if len(payload) > q.max_payload_bytes:
        raise errors.PayloadTooLarge(
            f"message {index}: payload is {len(payload)} bytes; queue '{q.name}' allows "
            f"{q.max_payload_bytes}"
        )
    retention = q.retention_ms
    if m.delay_ms > retention:
        raise errors.ValidationError(
            f"message {index}: delay_ms must not exceed the queue's retention_ms ({retention})",
            details=[{"field": "delay_ms", "index": index}],
        )
    ttl = m.ttl_ms if m.ttl_ms is not None else retention
    return (
        q.id, payload.decode(), m.priority,
        _encode(m.attributes).decode() if m.attributes else None,
        now, now + m.delay_ms, now + ttl, q.lifo,
    )


def _log_reap_failure(future: asyncio.Future[int]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("reaping expired messages failed", exc_info=future.exception())


def _item_error(status: str, msg_id: int) -> errors.SqewError:
    if status == "lease_lost":
        return errors.LeaseLost(f"message {msg_id} was leased again since; the token is stale")
    return errors.MessageNotFound(f"message {msg_id} does not exist in this queue")


def item_error(result: models.ItemResult) -> errors.SqewError:
    """The error a failed single ack/nack raises."""
    return _item_error(result.status, result.id)


def _settings_columns(settings: models.QueueSettings, base: dict[str, object]) -> dict[str, object]:
    """Merge set fields over ``base`` and return the queue-table columns."""
    merged = dict(base)
    for name in models.SETTING_NAMES:
        value = getattr(settings, name)
        if value is not msgspec.UNSET:
            merged[name] = value
    rules.check_backoff(merged["backoff_base_ms"], merged["backoff_max_ms"])  # type: ignore[arg-type]
    rules.check_hmac_secret(merged["hmac_secret"])  # type: ignore[arg-type]
    order = merged.pop("order")
    merged["lifo"] = order == "lifo"
    return merged
