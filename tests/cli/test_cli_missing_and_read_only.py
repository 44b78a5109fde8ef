"""A command that only reads never creates a database: a missing one is one line of error
naming the path (a mistyped ``--db`` is not an empty store), and nothing is left behind; the
commands that make something create it. A database this user may read but not write is read
as it is, and only a write says it cannot be done."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import another_user
import cli_runs
import pytest

import sqew

READS = (
    ["queue", "list"], ["queue", "show", "--name", "jobs"], ["queue", "peek", "--name", "jobs"],
    ["stats", "--queue", "jobs"], ["dlq", "list", "--queue", "jobs"], ["keys", "list"],
    ["message", "peek", "--queue", "jobs", "--id", "1"], ["health"], ["metrics"],
    ["queue", "export", "--name", "jobs"],
)
WRITES = (
    ["message", "enqueue", "--queue", "jobs", "--payload", "2"],
    ["message", "poll", "--queue", "jobs"],
)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``sqew args`` in ``cwd``, as every CLI test runs it (``cli_runs``)."""
    return cli_runs.completed(list(args), cwd=cwd)


def test_commands_refuse_a_missing_database_and_create_nothing(tmp_path: Path) -> None:
    for args in (*READS, *WRITES):
        done = run(*args, cwd=tmp_path)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr.splitlines() == [
            "error: Unavailable: no database at 'sqew.db' (create one with "
            "`sqew --db sqew.db db upgrade`, or make a queue with `queue add`)"], args
    mistyped = run("--db", "sqwe.db", "queue", "list", cwd=tmp_path)
    assert mistyped.returncode == 1 and "'sqwe.db'" in mistyped.stderr
    assert list(tmp_path.iterdir()) == []


def test_commands_that_make_something_create_it(tmp_path: Path) -> None:
    for made, args in (("a.db", ["queue", "add", "--name", "jobs"]),
                       ("b.db", ["keys", "create", "--scope", "admin"]),
                       ("c.db", ["db", "upgrade"])):
        done = run("--db", made, *args, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        assert (tmp_path / made).exists()


def run_as_reader(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``sqew`` as a user who may not write this test's files (``tests/another_user.py``:
    ``nobody`` when the suite runs as root, whom file modes do not stop): a run of the tests'
    fork server made that user, or that user's interpreter running sqew's entry point."""
    reader = another_user.reader()
    if isinstance(reader, str):
        pytest.fail(reader)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **reader.env}
    if cli_runs.forking():
        return cli_runs.completed(list(args), cwd=cwd, env=env, user=reader.user)
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [*reader.sqew, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60,
        check=False, **reader.popen())


@pytest.fixture
def shared() -> Iterator[Path]:
    """A database another user owns and shares read-only: the file and its directory (in a
    directory everyone may enter: pytest's own are private)."""
    folder = Path(tempfile.mkdtemp(prefix="sqew-shared-"))
    db = folder / "q.db"
    try:
        with sqew.Client(str(db)) as client:
            client.create_queue("jobs")
            client.enqueue("jobs", {"n": 1})
        (folder / "q.db-lock").unlink()
        db.chmod(0o644)
        folder.chmod(0o555)
        yield db
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def test_a_database_in_a_directory_this_user_may_not_enter(shared: Path) -> None:
    shared.parent.chmod(0o000)
    done = run_as_reader("--db", str(shared), "queue", "list", cwd=Path("/"))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: Unavailable: cannot open database '{shared}': permission denied"]


def test_a_database_this_user_may_only_read_is_read(shared: Path) -> None:
    anywhere = Path("/")
    before = sorted(p.name for p in shared.parent.iterdir())
    for args in READS:
        done = run_as_reader("--db", str(shared), *args, cwd=anywhere)
        assert done.returncode == 0, (args, done.stderr)
    stats = run_as_reader("--db", str(shared), "--json", "stats", "--queue", "jobs",
                          cwd=anywhere)
    assert '"ready":1' in stats.stdout, stats.stderr
    for args in WRITES:
        done = run_as_reader("--db", str(shared), *args, cwd=anywhere)
        assert done.returncode == 1, (args, done.stdout)
        assert done.stderr.splitlines() == [
            f"error: Unavailable: the database '{shared}' is read-only here: this user may "
            "read it, not write it"], args
    assert sorted(p.name for p in shared.parent.iterdir()) == before
