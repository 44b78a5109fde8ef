"""A migration killed after any write leaves the database at a clean revision, and the next
open (a new database) or ``sqew db upgrade`` (an older one) goes on from there; a process
opening a database while another creates or upgrades it waits for it, then opens it.

The migrating processes are real and SIGKILL themselves after a chosen statement that writes
(``chaos.migration_kills``, which the chaos harness's ``kill-migration`` scenario runs too):
after every write of every revision in turn, found by running them, so a revision added later
is covered without a change here.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory

import sqew
from sqew import migrate

from .support import SQEW_BIN, Procs, finish, sqew_run, wait_for

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the chaos harness is imported from the source tree
    sys.path.insert(0, str(ROOT))
from chaos.migration_kills import State, state, upgrade_to  # noqa: E402

KILLS = ROOT / "chaos" / "migration_kills.py"
MakeDb = Callable[[str], str]
"""Makes an empty database of the test's backend, named after its argument; its target."""


def revisions() -> list[str]:
    """Every revision, oldest first."""
    script = ScriptDirectory.from_config(migrate.alembic_config())
    return [s.revision for s in reversed(list(script.walk_revisions()))]


def lines(out: str) -> list[dict[str, Any]]:
    """What ``migration_kills`` reported."""
    return [json.loads(line[3:]) for line in out.splitlines() if line.startswith("@@ ")]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeDb]:
    """Makes empty databases of the parameter's backend (PostgreSQL's dropped after)."""
    made: list[str] = []

    def make(name: str) -> str:
        if request.param == "sqlite":
            return str(tmp_path / f"{name}.db")
        import pg_support

        cluster = pg_support.cluster()
        made.append(f"mk_{os.getpid()}_{id(made)}_{name}")
        cluster.server.create_database(made[-1])
        return cluster.url(made[-1])

    yield make
    if made:
        import pg_support

        for name in made:
            pg_support.cluster().drop(name)


def references(target: str) -> dict[str | None, State]:
    """What each revision's database holds, made by Alembic uninterrupted on ``target``."""
    refs: dict[str | None, State] = {None: (None, [])}
    for rev in revisions():
        upgrade_to(target, rev)
        refs[rev] = state(target)
    return refs


def kill_after_each_write(procs: Procs, start: str, target: str) -> list[State]:
    """Run the ``chain`` (``migration_kills``) on ``target``; what each kill left. The last
    child finished unkilled, on the database every kill before it left."""
    code, out, err = finish(procs.spawn([sys.executable, str(KILLS), "chain", start, target]),
                            300)
    assert code == 0, err
    reported = lines(out)
    assert reported[-1] == {"done": 0}, (reported[-3:], err)  # the last child opened it
    kills: list[State] = [(r["state"][0], r["state"][1]) for r in reported if "state" in r]
    statements = [str(r["killed_after"]) for r in reported if "killed_after" in r]
    assert len(statements) == len(kills) > 0
    # the last kill came after the newest revision's stamp, the last write there is
    assert "alembic_version" in statements[-1] and f"'{migrate.head()}'" in statements[-1]
    return kills


def assert_usable(target: str, head: State) -> None:
    assert state(target) == head
    with contextlib.closing(sqew.Client(target)) as client:
        client.create_queue("after")
        client.enqueue("after", {"n": 1})
        assert client.stats("after").ready == 1


# --- every write of every revision --------------------------------------------------------------
@pytest.mark.slow
def test_a_new_database_killed_after_any_write_has_no_schema_and_opens(
    make_db: MakeDb, procs: Procs
) -> None:
    """A new database gets its whole schema in one transaction: killed after any write, it
    holds nothing, and the next ``sqew.Client`` creates it (each kill's database is the next
    child's)."""
    refs = references(make_db("ref"))
    target = make_db("killed")
    kills = kill_after_each_write(procs, "new", target)
    assert all(kill == refs[None] for kill in kills), kills
    assert_usable(target, refs[migrate.head()])


@pytest.mark.slow
def test_an_upgrade_killed_after_any_write_leaves_the_last_whole_revision(
    make_db: MakeDb, procs: Procs
) -> None:
    """``sqew db upgrade`` runs each revision in a transaction of its own: killed after any
    write of any revision, the database is exactly at the revision before (those done stay
    done), and the next ``sqew db upgrade`` goes on from there."""
    order = revisions()
    refs = references(make_db("ref"))
    target = make_db("killed")
    upgrade_to(target, order[0])
    kills = kill_after_each_write(procs, order[0], target)
    for kill in kills:
        assert kill[0] is not None and kill == refs[kill[0]], kill
    interrupted = {order[order.index(str(kill[0])) + 1] for kill in kills}
    assert interrupted == set(order[1:])  # kills inside every revision, the newest included
    assert_usable(target, refs[migrate.head()])


