"""Group commit: the operations of concurrent callers share one transaction.

Under concurrency a commit per request makes the database the bottleneck (and, with
synchronous=FULL, one fsync per request). ``GroupWriter`` gathers the operations submitted
during one event-loop turn into a group, runs the group in one transaction and resolves every
caller's future only after the commit, so a success still means "committed". Operations of one
kind on one queue (same ``Op.key``) run merged: one counting statement and one multi-row insert
for many enqueues, one claim for many polls.

Where the statements run is the backend's call (``Backend.statements_on_loop``): SQLite's take
microseconds, and handing each to a thread and back cost more than the statements (thread
wake-ups, the GIL passed back and forth at every call), so they run on the loop; a database
across a network runs the whole group through ``offload``. Waiting (a write lock held
elsewhere, a commit that waits for the disk) is the session's, and goes through ``offload``.

If an operation fails, the attempt is rolled back and the group runs again with each unit in a
savepoint, so the failing one is rolled back alone. After any error the transaction is checked:
some errors (SQLite's full disk) end the whole transaction by themselves, and then every
operation of the group fails alike: nothing of it was committed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from sqew import errors
from sqew.backends.base import Backend, Tx, Waiter, WriteSession
from sqew.backends.errors import Conflict
from sqew.core.clock import Clock
from sqew.core.pressure import Pressure
from sqew.core.writer import (
    CONFLICT_ATTEMPTS,
    NO_OBSERVER,
    Offload,
    Op,
    Outcome,
    WriteObserver,
    Writer,
)

R = TypeVar("R")
T = TypeVar("T")
MAX_GROUP = 512
"""Most operations in one transaction: bounds the latency a large group adds."""
log = logging.getLogger("sqew.writer")

Item = tuple[Op[Any], "asyncio.Future[Any]"]
Unit = list[Item]
"""Operations that run together: one alone, or several of one kind merged."""


class _GroupFailed(Exception):
    """The transaction ended under the group: every operation fails with ``error``."""

    def __init__(self, error: errors.SqewError) -> None:
        super().__init__(error.message)
        self.error = error


class GroupWriter(Writer):
    """Runs operations many per transaction on the event loop it was built on.

    Args:
        backend: the database; the writer takes a dedicated write session of it.
        clock: read once per group, inside its transaction.
        waiter: told which queues a group's committed operations changed.
        offload: runs blocking steps (waits; every statement if the backend's may not run
            on the loop).
        observer: told each transaction's duration and operation count (metrics).
        pressure: told after each group how many operations wait and how long its
            transaction took (backpressure; None: not measured).
    """

    def __init__(
        self, backend: Backend, clock: Clock, waiter: Waiter, offload: Offload[Any],
        observer: WriteObserver = NO_OBSERVER,
        pressure: Pressure | None = None,
    ) -> None:
        self._session: WriteSession = backend.write_session()
        self._on_loop = backend.statements_on_loop
        self._clock = clock
        self._waiter = waiter
        self._offload = offload
        self._observer = observer
        self._loop = asyncio.get_running_loop()
        self._pending: list[Item] = []
        self._drain: asyncio.Task[None] | None = None
        self._closed = False
        self._pressure = pressure

    async def write(self, op: Op[R]) -> R:
        return await self._add(op)

    def submit(self, op: Op[R], then: Callable[[R | None], None] | None = None) -> None:
        future = self._add(op)
        future.add_done_callback(_log_failure)
        if then is not None:
            future.add_done_callback(lambda f: then(_result(f)))

    def _add(self, op: Op[R]) -> asyncio.Future[R]:
        if self._closed:
            raise errors.Unavailable("the service is shutting down")
        future: asyncio.Future[R] = self._loop.create_future()
        self._pending.append((op, future))
        if self._drain is None:
            # A task, not a direct call: it starts after the callbacks already due on this
            # loop turn, so the requests that arrived together are in one group.
            self._drain = self._loop.create_task(self._run())
        return future

    async def aclose(self) -> None:
        """Finish pending operations, then close the session (call on the loop)."""
        self._closed = True
        if self._drain is not None:
            await self._drain
        self._session.close()

    # --- running --------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            # One more loop turn before the first group: requests read in the same batch of
            # socket events reach their write a turn or two apart (reading the body awaits),
            # and waiting for them makes the groups under load larger (docs/benchmarks.md).
            await asyncio.sleep(0)
            while self._pending:
                group = self._pending[:MAX_GROUP]
                del self._pending[:MAX_GROUP]
                seconds = await self._commit(group)
                if self._pressure is not None:
                    self._pressure.observe(len(self._pending), seconds,
                                           self._session.write_backlog())
        finally:
            self._drain = None

    async def _commit(self, group: list[Item]) -> float:
        """Run the group's transaction; how long it took (0 for a group nobody waits for)."""
        group = _live(group)
        if not group:
            return 0.0
        start = time.perf_counter()
        try:
            await self._transaction(group)
        finally:
            seconds = time.perf_counter() - start
            self._observer.transaction(seconds)
            self._observer.group(len(group))
        return seconds

    async def _transaction(self, group: list[Item]) -> None:
        try:
            await self._session.begin(self._offload)
        except Exception as exc:
            _fail(group, exc)
            return
        try:
            outcomes = await self._give_back(await self._run_group(group))
            await self._session.commit(self._offload)
        except _GroupFailed as failed:
            self._abandon()
            _fail(group, failed.error)
            return
        except Exception as exc:  # the commit failed: nobody's write happened
            self._abandon()
            _fail(group, exc)
            return
        self._resolve(outcomes)

    async def _run_group(self, group: list[Item]) -> list[tuple[Item, Outcome]]:
        """The group's outcomes in the transaction just begun: all at once, or (after an
        operation failed) unit by unit; the whole group again, in a new transaction, when the
        database aborted it for a conflict with another (a deadlock between replicas)."""
        isolated, conflicts = False, 0
        while True:
            # Callers that gave up while the group waited (for the lock, a disconnect, a
            # shutdown past its grace) are left out: a poll of theirs would lease messages to
            # nobody.
            units = _units(_live(group))
            now = self._clock()
            run = self._isolated if isolated else self._optimistic
            try:
                outcomes = await self._body(functools.partial(run, units, now))
            except _Conflict as conflict:  # rolled back
                conflicts += 1
                if conflicts >= CONFLICT_ATTEMPTS:
                    raise _GroupFailed(conflict.cause) from conflict.cause
                log.info("a group conflicted with another transaction; running it again")
            else:
                if outcomes is not None:
                    return outcomes
                isolated = True  # an operation failed and all was rolled back: unit by unit
            await self._session.begin(self._offload)

    async def _give_back(
        self, outcomes: list[tuple[Item, Outcome]]
    ) -> list[tuple[Item, Outcome]]:
        """``outcomes``, with what callers that left while the group ran would have got given
        back in its transaction, before the commit (a poll's leases: nobody would receive
        them). A caller that leaves during the commit itself is too late for this."""
        gone = [i for i, ((op, future), (ok, _)) in enumerate(outcomes)
                if ok and op.gives_back and (future.done() or op.caller_gone())]
        if not gone:
            return outcomes

        def give_back() -> None:
            tx = self._session.tx
            with self._session.driver_errors():
                for i in gone:
                    (op, future), (_, value) = outcomes[i]
                    outcomes[i] = ((op, future), (True, op.give_back(tx, value)))
                _notified(tx, [outcomes[i] for i in gone])  # given back: ready again

        await self._body(give_back)
        return outcomes

    async def _body(self, fn: Callable[[], T]) -> T:
        if self._on_loop:
            return fn()
        result: T = await self._offload(fn)
        return result

    def _optimistic(self, units: list[Unit], now: int) -> list[tuple[Item, Outcome]] | None:
        """The whole group without savepoints (two statements fewer per unit; operations
        rarely fail); None, rolled back, if one raised."""
        tx = self._session.tx
        try:
            with self._session.driver_errors():
                _lock_queues(tx, units)
                outcomes = [pair for unit in units for pair in _run_unit(tx, unit, now)]
        except Exception as exc:
            self._check_transaction(exc)
            self._rollback_for(exc)
            return None
        return _notified(tx, outcomes)

    def _isolated(self, units: list[Unit], now: int) -> list[tuple[Item, Outcome]]:
        """Each unit in a savepoint: one failure fails only its own operations."""
        tx = self._session.tx
        with self._session.driver_errors():
            _lock_queues(tx, units)
        outcomes = [pair for unit in units for pair in self._isolated_unit(tx, unit, now)]
        return _notified(tx, outcomes)

    def _isolated_unit(self, tx: Tx, unit: Unit, now: int) -> list[tuple[Item, Outcome]]:
        try:
            with tx.savepoint():  # (which raises driver errors as SqewErrors)
                return _run_unit(tx, unit, now)
        except Conflict as exc:  # the whole group runs again (its locks let go first)
            self._check_transaction(exc)
            self._rollback_for(exc)
            raise AssertionError("unreachable") from exc
        except Exception as exc:  # fails this unit alone (a bug, too: InternalError)
            self._check_transaction(exc)
            err = _as_sqew(exc)
            if isinstance(err, errors.InternalError):
                log.error("write operation failed", exc_info=exc)
            return [(item, (False, err)) for item in unit]

    def _rollback_for(self, exc: BaseException) -> None:
        """Roll the group back after ``exc``; raise ``_Conflict`` if it was a conflict."""
        try:
            self._session.rollback()
        except Exception as rollback_exc:
            raise _GroupFailed(_as_sqew(rollback_exc)) from rollback_exc
        if isinstance(exc, Conflict):
            raise _Conflict(exc)

    def _check_transaction(self, exc: BaseException) -> None:
        if not self._session.in_transaction:
            raise _GroupFailed(_as_sqew(exc)) from exc

    def _abandon(self) -> None:
        try:
            self._session.rollback()
        except Exception:
            log.warning("rolling back a failed group failed", exc_info=True)

    def _resolve(self, outcomes: list[tuple[Item, Outcome]]) -> None:
        notify: set[str] = set()
        for (op, future), (ok, value) in outcomes:
            if ok and op.notify:
                notify.update(op.notify)
            if future.done():  # the caller was cancelled meanwhile
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        if notify:
            self._waiter.changed(notify)


