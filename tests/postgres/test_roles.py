"""docs/postgres.md's set-up, run as written: a database owned by a role that migrates, and an
application role with the grants the page gives, which the CLI and a Client then use for
everything (queues, messages, keys, compaction) while the owner runs ``sqew db upgrade``."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
from collections.abc import Iterator

import cli_runs
import pg_support
import psycopg
import pytest

import sqew

pytestmark = pytest.mark.postgres
_n = itertools.count()
APP_GRANTS = (
    "GRANT USAGE ON SCHEMA public TO {app}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {app}",
    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {app}",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public "
    "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {app}",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {app}",
)


@pytest.fixture
def roles() -> Iterator[tuple[str, str, str]]:
    """The page's roles and database (names of this test's own); dropped after."""
    server = pg_support.cluster().server
    n = next(_n)
    owner, app, db = f"sqew_owner_{n}", f"sqew_app_{n}", f"sqew_roles_{n}"
    with contextlib.closing(server.connect()) as su:
        su.execute(f"CREATE ROLE {owner} LOGIN")
        su.execute(f"CREATE ROLE {app} LOGIN")
        su.execute(f"CREATE DATABASE {db} OWNER {owner}")
    try:
        yield owner, app, db
    finally:
        server.drop_database(db)
        with contextlib.closing(server.connect()) as su:
            su.execute(f"DROP ROLE {app}")
            su.execute(f"DROP ROLE {owner}")


def url_as(role: str, db: str) -> str:
    server = pg_support.cluster().server
    return f"postgresql+psycopg://{role}@127.0.0.1:{server.port}/{db}"


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``sqew --db url args`` run to its end (a run of the tests' fork server)."""
    return cli_runs.completed(["--db", url, *args], cwd=os.getcwd())


def test_the_owner_migrates_and_the_application_role_does_the_rest(
    roles: tuple[str, str, str],
) -> None:
    owner, app, db = roles
    upgraded = cli(url_as(owner, db), "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    server = pg_support.cluster().server
    with contextlib.closing(psycopg.connect(
            f"host=127.0.0.1 port={server.port} user={owner} dbname={db}",
            autocommit=True)) as as_owner:
        for grant in APP_GRANTS:
            as_owner.execute(grant.format(app=app))
    as_app = url_as(app, db)
    for args in (["queue", "add", "--name", "jobs", "--max-attempts", "1"],
                 ["message", "enqueue", "--queue", "jobs", "--payload", '{"n": 1}'],
                 ["keys", "create", "--scope", "admin"], ["keys", "list"],
                 ["stats", "--queue", "jobs"], ["queue", "compact", "--name", "jobs"]):
        done = cli(as_app, *args)
        assert done.returncode == 0, (args, done.stderr)
    with sqew.Client(as_app) as client:
        (m,) = client.poll("jobs")
        client.nack("jobs", m.id, m.token)  # its one attempt: to the DLQ
        assert client.dlq_requeue("jobs").requeued == 1
        (m,) = client.poll("jobs")
        client.ack("jobs", m.id, m.token)
        assert client.stats("jobs").acked_total == 1
    again = cli(url_as(owner, db), "db", "upgrade")
    assert again.returncode == 0, again.stderr
