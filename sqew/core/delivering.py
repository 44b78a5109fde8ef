"""Delivering: leases. Claim (a poll's write), ack, nack, extend-lease, and ended leases.

Polls of one queue in one group commit merge into one claim of all their batches, handed out
in delivery order; acks of one queue share the statement that finds and counts the queue.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

from sqew import errors, models
from sqew.backends.base import (
    MISSED,
    ClaimQueue,
    FastPaths,
    MessageRow,
    Missed,
    QueueRow,
    Tx,
)
from sqew.core import rules, views
from sqew.core.writer import Op, Outcome

Leased = list[models.LeasedMessage]
ItemResults = list[models.ItemResult]
Extends = Sequence[tuple[int, str, int]]
"""``(id, token, ms)`` items of an extend-lease."""


def dlq_of(tx: Tx, q: QueueRow) -> QueueRow:
    """The dead-letter queue of ``q`` (a ValidationError if ``q`` is one itself)."""
    if q.parent_id is not None:
        raise errors.ValidationError(f"'{q.name}' is a dead-letter queue; name its queue")
    dlq = tx.get_queue(rules.dlq_name(q.name))
    if dlq is None:  # pragma: no cover - created and removed with its queue
        raise errors.InternalError()
    return dlq


def dead_letter_target(tx: Tx, q: QueueRow) -> QueueRow | None:
    """The queue ``q``'s messages are dead-lettered into (None for a DLQ): its named target,
    or its own ``<name>.dlq`` when it names none or the named queue is gone. Every move to a
    DLQ (a nack, an ended last lease seen by a poll or the reaper) goes through here.

    The transaction has locked ``q``'s row; the target's is locked here (a no-op when the
    operation's lock set held it already, ``lock_set``): only a target changed between that
    lock set's read and this one is locked out of id order, and a deadlock that may cause is
    a ``Conflict``, which the writer runs again."""
    if q.parent_id is not None:
        return None
    if q.dead_letter_target is not None:
        tx.lock_queues((q.dead_letter_target,))
        target = tx.get_queue(q.dead_letter_target)
        if target is not None:
            return target
    return dlq_of(tx, q)


def lock_set(tx: Tx, name: str) -> tuple[str, ...]:
    """The queues an operation that may dead-letter messages of queue ``name`` locks first:
    the queue, its own DLQ and its named target (read without a lock, so the rows are locked
    in one order, by id, with the others; ``dead_letter_target`` locks one changed since)."""
    row = tx.get_queue(name)
    target = row.dead_letter_target if row is not None else None
    return (name, rules.dlq_name(name)) + ((target,) if target else ())


def dead_letter_ended(tx: Tx, q: QueueRow, now: int) -> tuple[str | None, int]:
    """Dead-letter the messages of ``q`` whose last allowed lease ended at or before ``now``:
    the name of the DLQ if any moved, and how many."""
    dlq = dead_letter_target(tx, q)
    if dlq is None:  # a DLQ has no DLQ of its own
        return None, 0
    moved = tx.dead_letter_expired(q.id, now, q.max_attempts, dlq, q.name)
    if not moved:
        return None, 0
    tx.add_counters(q.id, depth=-moved, dead_lettered_total=moved)
    tx.add_counters(dlq.id, depth=moved)
    return dlq.name, moved


def expire_leases(tx: Tx, q: QueueRow, now: int) -> str | None:
    """Leases that ended at or before ``now``: dead-letter those on their last allowed
    attempt, make the others ready again (their token stays valid until a new lease). The
    DLQ's name if messages moved there."""
    dlq, _ = dead_letter_ended(tx, q, now)
    tx.release_expired(q.id, now)
    return dlq


def _miss(tx: Tx, q: QueueRow, msg_id: int) -> str:
    return "lease_lost" if tx.message_exists(q.id, msg_id) else "not_found"


def queue_row(tx: Tx, name: str) -> QueueRow:
    """The queue named ``name`` (``QueueNotFound`` if there is none)."""
    row = tx.get_queue(name)
    if row is None:
        raise errors.queue_not_found(name)
    return row


class Claim(Op[tuple[Leased, "int | None"]]):
    """Lease up to ``batch`` ready messages; with ``want_due``, also say when the next one
    is due if none was ready (a long poll sleeps until then).

    ``gone`` (optional) says whether the caller has left (a poll whose client disconnected):
    then the claim leases nothing, and leases it made in a transaction still running are given
    back before it commits (``give_back``).
    """

    __slots__ = ("batch", "gone", "notify", "queue", "shuffle", "visibility_ms", "want_due")
    # Claims skip locked messages; ended leases are expired after locking the queue (claim).
    locks_first = True
    gives_back = True
    has_fast = True

    def __init__(
        self, queue: str, batch: int, visibility_ms: int | None, *, want_due: bool = False,
        gone: Callable[[], bool] | None = None, shuffle: bool = False,
    ) -> None:
        self.queue = queue
        self.shuffle = shuffle
        self.batch = batch
        self.visibility_ms = visibility_ms
        self.want_due = want_due
        self.gone = gone
        self.notify: tuple[str, ...] = ()  # the DLQ, when the claim dead-lettered into it

    def key(self) -> Hashable | None:
        return None if self.want_due else ("claim", self.queue, self.visibility_ms, self.shuffle)

    def caller_gone(self) -> bool:
        return self.gone is not None and self.gone()

    def fast(self, paths: FastPaths, now: int) -> tuple[Leased, int | None] | Missed:
        """The claim alone, unless leases of the queue ended (they are swept first, in a
        transaction) or nothing was ready for a caller that wants to know when it will be."""
        if self.caller_gone():
            return [], None
        if self.shuffle:  # the fast claim takes the head of the delivery order
            return MISSED
        found = paths.claim(self.queue, now, self.batch, self.visibility_ms)
        if found is None or found is MISSED:  # (no such queue: ``run`` says so)
            return MISSED
        q, rows = found
        if not rows and self.want_due:
            return MISSED
        return [views.leased(r, q) for r in rows], None

    def run(self, tx: Tx, now: int) -> tuple[Leased, int | None]:
        if self.caller_gone():  # left while the group waited (for the write lock, say)
            return [], None
        leased, due, dlq = claim(tx, self.queue, self.batch, self.visibility_ms, now,
                                 self.want_due, self.shuffle)
        self.notify = (dlq,) if dlq else ()
        return leased, due

    @classmethod
    def run_merged(cls, tx: Tx, ops: Sequence[Any], now: int) -> list[Outcome]:
        """One claim for the batches of every poll whose caller is still there, handed out
        in delivery order (nothing for the others)."""
        parts: list[Claim] = list(ops)
        staying = [not p.caller_gone() for p in parts]
        first = parts[0]
        total = sum(p.batch for p, stays in zip(parts, staying, strict=True) if stays)
        leased: Leased = []
        if total:
            leased, _, dlq = claim(tx, first.queue, total, first.visibility_ms, now, False,
                                   first.shuffle)
            first.notify = (dlq,) if dlq else ()
        outcomes: list[Outcome] = []
        start = 0
        for p, stays in zip(parts, staying, strict=True):
            share = leased[start:start + p.batch] if stays else []
            outcomes.append((True, (share, None)))
            start += len(share)
        return outcomes

    def give_back(self, tx: Tx, result: tuple[Leased, int | None]) -> tuple[Leased, int | None]:
        """The leases of a caller that left, given back before the commit: each message as if
        never claimed (lease and token cleared, the attempt not counted, ready again in its
        place). Nothing is answered instead."""
        leased, _ = result
        if leased:
            tx.unclaim([(m.id, m.token) for m in leased])
            self.notify = (*self.notify, self.queue)  # ready again: wake waiting polls
        return [], None


def claim(
    tx: Tx, queue: str, batch: int, visibility_ms: int | None, now: int, want_due: bool,
    shuffle: bool = False,
) -> tuple[Leased, int | None, str | None]:
    """Lease up to ``batch`` messages of ``queue`` (random ready ones with ``shuffle``); when
    the next is due (if asked and none was ready); the DLQ's name if ended last leases moved
    there on the way."""
    # A shuffled claim takes the path of a queue whose leases ended (the by-name claim takes
    # the head of the order in one statement): the queue locked and read, ended leases swept,
    # then ``Tx.claim`` picks at random.
    rows: list[MessageRow] | None = None
    if not shuffle:
        found = tx.claim_by_name(queue, now, batch, visibility_ms)
        if found is None:
            raise errors.queue_not_found(queue)
        q, rows = found
    dlq = None
    if rows is None:  # leases ended: sweep them (the queue's rows first), then claim
        tx.lock_queues(lock_set(tx, queue))
        full = queue_row(tx, queue)  # read under its lock: its settings now, for all below
        q = ClaimQueue.of(full)
        dlq = expire_leases(tx, full, now)
        vis = full.visibility_ms if visibility_ms is None else visibility_ms
        rows = [] if q.paused else tx.claim(full.id, bool(full.lifo), now, batch, now + vis,
                                            shuffle)
    # Paused: no message is due until the resume, whose commit wakes the waiting polls.
    due = tx.next_due(q.id, now) if want_due and not rows and not q.paused else None
    return [views.leased(r, q) for r in rows], due, dlq


class Ack(Op[ItemResults]):
    """Acknowledge ``(id, token)`` items: ``acked`` / ``lease_lost`` / ``not_found`` each."""

    __slots__ = ("items", "queue")
    locks_first = True  # the counters first (``Tx.ack_by_name``), then the messages
    has_fast = True

    def __init__(self, queue: str, items: Sequence[tuple[int, str]]) -> None:
        self.queue = queue
        self.items = items

    def key(self) -> Hashable | None:
        return ("ack", self.queue)

    def fast(self, paths: FastPaths, now: int) -> ItemResults | Missed:
        found = paths.ack(self.queue, self.items, now)
        if found is None or found is MISSED:  # (no such queue: ``run`` says so)
            return MISSED
        return _ack_results(self.items, iter(found))

    def run(self, tx: Tx, now: int) -> ItemResults:
        return ack(tx, self.queue, [self.items], now)[0]

    @classmethod
    def run_merged(cls, tx: Tx, ops: Sequence[Any], now: int) -> list[Outcome]:
        parts: list[Ack] = list(ops)
        return [(True, out) for out in ack(tx, parts[0].queue, [p.items for p in parts], now)]


def ack(
    tx: Tx, queue: str, requests: Sequence[Sequence[tuple[int, str]]], now: int
) -> list[ItemResults]:
    """Acknowledge each request's items, in order."""
    found = tx.ack_by_name(queue, [item for items in requests for item in items], now)
    if found is None:
        raise errors.queue_not_found(queue)
    outcomes = iter(found)
    return [_ack_results(items, outcomes) for items in requests]


def _ack_results(
    items: Sequence[tuple[int, str]], outcomes: Iterator[bool | None]
) -> ItemResults:
    return [models.ItemResult(msg_id, _ACK_RESULT[next(outcomes)]) for msg_id, _ in items]


_ACK_RESULT: dict[bool | None, str] = {
    True: "acked", False: "lease_lost", None: "not_found",
}


class Nack(Op[ItemResults]):
    """Release leases for a retry with backoff, or dead-letter at ``max_attempts`` (at once
    for an item with ``dead_letter``: a permanent failure)."""

    __slots__ = ("items", "notify", "queue", "rng")

    def __init__(self, queue: str, items: Sequence[models.NackIn], rng: random.Random) -> None:
        self.queue = queue
        self.items = items
        self.rng = rng
        # Requeued messages become ready later (backoff); dead-lettered ones are ready now
        # (in the queue's dead-letter target, named by ``run``).
        self.notify: tuple[str, ...] = (queue, rules.dlq_name(queue))

    def lock_names(self, tx: Tx) -> tuple[str, ...] | None:
        return lock_set(tx, self.queue)

    def run(self, tx: Tx, now: int) -> ItemResults:
        out: ItemResults = []
        q = queue_row(tx, self.queue)
        dlq = dead_letter_target(tx, q)
        if dlq is not None:
            self.notify = (self.queue, dlq.name)
        if dlq is None and any(item.dead_letter for item in self.items):
            raise errors.ValidationError(
                f"'{q.name}' is a dead-letter queue: it has no DLQ to move a message to")
        nacked = dead = 0
        for item in self.items:
            status = self._nack(tx, q, dlq, item, now)
            nacked += status in ("requeued", "dead_lettered")
            dead += status == "dead_lettered"
            out.append(models.ItemResult(item.id, status))
        tx.add_counters(q.id, depth=-dead, nacked_total=nacked, dead_lettered_total=dead)
        if dlq is not None:
            tx.add_counters(dlq.id, depth=dead)
        return out

    def _nack(
        self, tx: Tx, q: QueueRow, dlq: QueueRow | None, item: models.NackIn, now: int
    ) -> str:
        # The attempts read here decide; the write checks the token again (another consumer
        # may lease the message in between, on a database that lets it), and attempts change
        # only with the token.
        attempts = tx.attempts_if_token(q.id, item.id, item.token)
        if attempts is None:
            return _miss(tx, q, item.id)
        if dlq is not None and (item.dead_letter or attempts >= q.max_attempts):
            done = tx.dead_letter(q.id, item.id, item.token, dlq, now, item.error, q.name)
            return "dead_lettered" if done else _miss(tx, q, item.id)
        delay = item.delay_ms
        if delay is None:
            delay = rules.backoff_ms(attempts, q.backoff_base_ms, q.backoff_max_ms, self.rng)
        done = tx.release(q.id, item.id, item.token, now + delay, item.error)
        return "requeued" if done else _miss(tx, q, item.id)


class ExtendLease(Op[ItemResults]):
    """Heartbeats: the lease of each held ``(id, token, ms)`` item ends ``ms`` after the
    transaction's now: ``extended`` (with that end), ``lease_lost`` or ``not_found`` each.
    ``single``: one item, whose miss fails the operation (the API's single form)."""

    __slots__ = ("items", "notify", "queue", "single")

    def __init__(self, queue: str, items: Extends, *, single: bool = False) -> None:
        self.queue = queue
        self.items = items
        self.single = single
        # A lease that now ends sooner than the longest wait (0: "give it back") may make
        # the message ready before the old end a waiting poll sleeps until: wake them. A
        # later end cannot matter to a poll waiting now (its wait ends first): heartbeats
        # wake nobody.
        self.notify = (queue,) if any(ms < models.MAX_WAIT_MS for _, _, ms in items) else ()

    def key(self) -> Hashable | None:
        return ("extend", self.queue)

    def run(self, tx: Tx, now: int) -> ItemResults:
        return self._answer(extend(tx, self.queue, [self.items], now)[0])

    @classmethod
    def run_merged(cls, tx: Tx, ops: Sequence[Any], now: int) -> list[Outcome]:
        parts: list[ExtendLease] = list(ops)
        outcomes: list[Outcome] = []
        for part, results in zip(
            parts, extend(tx, parts[0].queue, [p.items for p in parts], now), strict=True
        ):
            try:
                outcomes.append((True, part._answer(results)))
            except errors.SqewError as exc:  # a single item that missed: nothing was written
                outcomes.append((False, exc))
        return outcomes

    def _answer(self, results: ItemResults) -> ItemResults:
        if self.single and results[0].status != "extended":
            raise errors.for_item(results[0].status, results[0].id)
        return results


def extend(tx: Tx, queue: str, requests: Sequence[Extends], now: int) -> list[ItemResults]:
    """Extend each request's items, in order, in one statement where the backend can."""
    q = queue_row(tx, queue)
    found = iter(tx.extend(q.id, [(i, t, now + ms) for items in requests for i, t, ms in items]))
    return [[_extended(msg_id, next(found), now + ms) for msg_id, _, ms in items]
            for items in requests]


def _extended(msg_id: int, found: bool | None, until: int) -> models.ItemResult:
    if found:
        return models.ItemResult(msg_id, "extended", until)
    return models.ItemResult(msg_id, "lease_lost" if found is False else "not_found")