# --- as the CLI meets it ------------------------------------------------------------------------
def kill_once(procs: Procs, start: str, db: Path, n: int) -> str:
    """Migrate ``db`` in a child killed after its ``n``-th write; that statement."""
    code, out, err = finish(procs.spawn(
        [sys.executable, str(KILLS), "kill", start, str(db), str(n)]), 60)
    assert code == -9, (code, out, err)
    return str(lines(out)[-1]["killed_after"])


def cli(db: Path, *args: str) -> tuple[int, str, str]:
    return sqew_run(["--db", str(db), *args], db.parent)


def test_a_new_file_killed_after_its_second_create_table_opens_from_the_cli(
    tmp_path: Path, procs: Procs
) -> None:
    db, ref = tmp_path / "q.db", tmp_path / "ref.db"
    assert kill_once(procs, "new", db, 2).startswith("CREATE TABLE")
    assert state(str(db)) == (None, [])
    code, out, err = cli(db, "queue", "list")
    assert (code, err) == (0, ""), out
    upgrade_to(str(ref), "head")
    assert_usable(str(db), state(str(ref)))


def test_an_upgrade_killed_after_an_add_column_is_finished_by_db_upgrade(
    tmp_path: Path, procs: Procs
) -> None:
    """A file at 0003, killed in ``sqew db upgrade`` right after the first ADD COLUMN of 0004:
    still at 0003, refused as older, upgraded by the next ``sqew db upgrade``."""
    db, ref = tmp_path / "q.db", tmp_path / "ref.db"
    upgrade_to(str(db), "0003")
    upgrade_to(str(ref), "0003")
    assert "ADD COLUMN" in kill_once(procs, "0003", db, 1)
    assert state(str(db)) == state(str(ref))
    code, out, err = cli(db, "queue", "list")
    assert code == 1 and "run `sqew db upgrade`" in err, (out, err)
    code, out, err = cli(db, "db", "upgrade")
    assert code == 0 and migrate.head() in out, (out, err)
    upgrade_to(str(ref), "head")
    assert_usable(str(db), state(str(ref)))


# --- a second process meets a database being migrated -------------------------------------------
OPENER = r"""
import sys, sqew
with sqew.Client(sys.argv[1]) as client:
    client.create_queue(sys.argv[2])
"""


def waits_for_flock(pid: int, path: Path) -> bool:
    """Whether process ``pid`` waits for an ``flock`` on ``path`` (Linux's ``/proc/locks``
    lists a waiting request after ``->``)."""
    inode = path.stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields:
            kind, _, _, owner, where = fields[fields.index("->") + 1:][:5]
            if kind == "FLOCK" and int(owner) == pid and int(where.rsplit(":", 1)[1]) == inode:
                return True
    return False


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
@pytest.mark.parametrize("start", ["new", "0001"])
def test_a_process_opening_a_database_being_migrated_waits_and_opens_it(
    start: str, tmp_path: Path, procs: Procs
) -> None:
    """The migrator is held after its second write (a new file: inside its first revision,
    which no one else sees yet; 0001: with the next revision under way), while the CLI and a
    ``sqew.Client`` open the file without ``upgrade``: both wait for it, then open it."""
    db = tmp_path / "q.db"
    if start != "new":
        upgrade_to(str(db), start)
    paused, go = tmp_path / "paused", tmp_path / "go"
    migrator = procs.spawn([sys.executable, str(KILLS), "pause", start, str(db), "2",
                            str(paused), str(go)])
    wait_for(lambda: paused.exists() or migrator.poll() is not None, 60, "the pause")
    assert migrator.poll() is None, finish(migrator, 10)

    lister = procs.spawn([str(SQEW_BIN), "--db", str(db), "queue", "list"])
    opener = procs.python(OPENER, str(db), "made-while-waiting")
    lock = db.with_name(db.name + "-lock")
    wait_for(lambda: all(p.poll() is not None or waits_for_flock(p.pid, lock)
                         for p in (lister, opener)), 60, "both to wait for the migration")
    go.touch()
    code, out, err = finish(migrator, 60)
    assert code == 0, err
    for proc in (lister, opener):
        code, out, err = finish(proc, 60)
        assert (code, err) == (0, ""), (out, err)
    with contextlib.closing(sqew.Client(db)) as client:
        assert "made-while-waiting" in {q.name for q in client.list_queues()}
