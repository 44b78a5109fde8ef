"""Schema management: migrations equal the metadata, foreign files are refused untouched,
``sqew db upgrade``, and many processes opening one brand-new database at once.

The tests that are not about SQLite files run on both backends (``make_db``: a SQLite file,
and a database on the tests' PostgreSQL server): the same Alembic revisions make both.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, pool, text

import sqew
from sqew import migrate
from sqew.backends import revisions, schema
from sqew.backends import sqlite as sqlite_backend

from .support import Procs, finish, sha256, sqew_run, wait_for


def sqlite_exec(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def sqlite_rows(db: Path, query: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


# --- the databases: a SQLite file, and a database on the tests' PostgreSQL server ----------------
@dataclass
class Db:
    """An empty database: what ``--db`` and ``Client`` take, and SQLAlchemy's way in."""

    target: str
    backend: str

    def engine(self) -> Engine:
        url = self.target if self.backend == "postgres" else f"sqlite:///{self.target}"
        return create_engine(url, poolclass=pool.NullPool)

    def rows(self, query: str) -> list[tuple[object, ...]]:
        engine = self.engine()
        try:
            with engine.connect() as conn:
                return [tuple(r) for r in conn.execute(text(query))]
        finally:
            engine.dispose()

    def execute(self, *statements: str) -> None:
        engine = self.engine()
        try:
            with engine.begin() as conn:
                for statement in statements:
                    conn.execute(text(statement))
        finally:
            engine.dispose()

    def index_sql(self) -> dict[str, str]:
        """Each index's CREATE statement (whitespace normalised), which carries partial
        predicates."""
        query = (
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename <> 'alembic_version'"
            if self.backend == "postgres" else
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        )
        return {str(name): re.sub(r"\s+", " ", str(sql)) for name, sql in self.rows(query)}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make_db(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Db]:
    """Makes empty databases of the parameter's backend (PostgreSQL's dropped after)."""
    backend: str = request.param
    made = itertools.count(1)

    def make() -> Db:
        n = next(made)
        if backend == "sqlite":
            return Db(str(tmp_path / f"db{n}.db"), backend)
        import pg_support

        cluster = pg_support.cluster()
        name = f"m_{os.getpid()}_{id(request)}_{n}"
        cluster.server.create_database(name)
        request.addfinalizer(lambda: cluster.drop(name))
        return Db(cluster.url(name), backend)

    return make


# --- (a), (b): the migrations create exactly the metadata ----------------------------------------
def test_a_database_migrated_by_sqew_equals_the_metadata(make_db: Callable[[], Db]) -> None:
    db = make_db()
    sqew.Client(db.target).close()
    engine = db.engine()
    try:
        with engine.connect() as conn:
            # (the metadata's objects that this database's dialect has: schema.include_object)
            ours = {"include_object": schema.include_object(conn.dialect.name)}
            assert compare_metadata(MigrationContext.configure(conn, opts=ours),
                                    schema.metadata) == []
            strict = MigrationContext.configure(
                conn, opts={**ours, "compare_type": True, "compare_server_default": True})
            assert compare_metadata(strict, schema.metadata) == []
            assert migrate.current(conn) == migrate.head()
    finally:
        engine.dispose()


def test_migrated_indexes_equal_the_metadata_including_partial_predicates(
    make_db: Callable[[], Db],
) -> None:
    # Alembic's comparison does not look at partial-index WHERE clauses; the claim indexes
    # depend on them, so compare the DDL the database stored for each index.
    migrated, created = make_db(), make_db()
    sqew.Client(migrated.target).close()
    engine = created.engine()
    try:
        schema.metadata.create_all(engine)
    finally:
        engine.dispose()
    assert migrated.index_sql() == created.index_sql()
    assert any("WHERE" in sql for sql in migrated.index_sql().values())


def test_the_backends_schema_head_is_alembics_head() -> None:
    assert migrate.head() == revisions.SCHEMA_HEAD == sqlite_backend.SCHEMA_HEAD
    assert migrate.head() in migrate.known_revisions()


# --- (c): refusals leave the file exactly as it was ---------------------------------------------
def newer_sqew_db(tmp_path: Path) -> Path:
    db = tmp_path / "newer.db"
    sqew.Client(db).close()
    # Rollback-journal mode, so that merely reading the file would not create -wal/-shm.
    sqlite_exec(db, "UPDATE alembic_version SET version_num = '9999'",
                "PRAGMA journal_mode=DELETE")
    return db


def foreign_db(tmp_path: Path) -> Path:
    db = tmp_path / "other-app.db"
    sqlite_exec(db, "CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)",
                "INSERT INTO invoices (total) VALUES (12.5)")
    return db


def corrupt_sqew_db(tmp_path: Path) -> Path:
    good = tmp_path / "good.db"
    sqew.Client(good).close()
    sqlite_exec(good, "PRAGMA journal_mode=DELETE")
    data = good.read_bytes()
    good.unlink()
    db = tmp_path / "corrupt.db"
    db.write_bytes(data[:100] + b"\xff" * (len(data) - 100))  # a valid header, garbage pages
    return db


