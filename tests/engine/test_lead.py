"""``Backend.try_lead``: one process per database doing a role (the reaper), on both backends.

Two backends opened on one database stand for two processes (SQLite's lock is an ``flock`` of
its own descriptor, PostgreSQL's an advisory lock of its own connection: neither is shared
within a process).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sqew.backends import open_backend
from sqew.backends.base import Backend


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of the parameter's backend."""
    if request.param == "sqlite":
        return str(tmp_path / "lead.db")
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


@pytest.mark.postgres
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