def _notified(tx: Tx, outcomes: list[tuple[Item, Outcome]]) -> list[tuple[Item, Outcome]]:
    """``outcomes``, after telling other processes' waiters (``Tx.notify``, sent with the
    commit) which queues the group's successful operations changed."""
    queues = {q for (op, _), (ok, _) in outcomes if ok for q in op.notify}
    if queues:
        tx.notify(sorted(queues))
    return outcomes


class _Conflict(Exception):
    """The database aborted the group's transaction for a conflict (rolled back): run it
    again."""

    def __init__(self, cause: Conflict) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _live(group: list[Item]) -> list[Item]:
    return [item for item in group if not item[1].done()]


def _units(group: list[Item]) -> list[Unit]:
    """Operations with the same key merged into one unit, in order of first appearance."""
    units: list[Unit] = []
    by_key: dict[Hashable, Unit] = {}
    for item in group:
        key = item[0].key()
        if key is None:
            units.append([item])
            continue
        unit = by_key.get(key)
        if unit is None:
            unit = by_key[key] = []
            units.append(unit)
        unit.append(item)
    return units


def _lock_queues(tx: Tx, units: list[Unit]) -> None:
    """Lock the rows of every queue the group may write, in one order, before any message
    row (``Tx.lock_queues``): a lone unit of an operation that does so itself needs none."""
    ops = [op for unit in units for op, _ in unit]
    if len(units) == 1 and ops[0].locks_first:
        return
    names: set[str] = set()
    for op in ops:
        queues = op.lock_names(tx)
        if queues is None:
            tx.lock_queues(None)
            return
        names.update(queues)
    tx.lock_queues(names)


def _run_unit(tx: Tx, unit: Unit, now: int) -> list[tuple[Item, Outcome]]:
    if len(unit) == 1:
        op = unit[0][0]
        return [(unit[0], (True, op.run(tx, now)))]
    ops = [op for op, _ in unit]
    outcomes = type(ops[0]).run_merged(tx, ops, now)
    return list(zip(unit, outcomes, strict=True))


def _result(future: asyncio.Future[R]) -> R | None:
    if future.cancelled() or future.exception() is not None:
        return None
    return future.result()


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("a background write failed", exc_info=future.exception())


def _as_sqew(exc: BaseException) -> errors.SqewError:
    """``exc`` as a caller sees it: a ``SqewError`` as it is (the backend raised driver errors
    as theirs), anything else (a bug) as ``InternalError``."""
    return exc if isinstance(exc, errors.SqewError) else errors.InternalError()


def _fail(group: list[Item], exc: BaseException) -> None:
    err = _as_sqew(exc)
    if isinstance(err, errors.InternalError):
        log.error("group commit failed", exc_info=exc)
    for _, future in group:
        if not future.done():
            future.set_exception(err)
