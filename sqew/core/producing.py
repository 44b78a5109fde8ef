"""Producing: the enqueue operation (validation, idempotency, quotas, rows).

A plain enqueue (no idempotency key) finds and counts its queue and inserts its rows through
``Tx.enqueue_by_name`` (two statements on SQLite, one on PostgreSQL); plain enqueues to one
queue in one group commit merge into one such call. Alone, a plain enqueue to a queue without
quotas tries the backend's fast path first (``Enqueue.fast``). Each request is still
validated, checked against its queue's HMAC secret, admitted by the quotas and failed on its
own.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

import msgspec

from sqew import errors, models
from sqew.backends.base import MISSED, FastPaths, Missed, NewMessage, QueueLimits, QueueRow, Tx
from sqew.core import rules, signing
from sqew.core.delivering import queue_row
from sqew.core.writer import Op, Outcome

_encode = msgspec.json.encode
# ``NewMessage``'s own ``__new__`` is a Python function taking the fields one by one; one row
# per message of every enqueue is built here, so the fields go in as a tuple, in C.
_new_message = tuple.__new__

Results = list[models.EnqueueResult]


def check_batch(messages: Sequence[models.MessageIn]) -> None:
    """A batch holds 1 to ``MAX_BATCH_ENQUEUE`` messages."""
    if not 1 <= len(messages) <= models.MAX_BATCH_ENQUEUE:
        raise errors.ValidationError(f"a batch holds 1 to {models.MAX_BATCH_ENQUEUE} messages")


class Enqueue(Op[Results]):
    """Enqueue ``messages`` to ``queue`` all-or-nothing; duplicates return the first id.

    ``proof``: the signature and raw body of an enqueue that came over HTTP, checked against
    the queue's ``hmac_secret`` (read in this transaction) before anything else; None for a
    caller that is not checked (see ``QueueService.enqueue``). ``groups``: each message's
    ordered group (``QueueService.enqueue``), or None for none.
    """

    __slots__ = ("groups", "has_fast", "keyed", "locks_first", "messages", "notify", "proof",
                 "queue", "to_dlq")

    def __init__(
        self, queue: str, messages: Sequence[models.MessageIn],
        proof: signing.Proof | None = None, groups: Sequence[str | None] | None = None,
    ) -> None:
        check_batch(messages)
        if groups is not None and len(groups) != len(messages):
            raise errors.ValidationError("one group (or None) per message")
        self.queue = queue
        self.messages = messages
        self.proof = proof
        self.groups = groups
        # Grouped enqueues take the keyed way (alone, in a transaction): the only one whose
        # rows carry a group.
        self.keyed = groups is not None or any(m.idempotency_key is not None for m in messages)
        self.notify = (queue,)
        self.locks_first = not self.keyed  # ``reserve`` writes the queue's row first
        self.to_dlq = rules.is_dlq(queue)
        # A DLQ's enqueue reads its queue's settings too: in a transaction.
        self.has_fast = not self.keyed and not self.to_dlq

    def key(self) -> Hashable | None:
        # Keyed enqueues look their keys up one by one: they run alone.
        return None if self.keyed else ("enqueue", self.queue)

    def fast(self, paths: FastPaths, now: int) -> Results | Missed:
        """On the queue's settings as the backend has them cached; ``MISSED`` (nothing
        written) where they are not current, or would refuse a message."""
        def rows_for(q: QueueLimits) -> list[NewMessage]:
            if self.proof is not None and q.hmac_secret is not None:
                signing.verify(q.hmac_secret, self.proof, now, self.queue)
            return [_row(q, m, i, now) for i, m in enumerate(self.messages)]

        ids = paths.enqueue(self.queue, len(self.messages), rows_for)
        if ids is MISSED:
            return MISSED
        return [models.EnqueueResult(i, False) for i in ids]

    def run(self, tx: Tx, now: int) -> Results:
        if self.keyed:  # duplicates are found inside: count after
            q = within_queue_limit(tx, queue_row(tx, self.queue))
            self.check(tx, q.hmac_secret, now)
            return insert(tx, q, self.messages, now, self.groups)
        def rows_for(q: QueueLimits) -> list[NewMessage]:
            if self.to_dlq:
                q = within_queue_limit(tx, q)
            if self.proof is not None:
                self.check(tx, q.hmac_secret, now)
            rows = [_row(q, m, i, now) for i, m in enumerate(self.messages)]
            admit(tx, q, len(rows), q.depth - len(rows), now)
            return rows

        ids = tx.enqueue_by_name(self.queue, len(self.messages), rows_for)
        if ids is None:
            raise errors.queue_not_found(self.queue)
        return [models.EnqueueResult(i, False) for i in ids]

    def check(self, tx: Tx, secret: str | None, now: int) -> None:
        """Raise ``InvalidSignature`` unless the enqueue is unchecked or its proof holds.

        ``secret`` is the queue's own; on a DLQ the proof must hold its queue's secret when
        that queue has one: a DLQ's messages are requeued to its queue, whose consumers are
        handed them signed with that queue's secret, so an enqueue to ``q.dlq`` unsigned by
        it would launder a message past ``q``'s check (and a key bound to ``q`` reaches
        ``q.dlq``). Only a checked enqueue to a DLQ pays the extra read.
        """
        if self.proof is None:
            return
        if self.to_dlq:
            parent = tx.get_queue(rules.queue_of(self.queue))
            if parent is not None and parent.hmac_secret is not None:
                secret = parent.hmac_secret
        if secret is not None:
            signing.verify(secret, self.proof, now, self.queue)

    @classmethod
    def run_merged(cls, tx: Tx, ops: Sequence[Any], now: int) -> list[Outcome]:
        """Plain enqueues to one queue: one reservation and one insert for all."""
        parts: list[Enqueue] = list(ops)
        queue = parts[0].queue
        outcomes: list[Outcome] = []
        spans: list[tuple[int, int] | None] = []
        quotas: list[QueueLimits] = []

        def rows_for(q: QueueLimits) -> list[NewMessage]:  # (may run twice: starts afresh)
            outcomes.clear()
            spans.clear()
            if q.max_depth or q.rate_limit_per_s:  # quotas admit request by request, below
                quotas.append(q)
                return []
            q = within_queue_limit(tx, q)
            rows: list[NewMessage] = []
            for p in parts:
                try:  # a bad signature or message fails its own request only
                    p.check(tx, q.hmac_secret, now)
                    part = [_row(q, m, i, now) for i, m in enumerate(p.messages)]
                except errors.SqewError as exc:
                    outcomes.append((False, exc))
                    spans.append(None)
                    continue
                outcomes.append((True, None))
                spans.append((len(rows), len(part)))
                rows.extend(part)
            return rows

        total = sum(len(p.messages) for p in parts)
        ids = tx.enqueue_by_name(queue, total, rows_for)
        if ids is None:
            raise errors.queue_not_found(queue)
        if quotas:
            return [_alone(tx, quotas[-1], p, now) for p in parts]
        for index, span in enumerate(spans):
            if span is not None:
                start, count = span
                outcomes[index] = (
                    True, [models.EnqueueResult(i, False) for i in ids[start:start + count]]
                )
        return outcomes


def _alone(tx: Tx, q: QueueLimits, op: Enqueue, now: int) -> Outcome:
    try:
        op.check(tx, q.hmac_secret, now)
        with tx.savepoint():
            return True, insert(tx, within_queue_limit(tx, queue_row(tx, op.queue)),
                                op.messages, now, op.groups)
    except errors.SqewError as exc:
        return False, exc


def insert(
    tx: Tx, q: QueueRow, messages: Sequence[models.MessageIn], now: int,
    groups: Sequence[str | None] | None = None,
) -> Results:
    """Insert ``messages`` (of ``groups``, when given) into ``q``, idempotency keys looked up,
    then count them."""
    rows: list[NewMessage] = []
    slots: list[int | str] = []  # per input: index into rows, or the dedup key
    seen: dict[str, int] = {}  # key → index into rows (first of the batch)
    keys = list(dict.fromkeys(m.idempotency_key for m in messages if m.idempotency_key))
    known = tx.find_dedup(q.id, keys, now) if keys else {}  # key → stored message id
    for i, m in enumerate(messages):
        row = _row(q, m, i, now, None if groups is None else groups[i])  # (a duplicate is
        # validated like any message)
        key = m.idempotency_key
        if key is not None:
            if key in seen or key in known:
                slots.append(key)
                continue
            seen[key] = len(rows)
        slots.append(len(rows))
        rows.append(row)
    ids: list[int] = []
    if rows:
        admit(tx, q, len(rows), q.depth, now)
        ids = tx.insert_messages(rows)
        if seen:
            expires = now + q.dedup_window_ms
            tx.put_dedup([(q.id, k, ids[j], expires) for k, j in seen.items()])
        tx.add_counters(q.id, depth=len(rows), enqueued_total=len(rows))
    if len(ids) == len(slots):  # no duplicates: results are the new ids in order
        return [models.EnqueueResult(i, False) for i in ids]
    out: Results = []
    for slot in slots:
        if isinstance(slot, int):
            out.append(models.EnqueueResult(ids[slot], False))
        else:
            mid = known[slot] if slot in known else ids[seen[slot]]
            out.append(models.EnqueueResult(mid, True))
    return out


Limits = TypeVar("Limits", QueueRow, QueueLimits)


def within_queue_limit(tx: Tx, q: Limits) -> Limits:
    """``q``'s limits, where ``q`` is a DLQ with its queue's ``max_payload_bytes`` if that is
    smaller: a message enqueued into a DLQ by hand must fit the queue it may be requeued to."""
    if not rules.is_dlq(q.name):
        return q
    parent = tx.get_queue(rules.queue_of(q.name))
    if parent is None or parent.max_payload_bytes >= q.max_payload_bytes:
        return q
    return q._replace(max_payload_bytes=parent.max_payload_bytes)


def admit(tx: Tx, q: QueueRow | QueueLimits, count: int, depth: int, now: int) -> None:
    """Quotas: ``max_depth`` (``depth`` before this enqueue) and the rate limit's bucket."""
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