def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 20)
    return path


def directory(tmp_path: Path) -> Path:
    path = tmp_path / "a-directory"
    path.mkdir()
    (path / "keep.txt").write_text("x")
    return path


def missing_parent(tmp_path: Path) -> Path:
    return tmp_path / "no-such-dir" / "q.db"


REFUSED: dict[str, Callable[[Path], Path]] = {
    "newer-revision": newer_sqew_db,
    "foreign-sqlite": foreign_db,
    "corrupt-sqew": corrupt_sqew_db,
    "text-file": text_file,
    "directory": directory,
    "missing-parent": missing_parent,
}


def snapshot(target: Path) -> object:
    """What must not change: a file's bytes and its siblings; a directory's listing."""
    if target.is_file():
        return sha256(target), sorted(p.name for p in target.parent.iterdir())
    if target.is_dir():
        return sorted(p.name for p in target.iterdir()), sorted(target.parent.iterdir())
    return target.parent.exists()


def assert_untouched(target: Path, before: object) -> None:
    assert snapshot(target) == before
    for suffix in ("-wal", "-shm", "-journal"):
        assert not Path(f"{target}{suffix}").exists(), f"{suffix} created"


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_cli_refuses_with_one_error_line_and_leaves_the_target_untouched(
    case: str, tmp_path: Path, procs: Procs
) -> None:
    target = REFUSED[case](tmp_path)
    before = snapshot(target)
    code, out, err = sqew_run(["--db", str(target), "queue", "list"], procs.cwd)
    assert code == 1, (out, err)
    assert "Traceback" not in err + out
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert out == ""
    assert_untouched(target, before)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_client_refuses_with_a_sqew_error_and_leaves_the_target_untouched(
    case: str, tmp_path: Path
) -> None:
    target = REFUSED[case](tmp_path)
    before = snapshot(target)
    with pytest.raises(sqew.SqewError):
        sqew.Client(target).close()
    assert_untouched(target, before)


def test_a_refused_newer_database_still_has_its_data(tmp_path: Path) -> None:
    db = newer_sqew_db(tmp_path)
    with pytest.raises(sqew.errors.Unavailable):
        sqew.Client(db)
    assert sqlite_rows(db, "SELECT version_num FROM alembic_version") == [("9999",)]


# --- (d): sqew db upgrade -----------------------------------------------------------------------
def test_db_upgrade_creates_a_database_and_is_then_a_no_op(
    make_db: Callable[[], Db], procs: Procs
) -> None:
    db = make_db()
    argv = ["--db", db.target, "db", "upgrade"]
    code, out, err = sqew_run(argv, procs.cwd)
    assert code == 0, err
    assert migrate.head() in out
    assert db.rows("SELECT version_num FROM alembic_version") == [(migrate.head(),)]
    with contextlib.closing(sqew.Client(db.target)) as client:
        client.create_queue("kept")
        client.enqueue("kept", {"n": 1})

    code, out, err = sqew_run(argv, procs.cwd)
    assert code == 0, err
    assert migrate.head() in out
    assert db.rows("SELECT version_num FROM alembic_version") == [(migrate.head(),)]
    with contextlib.closing(sqew.Client(db.target)) as client:
        assert client.stats("kept").ready == 1


def test_db_upgrade_brings_a_0001_database_with_messages_to_the_head(
    make_db: Callable[[], Db], procs: Procs
) -> None:
    """A database made before API keys (revision 0001) keeps its messages through 0002."""
    db = make_db()
    engine = db.engine()
    with engine.connect() as conn:
        from alembic import command

        command.upgrade(migrate.alembic_config(conn), "0001")
        conn.commit()
    engine.dispose()
    db.execute(
        "INSERT INTO queues (name, visibility_ms, max_attempts, backoff_base_ms, "
        "backoff_max_ms, retention_ms, dedup_window_ms, max_payload_bytes, max_depth, "
        "rate_limit_per_s, lifo, archive, created_at, depth, enqueued_total) "
        "VALUES ('old', 30000, 5, 1000, 60000, 1209600000, 300000, 262144, 0, 0, FALSE, FALSE, "
        "1, 1, 1)",
        "INSERT INTO messages (queue_id, payload, priority, attempts, enqueued_at, "
        "available_at, expires_at, lifo) VALUES (1, '{\"n\": 1}', 0, 0, 1, 1, 9999999999999, "
        "FALSE)",
    )
    code, out, err = sqew_run(["--db", db.target, "queue", "list"], procs.cwd)
    assert code == 1 and "run `sqew db upgrade`" in err, (out, err)

    code, out, err = sqew_run(["--db", db.target, "db", "upgrade"], procs.cwd)
    assert code == 0, err
    assert db.rows("SELECT version_num FROM alembic_version") == [(migrate.head(),)]
    with contextlib.closing(sqew.Client(db.target)) as client:
        (leased,) = client.poll("old")
        assert leased.payload == {"n": 1}
    assert db.rows("SELECT count(*) FROM api_keys") == [(0,)]


