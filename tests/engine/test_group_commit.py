"""The server's group commit, driven in-process: requests submitted on one loop turn share one
transaction, merged plain enqueues stay separate requests, and every success is committed."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import msgspec
import pytest

import sqew
from sqew import errors, models
from sqew.backends import open_backend
from sqew.backends.base import WriteSession
from sqew.backends.sqlite import SqliteBackend
from sqew.backends.sqlite import connection as sqlite_connection
from sqew.core import signing
from sqew.core.service import QueueService
from sqew.server import runtime as server_runtime

T = TypeVar("T")


def msg(payload: Any, **fields: Any) -> models.MessageIn:
    return models.MessageIn(payload=msgspec.Raw(msgspec.json.encode(payload)), **fields)


def on_loop(
    db: Path, body: Callable[[QueueService], Awaitable[T]], sql: list[str] | None = None
) -> T:
    """Run ``body`` with a service whose group commit runs on a fresh event loop (every SQL
    statement it runs is appended to ``sql``). No poll reaps first, as in a server, whose
    timer reaps (a reaper run is a transaction per queue: the groups here are what counts)."""

    async def main() -> T:
        trace = sql.append if sql is not None else None
        service = QueueService(open_backend(db, trace=trace), group_commit=True,
                               offload=asyncio.to_thread, reap_when_due=False)
        try:
            return await body(service)
        finally:
            await service.aclose()

    return asyncio.run(main())


def soon_enqueue(s: QueueService, queue: str, messages: list[models.MessageIn]) -> Any:
    return soon(s.enqueue(queue, messages))


def soon_poll(s: QueueService, queue: str, batch: int) -> Any:
    return soon(s.poll(queue, batch=batch))


def soon_ack(s: QueueService, queue: str, items: list[tuple[int, str]]) -> Any:
    return soon(s.ack(queue, items))


def soon(call: Any) -> asyncio.Future[Any]:
    """Start a service call now; its write joins the group of this loop turn."""
    return asyncio.ensure_future(call)


async def settle(futures: list[asyncio.Future[Any]]) -> list[Any]:
    """Each future's result, or its exception's error code."""
    out: list[Any] = []
    for f in await asyncio.gather(*futures, return_exceptions=True):
        out.append(f.code if isinstance(f, errors.SqewError) else f)
    return out


def commits(db: Path, body: Callable[[QueueService], Awaitable[T]]) -> tuple[T, int]:
    """``on_loop(db, body)`` and how many transactions it committed."""
    sql: list[str] = []
    result = on_loop(db, body, sql)
    return result, sum(1 for s in sql if s.strip().upper() == "COMMIT")


def _store(path: str) -> str:
    with sqew.Client(path) as c:
        c.create_queue("q", max_payload_bytes=100)
        c.create_queue("capped", max_depth=5)
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A store with queues ``q`` and ``capped``: a SQLite file, or a database on the tests'
    PostgreSQL server (its URL; the group commit is the same code on both)."""
    if request.param == "sqlite":
        return Path(_store(str(tmp_path / "g.db")))
    import targets

    store = targets.postgres(tmp_path)
    request.addfinalizer(store.drop)
    return _store(store.url)


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    """The SQLite store of ``db``, for tests of SQLite's locks and files."""
    return Path(_store(str(tmp_path / "g.db")))


def test_concurrent_plain_enqueues_share_one_commit_and_fail_alone(db: Path) -> None:
    async def body(s: QueueService) -> list[Any]:
        futures = []
        for i in range(30):
            if i % 10 == 3:
                futures.append(soon_enqueue(s, "q", [msg("x" * 200)]))  # too large
            elif i % 10 == 7:
                # a batch fails whole
                futures.append(soon_enqueue(s, "q", [msg(i), msg("x" * 200)]))
            elif i % 10 == 9:
                futures.append(soon_enqueue(s, "nope", [msg(i)]))
            else:
                futures.append(soon_enqueue(s, "q", [msg(i), msg(i)] if i % 2 else [msg(i)]))
        return await settle(futures)

    outcomes, writes = commits(db, body)
    assert writes == 1  # one group: one transaction for all 30 requests
    ids: list[int] = []
    for i, got in enumerate(outcomes):
        if i % 10 in (3, 7):
            assert got == "PayloadTooLarge"
        elif i % 10 == 9:
            assert got == "QueueNotFound"
        else:
            assert [r.duplicate for r in got] == [False] * (2 if i % 2 else 1)
            ids += [r.message_id for r in got]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)  # in request order, unique
    with sqew.Client(str(db)) as c:
        stats = c.stats("q")
        assert stats.ready == stats.enqueued_total == len(ids)
        stored = [m.id for m in c.peek("q", limit=100)]
        assert sorted(stored) == ids


