"""Backpressure: the overload state the group commit keeps (thresholds, hysteresis, the moving
commit time), and the service refusing enqueues, and only enqueues, while it holds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from sqew import errors, models
from sqew.backends import open_backend
from sqew.backends.sqlite import lockfile
from sqew.core.pressure import CLEAR_RATIO, RETRY_AFTER_S, Pressure, Thresholds
from sqew.core.service import QueueService


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pressure(**limits: int) -> tuple[Pressure, Ticks, list[bool]]:
    ticks, changes = Ticks(), []
    state = Pressure(Thresholds(**limits), monotonic=ticks,
                     on_change=lambda p: changes.append(p.overloaded))
    return state, ticks, changes


def test_on_past_a_threshold_off_below_half_of_it_after_the_retry_time() -> None:
    state, ticks, changes = pressure(pending_writes=100)
    state.observe(99, 0.001, None)
    assert not state.overloaded
    state.observe(100, 0.001, None)
    assert state.overloaded and state.reasons == ("pending_writes",)
    ticks.now += RETRY_AFTER_S
    state.observe(int(100 * CLEAR_RATIO), 0.001, None)  # not below half: still on
    assert state.overloaded
    ticks.now += 0.01
    state.observe(10, 0.001, None)
    assert not state.overloaded and state.reasons == ()
    assert changes == [True, False]


def test_it_holds_at_least_the_retry_time() -> None:
    state, ticks, _ = pressure(pending_writes=10)
    state.observe(50, 0.0, None)
    ticks.now += RETRY_AFTER_S / 2
    state.observe(0, 0.0, None)
    assert state.overloaded  # callers were told to come back after RETRY_AFTER_S
    ticks.now += RETRY_AFTER_S / 2
    state.observe(0, 0.0, None)
    assert not state.overloaded


def test_the_commit_time_is_a_moving_average_over_time() -> None:
    state, ticks, _ = pressure(commit_ms=100)
    state.observe(0, 0.001, None)
    for _ in range(5):  # one slow group among fast ones, 1 ms apart, barely moves it
        ticks.now += 0.001
        state.observe(0, 0.001, None)
    ticks.now += 0.001
    state.observe(0, 0.5, None)
    assert state.commit_s < 0.1 and not state.overloaded
    for _ in range(100):  # slow for long: on
        ticks.now += 0.01
        state.observe(0, 0.5, None)
    assert state.overloaded and state.reasons == ("commit_ms",)
    ticks.now += 10  # after a long pause the next group's time counts almost alone
    state.observe(0, 0.001, None)
    assert state.commit_s < 0.01 and not state.overloaded


def test_the_write_log_and_zero_thresholds() -> None:
    state, _, _ = pressure(wal_bytes=1000)
    state.observe(10**6, 10.0, 999)  # pending and commit time have no threshold: ignored
    assert not state.overloaded
    state.observe(0, 0.0, None)  # unknown: the last seen backlog stays
    assert state.backlog == 999
    state.observe(0, 0.0, 1000)
    assert state.overloaded and state.reasons == ("wal_bytes",)
    assert "write log" in state.describe()


def msg(n: int) -> models.MessageIn:
    return models.MessageIn(payload=msgspec.Raw(msgspec.json.encode(n)))


def test_an_overloaded_service_refuses_enqueues_and_serves_consumers(tmp_path: Path) -> None:
    """The committers' write lock held by another holder for a moment makes a group slow:
    enqueues are refused from then on; polls, acks, nacks and extends go on."""
    db = tmp_path / "q.db"

    async def main() -> None:
        service = QueueService(open_backend(db), group_commit=True, offload=asyncio.to_thread,
                               backpressure=Thresholds(commit_ms=50))
        try:
            await service.create_queue(models.QueueCreate(name="q"))
            await service.enqueue("q", [msg(i) for i in range(4)])
            assert service.pressure is not None and not service.pressure.overloaded
            other = lockfile.LockFile(db)  # another process's committer, say
            assert other.acquire(wait=False)
            waiting = asyncio.ensure_future(service.enqueue("q", [msg(4)]))
            await asyncio.sleep(0.5)  # the group waits for the lock this long: a slow commit
            other.close()
            await waiting  # accepted before the state turned on: committed
            assert service.pressure.overloaded
            assert service.pressure.reasons == ("commit_ms",)
            with pytest.raises(errors.Overloaded) as refused:
                await service.enqueue("q", [msg(5)])
            assert refused.value.retry_after == RETRY_AFTER_S
            got = await service.poll("q", batch=3)
            assert [m.payload for m in got] == [msgspec.Raw(b"0"), msgspec.Raw(b"1"),
                                                msgspec.Raw(b"2")]
            await service.extend_lease("q", got[0].id, got[0].token, 1000)
            acked = await service.ack("q", [(got[0].id, got[0].token)])
            nacked = await service.nack("q", [models.NackIn(id=got[1].id, token=got[1].token)])
            assert [r.status for r in acked + nacked] == ["acked", "requeued"]
            stats = await service.stats("q")
            assert (stats.enqueued_total, stats.acked_total, stats.nacked_total) == (5, 1, 1)
        finally:
            await service.aclose()

    asyncio.run(main())


def test_without_group_commit_there_is_no_backpressure(tmp_path: Path) -> None:
    service = QueueService(open_backend(tmp_path / "q.db"), backpressure=Thresholds(1, 1, 1))
    try:
        assert service.pressure is None  # a direct writer blocks its caller: no backlog
    finally:
        service.close()
