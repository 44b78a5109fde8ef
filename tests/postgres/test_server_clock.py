"""On PostgreSQL every process stamps times by the database server's clock, where
clocks could differ: replicas and clients on hosts whose clocks
differ still agree on when a message was enqueued, becomes visible and ends its lease.

The database here plays a server whose clock is an hour ahead of this host's, without root or
faketime: its search path puts a schema ``skew`` ahead of ``pg_catalog``, and that schema's
``clock_timestamp()`` adds the hour (sqew names the function without its schema). The server
runs on this host, so its real time is this host's: the expected time is this host's plus the
skew, and a process still on its own clock would be off by the whole hour.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from cli_support import Server, clean_env, run_sqew

import sqew
from sqew.backends.postgres import server_clock

pytestmark = pytest.mark.postgres

HOUR_MS = 3_600_000
SLACK_MS = 1_000
"""How far a stamp may be from the expected time: the measurement's error (half a round trip
on this host) and the time between reading this host's clock and the stamp; far below the
skew that a process on its own clock would show."""
UNTIL_S = 30.0


def set_skew(url: str, ms: int) -> None:
    """Make the database's unqualified ``clock_timestamp()`` run ``ms`` ahead (new sessions)."""
    with psycopg.connect("postgresql://" + url.split("://", 1)[1], autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS skew")
        conn.execute(
            "CREATE OR REPLACE FUNCTION skew.clock_timestamp() RETURNS timestamptz"
            " LANGUAGE sql VOLATILE AS $$ SELECT pg_catalog.clock_timestamp()"
            f" + interval '{ms} milliseconds' $$")
        name = conn.execute("SELECT current_database()").fetchone()
        assert name is not None
        # public first: sqew's tables stay where they are; skew before pg_catalog: its
        # clock_timestamp() is the one an unqualified call finds.
        conn.execute(f'ALTER DATABASE "{name[0]}" SET search_path = public, skew, pg_catalog')


def server_now(url: str) -> int:
    """The database's time as a new session sees it (epoch ms): the skew is in effect."""
    with psycopg.connect("postgresql://" + url.split("://", 1)[1]) as conn:
        row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    return int(row[0] * 1000)


def local_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def skewed(pg_url: str) -> str:
    """A fresh database whose server clock is an hour ahead of this host's."""
    set_skew(pg_url, HOUR_MS)
    assert abs(server_now(pg_url) - local_ms() - HOUR_MS) < SLACK_MS  # the trick works
    return pg_url


class Window:
    """The expected server time around an action: this host's clock plus the skew, read
    before and after it, widened by ``SLACK_MS``."""

    def __init__(self, skew_ms: int = HOUR_MS) -> None:
        self.skew = skew_ms

    def __enter__(self) -> Window:
        self.low = local_ms() + self.skew - SLACK_MS
        return self

    def __exit__(self, *exc: object) -> None:
        self.high = local_ms() + self.skew + SLACK_MS

    def holds(self, stamp: int, plus_ms: int = 0) -> bool:
        return self.low + plus_ms <= stamp <= self.high + plus_ms


def test_an_embedded_client_stamps_by_the_servers_clock(skewed: str) -> None:
    with sqew.Client(skewed) as c:
        c.create_queue("q")
        with Window() as w:
            first = c.enqueue("q", "now", ttl_ms=600_000).message_id
            later = c.enqueue("q", "later", delay_ms=120_000).message_id
        m = c.get_message("q", first)
        assert w.holds(m.enqueued_at), (m.enqueued_at - local_ms(), "ms ahead of this host")
        assert m.available_at == m.enqueued_at
        assert m.expires_at == m.enqueued_at + 600_000
        assert w.holds(c.get_message("q", later).available_at, 120_000)
        with Window() as w:
            (leased,) = c.poll("q", batch=10, visibility_ms=30_000)  # not the delayed one
        assert leased.id == first
        assert w.holds(leased.lease_expires_at, 30_000)


def test_clients_and_replicas_agree_on_the_servers_time(
    skewed: str, serve: Callable[..., Server], tmp_path: Path
) -> None:
    replica = serve(skewed)
    with sqew.Client(skewed) as embedded, sqew.Client(replica.url) as http:
        embedded.create_queue("q")
        with Window() as w:
            cli = run_sqew(["--db", skewed, "--json", "message", "enqueue", "--queue", "q",
                            "--payload", '"from the cli"'],
                           cwd=tmp_path, env=clean_env())
            assert cli.returncode == 0, cli
            mid = cli.json()["message_id"]
            hid = http.enqueue("q", "over http").message_id
        # Each process stamped the server's time, not this host's: the three agree.
        assert w.holds(embedded.get_message("q", mid).enqueued_at)
        assert w.holds(http.get_message("q", hid).enqueued_at)
        # Visible at once everywhere (a process an hour behind would wait an hour for the
        # CLI's message); a lease taken through the replica holds for the embedded client.
        with Window() as w:
            leased = http.poll("q", batch=10, visibility_ms=60_000)
        assert sorted(m.id for m in leased) == sorted([mid, hid])
        assert all(w.holds(m.lease_expires_at, 60_000) for m in leased)
        assert embedded.poll("q", batch=10) == []
        assert embedded.stats("q").leased == 2


def test_the_clock_follows_the_server_after_a_refresh(
    skewed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_clock, "REFRESH_S", 0.05)
    with sqew.Client(skewed) as c:
        c.create_queue("q")
        set_skew(skewed, 2 * HOUR_MS)  # the server's clock jumps an hour further
        ahead = 2 * HOUR_MS - SLACK_MS
        deadline = time.monotonic() + UNTIL_S
        while c.get_message("q", c.enqueue("q", 1).message_id).enqueued_at - local_ms() < ahead:
            assert time.monotonic() < deadline, "the clock was not measured again"
            time.sleep(0.02)
        with Window(2 * HOUR_MS) as w:
            mid = c.enqueue("q", 2).message_id
        assert w.holds(c.get_message("q", mid).enqueued_at)


class Failures(logging.Handler):
    """Sets ``seen`` when the clock's refresh logs a failed measurement."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "measuring the database server's clock failed" in record.getMessage():
            self.seen.set()


def test_a_failed_measurement_keeps_the_last_one(
    skewed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    logger = server_clock.log
    failures = Failures()
    monkeypatch.setattr(logger, "level", logging.INFO)
    logger.addHandler(failures)
    monkeypatch.setattr(server_clock, "REFRESH_S", 0.05)
    try:
        with sqew.Client(skewed) as c:
            c.create_queue("q")
            with psycopg.connect("postgresql://" + skewed.split("://", 1)[1]) as conn:
                conn.execute(  # every later measurement fails, on the server
                    "CREATE OR REPLACE FUNCTION skew.clock_timestamp() RETURNS timestamptz"
                    " LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no clock here'; END $$")
            assert failures.seen.wait(UNTIL_S), "no measurement failed"
            with Window() as w:
                mid = c.enqueue("q", 1).message_id
            assert w.holds(c.get_message("q", mid).enqueued_at)  # still an hour ahead
    finally:
        logger.removeHandler(failures)


def test_the_offset_is_taken_at_the_round_trips_midpoint() -> None:
    # Sent at 1000.000 s, answered at 1000.010 s: the server read its clock at about 1000.005
    # (this host's time), and said 4600.005 s: an hour ahead.
    sent, received = 1_000_000_000_000, 1_000_010_000_000
    assert server_clock.offset_ms(4_600_005, sent, received) == HOUR_MS


def test_an_unskewed_server_reads_as_this_hosts_clock(pg_url: str) -> None:
    with sqew.Client(pg_url) as c:
        c.create_queue("q")
        with Window(0) as w:
            mid = c.enqueue("q", 1).message_id
        assert w.holds(c.get_message("q", mid).enqueued_at)


def test_a_slow_first_answer_does_not_skew_the_clock(pg_url: str) -> None:
    """The first statement on a new connection can be slow (the server process warms its
    caches; a loaded host stalls it): here it answers 3 s late, its clock read at the end. Its
    midpoint would put the server 1.5 s ahead of this host; the shortest of the round trips
    is kept, and the stamps stay on this host's time (the server runs here)."""
    with psycopg.connect("postgresql://" + pg_url.split("://", 1)[1], autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS skew")
        conn.execute(
            "CREATE OR REPLACE FUNCTION skew.clock_timestamp() RETURNS timestamptz"
            " LANGUAGE plpgsql VOLATILE AS $$ BEGIN"
            " IF coalesce(current_setting('skew.warm', true), '') = '' THEN"
            "  PERFORM set_config('skew.warm', 'yes', false); PERFORM pg_sleep(3);"
            " END IF; RETURN pg_catalog.clock_timestamp(); END $$")
        row = conn.execute("SELECT current_database()").fetchone()
        assert row is not None
        conn.execute(f'ALTER DATABASE "{row[0]}" SET search_path = public, skew, pg_catalog')
    with sqew.Client(pg_url) as c:
        c.create_queue("q")
        with Window(0) as w:
            mid = c.enqueue("q", 1).message_id
        stamp = c.get_message("q", mid).enqueued_at
        assert w.holds(stamp), (stamp - local_ms(), "ms ahead of this host")
