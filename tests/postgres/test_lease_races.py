"""A late ack or nack on PostgreSQL never acts on a lease that another consumer took meanwhile.

Each test holds a claim of the message by a second consumer (``B``) in an open transaction
while the late holder's (``A``'s) ack or nack runs, until that write waits for the message's row;
then B's claim commits. At READ COMMITTED, a statement that reads the row before the claim
committed sees A's token; only a write that checks the token again after the wait (in the same
statement) knows that the lease is B's now.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pg_support
import psycopg
import pytest

import sqew
from sqew import models
from sqew.backends import open_backend
from sqew.backends.postgres import connection
from sqew.core import delivering
from sqew.core.clock import ManualClock, system_clock

pytestmark = pytest.mark.postgres

LEASE_MS = 1000
WAIT_S = 20


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def client(pg_url: str, clock: ManualClock) -> Iterator[sqew.LocalClient]:
    # (the reaper set aside: the test chooses when ended leases are swept)
    c = sqew.LocalClient(pg_url, clock=clock, reap_interval_ms=10**9)
    try:
        yield c
    finally:
        c.close()


def ready_under_old_token(client: sqew.LocalClient, clock: ManualClock, **queue: Any) -> (
        models.LeasedMessage):
    """A's lease of a message, ended and swept: the message is ready again and A's token is
    still its token (an ack of it would still succeed) until somebody leases it."""
    client.create_queue("q", **queue)
    client.enqueue("q", "m")
    (a,) = client.poll("q", visibility_ms=LEASE_MS)
    clock.advance(2 * LEASE_MS)
    # Another consumer's poll sweeps the ended lease and takes a message it prefers.
    client.enqueue("q", "first", priority=10)
    assert [m.payload for m in client.poll("q")] == ["first"]
    return a


def while_b_claims(pg_url: str, clock: ManualClock, late: Callable[[], Any]) -> tuple[
        Any, models.LeasedMessage]:
    """Run ``late`` while another consumer's claim of the message is held uncommitted, until
    ``late`` waits for the message's row; then commit the claim. ``late``'s result, and the
    message as the claim leased it."""
    backend = open_backend(pg_url)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = late()
        except Exception as exc:  # reported by the test below
            outcome["error"] = exc

    try:
        with contextlib.closing(psycopg.connect(connection.conninfo(pg_url),
                                                autocommit=True)) as watch:
            with backend.write() as tx:
                tx.get_queue("q")  # BEGIN goes with it: the claim below is not yet committed
                (b,), _, _ = delivering.claim(tx, "q", 1, None, clock(), False)
                thread = threading.Thread(target=run)
                thread.start()
                pg_support.until_a_lock_wait(watch, "the late write", WAIT_S)
            thread.join(WAIT_S)
            assert not thread.is_alive()
    finally:
        backend.close()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"], b


def test_a_late_nack_leaves_a_lease_taken_meanwhile(
    pg_url: str, client: sqew.LocalClient, clock: ManualClock
) -> None:
    a = ready_under_old_token(client, clock)
    results, b = while_b_claims(pg_url, clock, lambda: client.nack_batch(
        "q", [{"id": a.id, "token": a.token, "delay_ms": 0}]))
    assert b.id == a.id and b.token != a.token
    assert [r.status for r in results] == ["lease_lost"]
    assert client.poll("q") == []  # B still holds it: nobody else gets it
    assert client.ack("q", b.id, b.token).status == "acked"
    stats = client.stats("q")
    assert (stats.ready, stats.leased, stats.nacked_total) == (0, 1, 0)  # ("first" is held)


def test_a_late_nack_never_dead_letters_a_lease_taken_meanwhile(
    pg_url: str, client: sqew.LocalClient, clock: ManualClock
) -> None:
    a = ready_under_old_token(client, clock, max_attempts=2)
    # A's lease was its first attempt, and swept as such; now the nack of one would be the last.
    client.update_queue("q", max_attempts=1)
    results, b = while_b_claims(pg_url, clock, lambda: client.nack_batch(
        "q", [{"id": a.id, "token": a.token}]))
    assert [r.status for r in results] == ["lease_lost"]
    assert client.dlq_list("q") == []
    assert client.ack("q", b.id, b.token).status == "acked"
    assert client.stats("q").dead_lettered_total == 0


def test_a_late_ack_on_an_archiving_queue_archives_nothing_of_a_lease_taken_meanwhile(
    pg_url: str, client: sqew.LocalClient, clock: ManualClock
) -> None:
    a = ready_under_old_token(client, clock, archive=True)
    results, b = while_b_claims(pg_url, clock, lambda: client.ack_batch("q", [(a.id, a.token)]))
    assert [r.status for r in results] == ["lease_lost"]
    assert client.scan("q", source="archive").messages == []
    # B's ack archives the message, once.
    assert client.ack("q", b.id, b.token).status == "acked"
    (archived,) = client.scan("q", source="archive").messages
    assert (archived.id, archived.attempts) == (b.id, 2)


# --- under load ---------------------------------------------------------------------------------
CONSUMERS = 6
MESSAGES = 3  # fewer than the consumers: a lease that ends is taken again at once
RUN_S = 4.0
LATE = 0.8


@dataclass
class Lease:
    """One lease as its holder saw it: the claim's time (by the service's clock), its end,
    and the holder's own ack or nack (when it began and whether it succeeded), on this
    process's monotonic clock as is the poll's answer."""

    id: int
    token: str
    attempts: int
    claimed_at: int
    expires_at: int
    polled: float
    ended: float | None = None
    ended_ok: bool = False


def consume(url: str, stop: float, rng: random.Random, leases: list[Lease]) -> None:
    """Lease one message at a time for a short while; ack or nack it at once, or late (after
    its lease ended, as others poll it again). An acked message is replaced by a new one."""
    # One clock for all (each client would read the database server's by an offset it measured
    # itself, a few milliseconds apart): a lease ends when another's claim says it did.
    with sqew.LocalClient(url, clock=system_clock) as client:
        while time.monotonic() < stop:
            vis = rng.randrange(30, 100)
            got = client.poll("q", visibility_ms=vis, wait_ms=20)
            if not got:
                continue
            m = got[0]
            lease = Lease(m.id, m.token, m.attempts, m.lease_expires_at - vis,
                          m.lease_expires_at, time.monotonic())
            leases.append(lease)
            if rng.random() < LATE:
                time.sleep((vis + rng.randrange(0, 5)) / 1000)  # as another takes it
            lease.ended = time.monotonic()
            if rng.random() < 0.2:
                status = client.ack_batch("q", [(m.id, m.token)])[0].status
                client.enqueue("q", m.payload)
            else:
                status = client.nack_batch(
                    "q", [{"id": m.id, "token": m.token, "delay_ms": 0}])[0].status
            lease.ended_ok = status in ("acked", "requeued")


def overlaps(leases: list[Lease]) -> list[str]:
    """Where two consumers held one message at once: a lease claimed before the previous
    lease of the message ended, which that holder had not given back; or an ack or nack that
    succeeded though it began after the next lease of its message was claimed."""
    found: list[str] = []
    by_id: dict[int, list[Lease]] = {}
    for lease in leases:
        by_id.setdefault(lease.id, []).append(lease)
    for held in by_id.values():
        held.sort(key=lambda lease: lease.attempts)  # a claim counts one more attempt
        for before, after in itertools.pairwise(held):
            if before.ended_ok and before.ended is not None and before.ended > after.polled:
                found.append(f"{before} ended after {after} was claimed")
            elif not before.ended_ok and after.claimed_at < before.expires_at:
                found.append(f"{after} was claimed while {before} held the message")
    return found


def test_no_message_has_two_holders_at_once(pg_url: str) -> None:
    with sqew.LocalClient(pg_url) as producer:
        producer.create_queue("q", max_attempts=1000)
        producer.enqueue_batch("q", [{"payload": i} for i in range(MESSAGES)])
    stop = time.monotonic() + RUN_S
    leases: list[list[Lease]] = [[] for _ in range(CONSUMERS)]
    with ThreadPoolExecutor(max_workers=CONSUMERS) as pool:
        running = [pool.submit(consume, pg_url, stop, random.Random(n), leases[n])
                   for n in range(CONSUMERS)]
        for future in running:
            future.result()
    held = [lease for part in leases for lease in part]
    assert sum(lease.attempts > 1 for lease in held) > 30  # messages changed hands often
    assert overlaps(held) == []