def test_a_newer_or_foreign_database_is_refused_with_its_data_kept(
    make_db: Callable[[], Db], procs: Procs
) -> None:
    """The SQLite side of this (files byte for byte) is the REFUSED cases above."""
    newer, foreign = make_db(), make_db()
    sqew.Client(newer.target).close()
    newer.execute("UPDATE alembic_version SET version_num = '9999'")
    foreign.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)",
                    "INSERT INTO invoices (id, total) VALUES (1, 12.5)")
    for db in (newer, foreign):
        for command in (["queue", "list"], ["db", "upgrade"]):
            code, out, err = sqew_run(["--db", db.target, *command], procs.cwd)
            assert code == 1, (out, err)
            assert len(err.splitlines()) == 1 and err.startswith("error: Unavailable: "), err
        with pytest.raises(sqew.errors.Unavailable):
            sqew.Client(db.target)
    assert newer.rows("SELECT version_num FROM alembic_version") == [("9999",)]
    assert foreign.rows("SELECT total FROM invoices") == [(12.5,)]
    assert foreign.rows("SELECT count(*) FROM invoices") == [(1,)]


def test_db_upgrade_refuses_a_newer_database_untouched(tmp_path: Path, procs: Procs) -> None:
    db = newer_sqew_db(tmp_path)
    before = snapshot(db)
    code, out, err = sqew_run(["--db", str(db), "db", "upgrade"], procs.cwd)
    assert code == 1, (out, err)
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert_untouched(db, before)


# --- (e): six processes open one brand-new file at the same moment ------------------------------
OPENERS = r"""
import os, sys, time, sqew
db, go, *pairs = sys.argv[1:]
children = []
for name, ready in zip(pairs[::2], pairs[1::2]):  # a process each, sqew imported once above
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            open(ready, "w").close()
            deadline = time.monotonic() + 30
            while not os.path.exists(go):  # the start barrier: every process is waiting
                if time.monotonic() > deadline:
                    sys.exit("no go signal")
                time.sleep(0.001)
            client = sqew.Client(db)
            client.create_queue(name)
            client.close()
            code = 0
        except SystemExit as exc:
            print(exc, file=sys.stderr)
        except BaseException:
            sys.excepthook(*sys.exc_info())
        finally:
            sys.stderr.flush()
            os._exit(code)
    children.append((name, pid))
failed = [name for name, pid in children if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])]
sys.exit(f"failed: {failed}" if failed else 0)
"""
"""Six processes forked from one that imported sqew (a process each, none of which has opened
anything before the fork): each makes its flag, waits for the go, opens the database and
creates its queue."""


def test_six_processes_open_a_new_database_at_once(
    make_db: Callable[[], Db], procs: Procs, tmp_path: Path
) -> None:
    db = make_db()
    go = tmp_path / "go"
    names = [f"q{n}" for n in range(6)]
    ready = [tmp_path / f"{name}.ready" for name in names]
    pairs = [arg for name, flag in zip(names, ready, strict=True) for arg in (name, str(flag))]
    openers = procs.python(OPENERS, db.target, str(go), *pairs)
    wait_for(lambda: all(f.exists() for f in ready) or openers.poll() is not None, 60,
             "all six processes to be ready")
    assert openers.poll() is None, finish(openers, 10)
    if db.backend == "sqlite":
        assert not Path(db.target).exists()
    go.touch()
    code, _, err = finish(openers, 60)
    assert code == 0, err
    assert "Traceback" not in err

    with contextlib.closing(sqew.Client(db.target)) as client:
        queues = {q.name for q in client.list_queues()}
    assert queues == set(names) | {f"{n}.dlq" for n in names}
    assert db.rows("SELECT version_num FROM alembic_version") == [(migrate.head(),)]
    if db.backend == "sqlite":
        assert db.rows("PRAGMA integrity_check") == [("ok",)]
        assert os.path.getsize(db.target) > 0


def test_db_upgrade_keeps_keys_enforced_on_a_database_that_has_keys(
    make_db: Callable[[], Db], procs: Procs
) -> None:
    """A database with keys before the setting existed (0005) requires keys for good."""
    keyed, keyless = make_db(), make_db()
    for db in (keyed, keyless):
        engine = db.engine()
        with engine.connect() as conn:
            from alembic import command

            command.upgrade(migrate.alembic_config(conn), "0005")
            conn.commit()
        engine.dispose()
    keyed.execute("INSERT INTO api_keys (id, scopes, hash, created_at) "
                  "VALUES ('k1', 'admin', 'h', 1)")
    for db in (keyed, keyless):
        code, _, err = sqew_run(["--db", db.target, "db", "upgrade"], procs.cwd)
        assert code == 0, err
    assert keyed.rows("SELECT name, value FROM meta") == [("auth_required", "1")]
    assert keyless.rows("SELECT count(*) FROM meta") == [(0,)]
