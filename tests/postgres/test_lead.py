"""``Backend.try_lead`` on PostgreSQL: one process per database doing a role (the reaper).

Two backends opened on one database stand for two processes (PostgreSQL's lock is an advisory
lock of a connection of its own: it is not shared within a process). SQLite's side of the seam
is tested in tests/engine/test_lead.py.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sqew.backends import open_backend
from sqew.backends.base import Backend

pytestmark = pytest.mark.postgres


@pytest.fixture
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh PostgreSQL database."""
    import targets

    store = targets.postgres(tmp_path)
    request.addfinalizer(store.drop)
    return store.url


@pytest.fixture
def backends(target: str) -> Iterator[Callable[[], Backend]]:
    opened: list[Backend] = []

    def open_one() -> Backend:
        opened.append(open_backend(target))
        return opened[-1]

    yield open_one
    for backend in opened:
        backend.close()


def test_one_leader_at_a_time_and_the_role_passes_on_release(
    backends: Callable[[], Backend],
) -> None:
    a, b = backends(), backends()
    lead = a.try_lead("reaper")
    assert lead is not None and lead.held
    assert b.try_lead("reaper") is None
    assert a.try_lead("reaper") is None  # not even the same process twice
    other = b.try_lead("compactor")  # another role is another lock
    assert other is not None
    other.release()

    lead.release()
    assert not lead.held
    taken = b.try_lead("reaper")
    assert taken is not None and taken.held
    taken.release()


def test_a_lead_whose_connection_dropped_is_lost_and_taken_over(tmp_path: Path) -> None:
    import pg_support
    import targets

    store = targets.postgres(tmp_path)
    a = b = None
    try:
        a, b = open_backend(store.url), open_backend(store.url)
        lead = a.try_lead("reaper")
        assert lead is not None
        server = pg_support.cluster().server
        with contextlib.closing(server.connect(store.url.rsplit("/", 1)[1])) as admin:
            (pid,) = admin.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchone()
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert not lead.held
        taken = b.try_lead("reaper")
        assert taken is not None and taken.held
        taken.release()
        lead.release()  # releasing a lost lead is harmless
    finally:
        for backend in (a, b):
            if backend is not None:
                backend.close()
        store.drop()


def test_a_client_reaping_at_every_poll_opens_no_connection_for_the_lead(
        pg_url: str) -> None:
    # A poll that reaps takes the reaper's lead for a moment: on a connection of the Client's
    # pool, not a new one (a session started and ended per reap), and it leaves no lock
    # behind: another process can take the lead right after.
    import psycopg

    import sqew
    from sqew.backends.postgres import connection

    info = connection.conninfo(pg_url)
    ended = ("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
    locks = ("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
             "(SELECT oid FROM pg_database WHERE datname = current_database())")
    client = sqew.LocalClient(pg_url, reap_interval_ms=0)
    try:
        client.create_queue("q", visibility_ms=1)
        client.enqueue("q", 1)
        client.poll("q")  # the pool and the kept connection are open from here on
        with contextlib.closing(psycopg.connect(info, autocommit=True)) as watch:
            watch.execute("SELECT pg_stat_clear_snapshot()")
            (before,) = watch.execute(ended).fetchone() or (0,)
            for _ in range(20):
                client.poll("q")  # each reaps first (the lease of 1 ms has ended)
            time.sleep(1.0)  # sessions ended by the polls are counted as their processes exit
            watch.execute("SELECT pg_stat_clear_snapshot()")
            (after,) = watch.execute(ended).fetchone() or (0,)
            assert after - before < 5, (before, after)
            assert watch.execute(locks).fetchone() == (0,)
        other = open_backend(pg_url)
        try:
            lead = other.try_lead("reaper")
            assert lead is not None
            lead.release()
        finally:
            other.close()
    finally:
        client.close()