def _row(
    q: QueueRow | QueueLimits, m: models.MessageIn, index: int, now: int,
    group: str | None = None,
) -> NewMessage:
    """The row of message ``index`` (of ``group``) of an enqueue into ``q``, checked against
    its limits."""
    payload = bytes(m.payload)
    if len(payload) > q.max_payload_bytes:
        raise errors.PayloadTooLarge(
            f"message {index}: payload is {len(payload)} bytes; queue '{q.name}' allows "
            f"{q.max_payload_bytes}"
        )
    retention = q.retention_ms
    if m.delay_ms > retention:
        must = f"must not exceed the queue's retention_ms ({retention})"
        raise errors.ValidationError(
            f"message {index}: delay_ms {must}",
            details=[{"field": "delay_ms", "message": must, "index": index}],
        )
    ttl = m.ttl_ms if m.ttl_ms is not None else retention
    if m.delay_ms >= ttl:  # it would expire before it could be delivered
        must = f"must be less than the message's ttl_ms ({ttl}): it would expire first"
        raise errors.ValidationError(
            f"message {index}: delay_ms ({m.delay_ms}) {must}",
            details=[{"field": "delay_ms", "message": must, "index": index}],
        )
    return _new_message(NewMessage, (
        q.id, payload.decode(), m.priority,
        _encode(m.attributes).decode() if m.attributes else None,
        now, now + m.delay_ms, now + ttl, q.lifo, m.traceparent, m.tracestate, group,
    ))
