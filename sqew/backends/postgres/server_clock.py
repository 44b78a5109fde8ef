"""``ServerClock``: the database server's time, read without asking the server each time.

Every sqew process stamps times from its service's clock: enqueued and visible times, lease
ends, expiries, idempotency windows, the reaper's cutoffs. On PostgreSQL many processes on
many hosts (``sqew serve`` replicas, CLIs, embedded Clients) share those rows, so one clock must
serve them all: a replica whose host clock is off by *d* would otherwise end every lease and
delay it sets *d* early or late for everyone. The one clock they share is the database
server's.

A read is this host's wall clock plus an offset, as cheap as the system clock (no statement on
any hot path). The offset is measured with ``SELECT``s of ``clock_timestamp()`` (the time as
the statement runs, not the transaction's start): the server read its clock at some moment
between sending the query and receiving the answer, so the midpoint of the round trip is the
estimate and half the round trip bounds its error (NTP's reasoning). Of ``SAMPLES`` round
trips the shortest is kept: the first statement on a new connection waits while the server
process warms its caches, and a loaded host can stall any one of them, so a single sample
could be off by tens of milliseconds, enough for a process to see a message another process
has just enqueued as not yet visible.

It is measured when the backend opens (on the connection that checks the schema) and again
every ``REFRESH_S`` on a thread of its own, on a pooled connection: a refresh never delays a
request and runs even when all traffic goes through the group committer's connection. A
refresh that fails (the database is down) keeps the last offset and is tried again a period
later. A step of this host's wall clock (NTP, an operator) is corrected by the next refresh;
a refresh moves the clock by the change of the offset, a few milliseconds between two
measurements of one server, which the core tolerates like any clock step (it clamps intervals
that would go negative).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg

REFRESH_S = 30.0
"""How often a process measures the offset again."""
SAMPLES = 3
"""Round trips per measurement; the shortest is kept."""
STOP_WAIT_S = 5.0
"""How long closing waits for a measurement in flight (a database that does not answer)."""
QUERY = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8"
"""The server's time in epoch milliseconds. ``clock_timestamp`` is named without its schema
on purpose: the tests put a skewed one ahead of ``pg_catalog`` on the search path to play a
server whose clock differs from this host's."""

log = logging.getLogger("sqew.backends.postgres")

Connections = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]


def offset_ms(server_ms: int, sent_ns: int, received_ns: int) -> int:
    """The server's time minus this host's, from one round trip.

    Args:
        server_ms: what the server answered (epoch milliseconds).
        sent_ns: this host's wall clock (epoch nanoseconds) as the query was sent.
        received_ns: the same as the answer came back.
    """
    return server_ms - (sent_ns + received_ns) // 2_000_000


def measure(conn: psycopg.Connection[Any]) -> int:
    """The offset of the server's clock to this host's, in milliseconds: that of the shortest
    of ``SAMPLES`` round trips (the smallest error bound)."""
    _round_trip_ns, offset = min(_sample(conn) for _ in range(SAMPLES))
    return offset


def _sample(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """One round trip: its length in nanoseconds, and the offset it gives."""
    sent = time.time_ns()
    row = conn.execute(QUERY).fetchone()
    received = time.time_ns()
    if row is None:  # (a SELECT of one value always has its row)
        raise RuntimeError("the server did not say its time")
    return received - sent, offset_ms(int(row[0]), sent, received)


class ServerClock:
    """A clock (``sqew.core.clock.Clock``) that reads the database server's time.

    Args:
        conn: a connection to measure on now (the backend's opening connection).
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.offset_ms = measure(conn)
        """The server's clock minus this host's, in milliseconds (last measured)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def refresh(self, conn: psycopg.Connection[Any]) -> None:
        """Measure the offset again on ``conn`` (blocking: ``SAMPLES`` round trips)."""
        self.offset_ms = measure(conn)  # one assignment: readers see the old or the new

    def start(self, connections: Connections) -> None:
        """Refresh every ``REFRESH_S`` on a connection of ``connections`` (a pool's
        ``connection``), on a daemon thread, until ``stop``."""
        self._thread = threading.Thread(
            target=self._run, args=(connections,), name="sqew-clock", daemon=True)
        self._thread.start()

    def _run(self, connections: Connections) -> None:
        while not self._stop.wait(REFRESH_S):
            try:
                with connections() as conn:
                    self.refresh(conn)
            except Exception as exc:  # the database is away: keep the offset, try again later
                log.info("measuring the database server's clock failed (the last measurement "
                         "stays in use): %s", exc)

    def stop(self) -> None:
        """End the refreshes (waits for one in flight, up to ``STOP_WAIT_S``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)
