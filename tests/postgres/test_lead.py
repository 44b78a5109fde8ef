"""``Backend.try_lead`` on PostgreSQL: one process per database doing a role (the reaper).

Two backends opened on one database stand for two processes (PostgreSQL's lock is an advisory
lock of a connection of its own: it is not shared within a process). SQLite's side of the seam
is tested in tests/engine/test_lead.py.
"""

from __future__ import annotations

import contextlib
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