def test_merged_enqueues_respect_max_depth_request_by_request(db: Path) -> None:
    async def body(s: QueueService) -> list[Any]:
        sizes = [2, 2, 2, 1, 3]  # 2+2 fit, the third would reach 6 > 5, then 1 fits, 3 not
        return await settle([soon_enqueue(s, "capped", [msg(n)] * n) for n in sizes])

    outcomes, _ = commits(db, body)
    assert [o if isinstance(o, str) else len(o) for o in outcomes] == [
        2, 2, "QueueFull", 1, "QueueFull"]
    with sqew.Client(str(db)) as c:
        stats = c.stats("capped")
        assert stats.ready == stats.enqueued_total == 5


def test_merged_enqueues_with_bad_signatures_fail_alone_in_one_commit(db: Path) -> None:
    secret = "a-secret-of-16-bytes-or-more"
    with sqew.Client(str(db)) as c:
        c.create_queue("signed", hmac_secret=secret)
    body = b'{"payload": 1}'
    t = int(time.time())
    good = signing.Proof(signing.header(secret, body, t), body)
    bad = [signing.Proof(None, body), signing.Proof(signing.header(secret, b"x", t), body),
           signing.Proof("t=1", body), signing.Proof(signing.header(secret, body, t - 301), body)]

    async def body_(s: QueueService) -> list[Any]:
        futures = []
        for i in range(20):
            proof = bad[i // 2 % 4] if i % 2 else good
            futures.append(soon(s.enqueue("signed", [msg(i)], proof)))
        futures.append(soon(s.enqueue("signed", [msg("trusted")])))  # no proof: not checked
        return await settle(futures)

    outcomes, writes = commits(db, body_)
    assert writes == 1
    assert ["ok" if isinstance(o, list) else o for o in outcomes] == (
        ["ok", "InvalidSignature"] * 10 + ["ok"])
    with sqew.Client(str(db)) as c:
        assert c.stats("signed").ready == c.stats("signed").enqueued_total == 11


def test_keyed_enqueues_and_other_writes_join_the_same_group(db: Path) -> None:
    async def body(s: QueueService) -> list[Any]:
        return await settle([
            soon_enqueue(s, "q", [msg(1, idempotency_key="k")]),
            soon_enqueue(s, "q", [msg(2)]),
            soon_enqueue(s, "q", [msg(3, idempotency_key="k")]),
            soon_poll(s, "q", 10),
        ])

    (first, plain, dup, polled), writes = commits(db, body)
    assert writes == 1
    assert first[0].duplicate is False and dup[0].duplicate is True
    assert dup[0].message_id == first[0].message_id
    # The poll was submitted last but may see the merged plain enqueue (it joined the group
    # at its first request's place); it never sees more than the group wrote.
    assert {m.id for m in polled} <= {first[0].message_id, plain[0].message_id}


def test_pending_writes_finish_before_close_and_later_ones_are_refused(db: Path) -> None:
    async def body(s: QueueService) -> tuple[list[Any], str]:
        futures = [soon_enqueue(s, "q", [msg(i)]) for i in range(5)]
        closing = asyncio.ensure_future(s.aclose())
        await asyncio.sleep(0)
        late = (await settle([soon_enqueue(s, "q", [msg("late")])]))[0]
        await closing
        return await settle(futures), late

    async def run(s: QueueService) -> tuple[list[Any], str]:
        return await body(s)

    (outcomes, late), _ = commits(db, run)
    assert all(isinstance(o, list) for o in outcomes)
    assert late == "Unavailable"
    with sqew.Client(str(db)) as c:
        assert c.stats("q").ready == 5


def test_polls_of_one_group_share_one_claim_in_delivery_order(db: Path) -> None:
    with sqew.Client(str(db)) as c:
        ids = [r.message_id for r in c.enqueue_batch("q", [{"payload": i} for i in range(10)])]
        urgent = c.enqueue("q", "urgent", priority=5).message_id

    async def body(s: QueueService) -> list[Any]:
        return await settle([soon_poll(s, "q", 3) for _ in range(5)])

    polls, writes = commits(db, body)
    assert writes == 1
    got = [[m.id for m in p] for p in polls]
    assert got == [[urgent, *ids[:2]], ids[2:5], ids[5:8], ids[8:10], []]
    assert all(m.attempts == 1 and m.token for p in polls for m in p)
    assert len({m.token for p in polls for m in p}) == 11


def test_acks_of_one_group_share_one_count_and_keep_per_item_statuses(db: Path) -> None:
    with sqew.Client(str(db)) as c:
        c.enqueue_batch("q", [{"payload": i} for i in range(6)])
        held = c.poll("q", batch=6)

    async def body(s: QueueService) -> list[Any]:
        return await settle([
            soon_ack(s, "q", [(held[0].id, held[0].token), (held[1].id, "stale")]),
            soon_ack(s, "q", [(held[2].id, held[2].token), (10**9, "t")]),
            soon_ack(s, "q", [(held[0].id, held[0].token)]),  # already acked just before
            soon_ack(s, "nope", [(held[3].id, held[3].token)]),
            soon_ack(s, "q", [(m.id, m.token) for m in held[3:]]),
        ])

    outcomes, writes = commits(db, body)
    assert writes == 1
    statuses = [o if isinstance(o, str) else [r.status for r in o] for o in outcomes]
    assert statuses == [["acked", "lease_lost"], ["acked", "not_found"], ["not_found"],
                        "QueueNotFound", ["acked"] * 3]
    with sqew.Client(str(db)) as c:
        stats = c.stats("q")
        assert (stats.acked_total, stats.leased, stats.ready) == (5, 1, 0)


def test_extends_of_one_group_run_merged_and_a_single_one_that_missed_fails_alone(
    db: Path,
) -> None:
    with sqew.Client(str(db)) as c:
        c.enqueue_batch("q", [{"payload": i} for i in range(4)])
        held = c.poll("q", batch=4)
    a, b, d, e = held
    sql: list[str] = []

    async def body(s: QueueService) -> list[Any]:
        return await settle([
            soon(s.extend_leases("q", [(a.id, a.token, 60_000), (b.id, "stale", 60_000)])),
            soon(s.extend_lease("q", d.id, "stale", 60_000)),  # the single form: an error
            soon(s.extend_lease("q", e.id, e.token, 60_000)),
            soon(s.extend_leases("q", [(b.id, b.token, 0)])),  # b given back
        ])

    first, missed, single, back = on_loop(db, body, sql)
    assert [r.status for r in first] == ["extended", "lease_lost"]
    assert (missed, single.id, [r.status for r in back]) == ("LeaseLost", e.id, ["extended"])
    assert sum(1 for s in sql if s.strip().upper() == "COMMIT") == 1
    if not isinstance(db, Path):  # PostgreSQL: one statement extends the whole group's
        assert sum(1 for s in sql if s.lstrip().startswith("UPDATE messages m SET")) == 1
    with sqew.Client(str(db)) as c:
        assert [m.id for m in c.poll("q", batch=4)] == [b.id]


def test_the_wal_starts_over_under_steady_group_commits_and_the_checkpointer_stops(
    tmp_path: Path,
) -> None:
    """The group committer leaves checkpoints to a thread of its own (SQLite's would run in a
    commit, on the loop). Under writes that never pause the WAL still starts over, so it stays
    far smaller than what went through it; closing the service stops the thread."""
    others = {t for t in threading.enumerate() if t.name == "sqew-checkpoint"}  # not ours
    path = tmp_path / "wal.db"
    with sqew.Client(str(path)) as c:
        c.create_queue("big")
    wal = path.with_name(path.name + "-wal")
    rounds, per_round, size = 150, 20, 8000

    async def body(s: QueueService) -> int:
        biggest = 0
        for _ in range(rounds):
            await asyncio.gather(*(soon_enqueue(s, "big", [msg("x" * size)])
                                   for _ in range(per_round)))
            biggest = max(biggest, wal.stat().st_size)
            await asyncio.sleep(0.01)  # a steady stream, spread over more than a second
        return biggest

    biggest = on_loop(path, body)
    assert not [t for t in threading.enumerate()
                if t.name == "sqew-checkpoint" and t not in others]
    written = rounds * per_round * size
    assert biggest < written * 0.75, (biggest, written)
    with sqew.Client(str(path)) as c:
        assert c.stats("big").ready == rounds * per_round
        assert c.peek("big", limit=1)[0].payload == "x" * size


def test_a_merge_whose_group_failed_before_it_ran_takes_no_more_requests(
    sqlite_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group can fail before it runs its writes (the write lock never came); requests that
    arrive later start a new merge instead of joining the one that has ended."""
    db = sqlite_db
    monkeypatch.setattr(sqlite_connection, "BUSY_TIMEOUT_MS", 200)  # give up on the lock soon
    blocker = sqlite3.connect(db, isolation_level=None)  # a writer that is no committer
    blocker.execute("BEGIN IMMEDIATE")

    async def body(s: QueueService) -> tuple[BaseException | None, int]:
        first = soon_enqueue(s, "q", [msg(1)])
        error = (await settle([first]))[0]
        blocker.execute("COMMIT")
        (second,) = await asyncio.wait_for(soon_enqueue(s, "q", [msg(2)]), 5)
        return error, second.message_id

    try:
        error, second = on_loop(db, body)
    finally:
        blocker.close()
    assert error == "Unavailable"
    with sqew.Client(str(db)) as c:
        assert [m.id for m in c.peek("q", limit=10)] == [second]


# --- callers that left, and a transaction that ends under the group ---------------------------
def test_polls_cancelled_while_their_group_waited_for_the_lock_lease_nothing(
    sqlite_db: Path,
) -> None:
    """A group waits for the write lock (held by another connection); meanwhile some of its
    polls are cancelled (their clients left). Once the lock comes, only the polls still there
    lease messages: the others' stay ready with no attempt spent (with max_attempts 1 a lease
    to nobody would send a message to the DLQ when it ran out)."""
    db = sqlite_db
    with sqew.Client(str(db)) as c:
        c.create_queue("once", max_attempts=1)
        ids = [r.message_id for r in c.enqueue_batch("once", [{"payload": i} for i in range(6)])]
    blocker = sqlite3.connect(db, isolation_level=None)  # a writer that is no committer
    blocker.execute("BEGIN IMMEDIATE")

    async def main() -> list[Any]:
        waiting = asyncio.Event()

        async def offload(fn: Callable[[], T]) -> T:
            # The only blocking step of these polls: the group's wait for the write lock.
            waiting.set()
            return await asyncio.to_thread(fn)

        service = QueueService(open_backend(db), group_commit=True, offload=offload,
                               reap_when_due=False)
        try:
            polls = [soon(service.poll("once", batch=1)) for _ in range(6)]
            await asyncio.wait_for(waiting.wait(), 10)  # the group waits for the lock now
            for p in polls[1::2]:
                p.cancel()
            blocker.execute("COMMIT")
            return await asyncio.gather(*polls, return_exceptions=True)
        finally:
            await service.aclose()

    try:
        outcomes = asyncio.run(main())
    finally:
        blocker.close()
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes[1::2]), outcomes
    leased = [[m.id for m in o] for o in outcomes[0::2]]
    assert leased == [[ids[0]], [ids[1]], [ids[2]]]  # in delivery order, one claim
    with sqew.Client(str(db)) as c:
        assert [c.get_message("once", i).attempts for i in ids] == [1, 1, 1, 0, 0, 0]
        stats = c.stats("once")
        assert (stats.leased, stats.ready, stats.dlq) == (3, 3, 0)


def counts(stats: models.Stats) -> dict[str, Any]:
    """The stats without the age of the oldest message (it grows as time passes)."""
    return {k: v for k, v in msgspec.structs.asdict(stats).items()
            if k != "oldest_ready_age_ms"}


class CappedBackend(SqliteBackend):
    """SQLite whose group committer's connection can be capped in size: ``PRAGMA
    max_page_count`` (per connection) makes SQLite fail a write that needs more pages with
    SQLITE_FULL, the error of a full disk, and roll back the whole transaction as it does
    then."""

    def write_session(self) -> WriteSession:
        self.session = super().write_session()
        return self.session

    def cap(self, extra_pages: int | None) -> None:
        """Let the file grow by at most ``extra_pages`` pages (None: no cap)."""
        conn = self.session.tx.c  # type: ignore[attr-defined]
        limit = 4_294_967_294  # SQLite's largest (its default)
        if extra_pages is not None:
            limit = conn.execute("PRAGMA page_count").fetchone()[0] + extra_pages
        conn.execute(f"PRAGMA max_page_count={limit}")


def full_disk_group(
    s: QueueService, held: list[models.LeasedMessage], failing_first: bool
) -> list[asyncio.Future[Any]]:
    """One group of enqueues, acks and polls, one enqueue too large for the space left; with
    ``failing_first`` an enqueue that fails on its own comes first (the group then runs again
    unit by unit, each in a savepoint)."""
    first = [soon_enqueue(s, "nope", [msg(0)])] if failing_first else []
    return [
        *first,
        soon_enqueue(s, "big", [msg("small")]),
        soon_ack(s, "big", [(held[0].id, held[0].token)]),
        soon_poll(s, "big", 1),
        soon_enqueue(s, "big", [msg("x" * 200_000)]),  # needs ~50 pages
        soon_ack(s, "big", [(held[1].id, held[1].token)]),
        soon_enqueue(s, "big", [msg("small too", idempotency_key="k")]),
        soon_poll(s, "big", 2),
    ]


@pytest.mark.parametrize("failing_first", [False, True], ids=["whole", "unit-by-unit"])
def test_a_full_disk_fails_the_whole_group_and_the_next_group_works(
    tmp_path: Path, failing_first: bool
) -> None:
    """SQLite rolls back the whole transaction when the disk is full. Every caller of the
    group gets Unavailable and nothing of the group is committed (no enqueue, no ack, no
    lease); once there is space again the same group succeeds."""
    path = tmp_path / "full.db"
    with sqew.Client(str(path)) as c:
        c.create_queue("big")
        ids = [r.message_id for r in c.enqueue_batch("big", [{"payload": i} for i in range(5)])]
        held = c.poll("big", batch=2, visibility_ms=600_000)
        before = c.stats("big")
        messages_before = [c.get_message("big", i) for i in ids]

    async def main() -> tuple[list[Any], list[Any]]:
        backend = CappedBackend(path)
        service = QueueService(backend, group_commit=True, offload=asyncio.to_thread,
                               reap_when_due=False)
        try:
            backend.cap(extra_pages=2)
            full = await settle(full_disk_group(service, held, failing_first))
            with sqew.Client(str(path)) as c:  # checked before the next group runs
                assert counts(c.stats("big")) == counts(before)
                assert [c.get_message("big", i) for i in ids] == messages_before
            backend.cap(None)  # space again
            return full, await settle(full_disk_group(service, held, failing_first))
        finally:
            await service.aclose()

    full, after = asyncio.run(main())
    assert full == ["Unavailable"] * len(full)
    if failing_first:
        assert after[0] == "QueueNotFound"
        after = after[1:]
    small, acked, polled, large, acked_too, keyed, polled_two = after
    assert [r.duplicate for r in small + large + keyed] == [False] * 3
    assert [r.status for r in acked + acked_too] == ["acked", "acked"]
    assert len(polled) == 1 and len(polled_two) == 2
    with sqew.Client(str(path)) as c:
        stats = c.stats("big")
        assert (stats.enqueued_total, stats.acked_total) == (8, 2)
        assert (stats.leased, stats.ready) == (3, 3)
        assert c.get_message("big", large[0].message_id).payload == "x" * 200_000


def test_a_full_disk_is_a_503_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start_server: Callable[..., Any]
) -> None:
    """The same over HTTP: the server's backend is a CappedBackend (the server opens it as
    usual, through this factory); an enqueue the space left cannot hold is the documented 503
    ``Unavailable`` and writes nothing, and succeeds once there is space again."""
    opened: list[CappedBackend] = []

    def open_capped(target: str, **options: Any) -> CappedBackend:
        opened.append(CappedBackend(target, **options))
        return opened[-1]

    monkeypatch.setattr(server_runtime, "open_backend", open_capped)
    server = start_server(db=str(tmp_path / "full.db"), reap_interval_ms=600_000)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/queues", json={"name": "big"}).status_code == 201
        big = {"payload": "x" * 200_000}
        opened[0].cap(extra_pages=2)
        refused = http.post("/queues/big/messages", json=big)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "Unavailable"
        assert http.get("/queues/big/stats").json()["enqueued_total"] == 0
        opened[0].cap(None)
        assert http.post("/queues/big/messages", json=big).status_code == 201
        assert http.get("/queues/big/stats").json()["enqueued_total"] == 1


def test_a_poll_cancelled_while_the_retry_pass_waits_for_the_lock_leases_nothing(
    sqlite_db: Path,
) -> None:
    """A failing operation sends the group to its savepoint-per-unit pass, which takes the
    write lock again; a poll whose caller gave up during that wait must lease nothing."""
    db = sqlite_db
    with sqew.Client(str(db)) as c:
        c.enqueue("q", 1)

    async def body(s: QueueService) -> tuple[bool, int, int]:
        session: Any = s._writer._session  # type: ignore[attr-defined]
        begun = {"n": 0}
        gate = threading.Event()
        try_begin, begin_waiting = session.try_begin, session.begin_waiting

        def busy_the_second_time() -> bool:
            begun["n"] += 1
            return False if begun["n"] == 2 else bool(try_begin())

        def wait_for_the_gate() -> None:
            gate.wait(10)
            begin_waiting()

        session.try_begin, session.begin_waiting = busy_the_second_time, wait_for_the_gate
        poll = soon_poll(s, "q", 1)
        failing = soon(s.extend_lease("q", 999, "stale", 1000))  # fails: a retry pass follows
        while begun["n"] < 2:
            await asyncio.sleep(0.005)
        poll.cancel()  # the client went away while the retry pass waited for the lock
        gate.set()
        await settle([failing])
        stats = await s.stats("q")
        return poll.cancelled(), stats.ready, stats.leased

    cancelled, ready, leased = on_loop(db, body)
    assert (cancelled, ready, leased) == (True, 1, 0)


def test_a_backend_whose_statements_may_not_run_on_the_loop_gets_them_offloaded(
    sqlite_db: Path,
) -> None:
    """``Backend.statements_on_loop`` False (a database across a network): a group's
    statements run through ``offload``, still one transaction, merged, committed before
    anyone is answered."""
    db = sqlite_db
    threads: set[str] = set()

    async def main() -> tuple[list[Any], list[Any]]:
        backend = open_backend(db)
        backend.statements_on_loop = False  # type: ignore[misc]
        loop_thread = threading.current_thread().name

        async def offload(fn: Callable[[], T]) -> T:
            def run() -> T:
                threads.add(threading.current_thread().name)
                return fn()

            return await asyncio.to_thread(run)

        service = QueueService(backend, group_commit=True, offload=offload)
        try:
            enqueued = await settle([soon_enqueue(service, "q", [msg(i)]) for i in range(10)])
            polled = await settle([soon_poll(service, "q", 5) for _ in range(2)])
        finally:
            await service.aclose()
        assert loop_thread not in threads
        return enqueued, polled

    enqueued, polled = asyncio.run(main())
    assert all(len(r) == 1 and not r[0].duplicate for r in enqueued)
    assert sorted(m.id for p in polled for m in p) == sorted(r[0].message_id for r in enqueued)
    assert threads  # the statements ran off the loop
    with sqew.Client(str(db)) as c:
        assert (c.stats("q").leased, c.stats("q").ready) == (10, 0)
