"""The suite's own PostgreSQL harness (``tests/pgserver.py``, ``tests/pg_support.py``): a real
server starts, answers on 127.0.0.1 and on its unix socket, restarts, and is gone afterwards,
also when the process that started it fails."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pg_support
import pgserver
import psutil
import pytest

import sqew
from sqew import migrate

pytestmark = pytest.mark.postgres
HERE = Path(__file__).resolve().parent.parent


@pytest.fixture
def server() -> pgserver.PgServer:
    pg_support.server_or_skip()
    return pgserver.PgServer(pgserver.FAST)


def test_a_server_starts_answers_restarts_and_is_stopped(server: pgserver.PgServer) -> None:
    try:
        server.start()
        pid = server.postmaster_pid()
        assert pid is not None and psutil.pid_exists(pid)
        with server.connect() as conn:
            row = conn.execute("SELECT current_setting('port'), "
                               "current_setting('listen_addresses'), "
                               "current_setting('unix_socket_directories'), "
                               "inet_server_addr()::text").fetchone()
        assert row == (str(server.port), "127.0.0.1", str(server.dir), "127.0.0.1/32")
        import psycopg

        with psycopg.connect(host=str(server.dir), port=server.port, user="postgres",
                             dbname="postgres") as conn:  # the unix socket in its dir
            assert conn.execute("SELECT inet_server_addr()").fetchone() == (None,)

        server.create_database("copy_me")
        server.create_database("copied", template="copy_me")
        server.drop_database("copied")
        with server.connect() as conn:
            names = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
        assert "copy_me" in names and "copied" not in names

        server.restart()
        again = server.postmaster_pid()
        assert again is not None and again != pid and not psutil.pid_exists(pid)
        with server.connect() as conn:
            assert conn.execute("SELECT current_setting('port')").fetchone() == (
                str(server.port),)
    finally:
        server.destroy()
    assert not psutil.pid_exists(again)
    assert not server.dir.exists()


def test_a_failing_process_leaves_no_server_behind(tmp_path: Path) -> None:
    pg_support.server_or_skip()
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(HERE)!r})
        import pgserver
        server = pgserver.PgServer(pgserver.FAST).start()
        print(json.dumps([server.postmaster_pid(), str(server.dir)]), flush=True)
        raise RuntimeError("a test run that fails")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1 and "a test run that fails" in proc.stderr, proc
    pid, directory = json.loads(proc.stdout)
    assert not psutil.pid_exists(pid)  # the atexit hook stopped it before the exit
    assert not Path(directory).exists()


def test_each_test_database_is_migrated_and_as_empty_as_the_template() -> None:
    cluster = pg_support.cluster()
    first, second = cluster.new_database(), cluster.new_database()
    left_open = None
    try:
        assert first != second
        for name in (first, second):
            with cluster.server.connect(name) as conn:
                assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
                    (migrate.head(),)]
        with sqew.LocalClient(cluster.url(first)) as client:
            client.create_queue("q")
            assert client.enqueue("q", 1).message_id == 1
        left_open = sqew.LocalClient(cluster.url(second))  # a session a test forgot
        left_open.create_queue("q")
    finally:
        cluster.drop(first)
        cluster.drop(second)  # ends the forgotten session too
        if left_open is not None:
            left_open.close()
    again = cluster.new_database()  # a database given back, emptied for reuse
    try:
        assert again in (first, second)
        with sqew.LocalClient(cluster.url(again)) as client:
            assert client.list_queues() == []
            client.create_queue("q")
            assert client.enqueue("q", 1).message_id == 1  # ids start again
        with cluster.server.connect(again) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
                (migrate.head(),)]
            conn.execute("ALTER TABLE queues ADD COLUMN added_by_a_test int")
    finally:
        cluster.drop(again)
    with cluster.server.connect() as conn:
        names = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
    assert again not in names  # its schema changed: dropped, never handed out again
