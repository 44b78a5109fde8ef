"""The CLI test harness: run the installed ``sqew`` binary, and a ``sqew serve`` to point it at.

Imported by ``conftest.py`` (fixtures) and by tests that need their own runners or servers.

Two runners exist per test: ``local`` (every command gets ``--db <file of this test>``) and
``http`` (every command gets ``--url`` of a real ``sqew serve`` subprocess shared by the tests
of one xdist worker). On a shared server a test sees other tests' queues and message ids, so
tests name their queues with ``sqew.name("jobs")`` (``jobs`` locally, ``jobs-<n>`` on the
shared server), expect ids as ``sqew.id(1)`` (the first message this test creates) and read
``queue list`` through ``sqew.own(...)``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cli_runs
import forkserver
from cli_runs import sqew_binary
from process_support import TIMEOUT_S, Lines, parked

import sqew as sqew_lib

SERVE_START_S = 30
SERVE_STOP_S = 10


def clean_env(**extra: str) -> dict[str, str]:
    """``cli_runs.environment`` with wide tables (human output is not cut mid-value), plus
    ``extra``."""
    return cli_runs.environment(**{"COLUMNS": "200", **extra})


@dataclass
class Result:
    """What one ``sqew`` run did."""

    args: Sequence[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout parsed as one JSON document."""
        return json.loads(self.stdout)

    def __str__(self) -> str:
        return (f"sqew {' '.join(self.args)} -> {self.returncode}\n"
                f"stdout: {self.stdout[:2000]!r}\nstderr: {self.stderr[:2000]!r}")


def run_sqew(argv: Sequence[str], *, cwd: Path, env: dict[str, str],
             stdin: str | bytes | None = None) -> Result:
    """Run ``sqew`` once with ``argv`` (``cli_runs.run``: a process forked by the tests' fork
    server, or the binary itself when ``SQEW_TEST_FORKSERVER=0``)."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    returncode, out, err = cli_runs.run(argv, cwd=cwd, env=env, stdin=data)
    return Result(list(argv), returncode, out.decode(errors="replace"),
                  err.decode(errors="replace"))


class Sqew:
    """Runs the ``sqew`` binary against one store (a database file, or a server on one).

    Args:
        cwd: working directory of every run (a wrongly opened default ``./sqew.db`` shows).
        db: the database: what ``--db`` names locally (a file, or a ``postgresql+psycopg://``
            URL), and the server's database in http mode.
        url: the server's URL: http mode, every command gets ``--url``.
        tag: suffix that makes this test's queue names unique on a shared server.
        id_base: the largest message id the store had before this test.
        server: the ``Server`` at ``url`` (its log shows where its long polls wait).
    """

    def __init__(self, cwd: Path, db: Path | str, url: str | None = None, *,
                 tag: str | None = None, id_base: int = 0,
                 server: Server | None = None) -> None:
        self.binary = sqew_binary()
        self.cwd = cwd
        self.db = db
        self.url = url
        self.tag = tag
        self.id_base = id_base
        self.server = server
        self.env = clean_env()

    @property
    def mode(self) -> str:
        """``local`` or ``http``."""
        return "http" if self.url else "local"

    @property
    def backend(self) -> str:
        """``sqlite`` (``db`` is a file) or ``postgres`` (``db`` is a PostgreSQL URL)."""
        return "postgres" if str(self.db).startswith("postgresql") else "sqlite"

    # --- names and ids on a possibly shared store ----------------------------------------------
    def name(self, base: str) -> str:
        """This test's name for queue ``base``: ``base`` itself unless the store is shared."""
        return f"{base}-{self.tag}" if self.tag else base

    def id(self, n: int) -> int:
        """The id of the ``n``-th message this test creates (ids are increasing per store)."""
        return self.id_base + n

    def own(self, queues: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The queues (JSON objects) this test created, in the order given."""
        if not self.tag:
            return list(queues)
        suffix = f"-{self.tag}"
        return [q for q in queues if q["name"].removesuffix(".dlq").endswith(suffix)]

    # --- running -------------------------------------------------------------------------------
    def run(
        self,
        *args: str,
        stdin: str | bytes | None = None,
        db: Path | str | None = None,
        env: dict[str, str] | None = None,
        use_db: bool = True,
    ) -> Result:
        """``sqew --db <db> <args>`` (``--url <url>`` in http mode); stdin text/bytes optional.

        ``db`` forces local mode on that file; ``use_db=False`` gives no global option at all.
        """
        if not use_db:
            where: list[str] = []
        elif self.url and db is None:
            where = ["--url", self.url]
        else:
            where = ["--db", str(db or self.db)]
        return run_sqew([*where, *args], cwd=self.cwd, env={**self.env, **(env or {})},
                        stdin=stdin)

    def arrange(self, *queues: str, **settings: Any) -> sqew_lib.Client:
        """Set up state in-process (fast) when it is not what a test is about.

        Creates ``queues`` (names as given) with ``settings`` through the store the commands
        use: a LocalClient on the file, or an HttpClient to the server. Returns the open client
        for more setup; close it (or use it as a context manager) when done.
        """
        client = sqew_lib.Client(self.url) if self.url else sqew_lib.LocalClient(self.db)
        for name in queues:
            client.create_queue(name, **settings)
        return client

    def ok(self, *args: str, **kwargs: Any) -> Result:
        """Run and require exit status 0 with nothing on stderr."""
        result = self.run(*args, **kwargs)
        assert result.returncode == 0, str(result)
        assert result.stderr == "", str(result)
        return result

    def json(self, *args: str, **kwargs: Any) -> Any:
        """Run with ``--json``, require success, return the parsed stdout."""
        return self.ok("--json", *args, **kwargs).json()

    def fails(self, *args: str, code: str, **kwargs: Any) -> Result:
        """Run and require exit 1 with exactly one ``error: <code>: …`` line on stderr."""
        result = self.run(*args, **kwargs)
        assert_failed(result, code)
        return result

    def usage_error(self, *args: str, **kwargs: Any) -> Result:
        """Run and require exit 2 (a usage error), without a traceback."""
        result = self.run(*args, **kwargs)
        assert_usage_error(result)
        return result

    def start(self, *args: str, stdin: int | None = None, env: dict[str, str] | None = None,
              binary: bool = False) -> cli_runs.Started:
        """Start ``sqew <where> <args>`` in a foreground job's signal state (``foreground``),
        stdout and stderr piped (bytes), stdin empty or a pipe (``subprocess.PIPE``); the
        caller ends it (by its PID) however the test ends. A run of the fork server
        (``cli_runs.start``), or of the binary when ``binary`` says so: a test about what
        happens while the process starts."""
        where = ["--url", self.url] if self.url else ["--db", str(self.db)]
        return cli_runs.start([*where, *args], cwd=self.cwd, env={**self.env, **(env or {})},
                              binary=binary, stdin=stdin, text=False)

    def until_parked(self, queue: str, command: Lines, timeout: float = TIMEOUT_S) -> None:
        """Return once a long poll of ``queue`` waits: in the server's log in http mode, else
        in the stderr of the ``command`` (run with ``LOG_WAITS``); fail after ``timeout``."""
        if self.server is None:
            if command.until(lambda lines: parked(lines, queue) > 0, timeout):
                return
            raise AssertionError(f"no long poll of {queue!r} waits")
        deadline = time.monotonic() + timeout
        while parked(self.server.log_text().splitlines(), queue) < 1:
            assert time.monotonic() < deadline, f"no long poll of {queue!r} waits in the server"
            time.sleep(0.02)  # the server's log is a file: read again

    def many(self, runs: Iterable[Sequence[str]], **kwargs: Any) -> list[Result]:
        """Run independent invocations concurrently (they share nothing but read-only state)."""
        with ThreadPoolExecutor(max_workers=4) as pool:
            return list(pool.map(lambda a: self.run(*a, **kwargs), runs))

    @staticmethod
    def assert_failed(result: Result, code: str) -> None:
        """See the module function ``assert_failed``."""
        assert_failed(result, code)

    @staticmethod
    def assert_usage_error(result: Result) -> None:
        """See the module function ``assert_usage_error``."""
        assert_usage_error(result)

    @staticmethod
    def handles(body: dict[str, Any]) -> list[str]:
        """``id:token`` handles of a poll response."""
        return [f"{m['id']}:{m['token']}" for m in body["messages"]]


def assert_failed(result: Result, code: str) -> None:
    """Exit 1, no traceback, one stderr line: ``error: <code>: <message>``, or with ``--json``
    (or ``SQEW_JSON``) the error envelope ``{"error": {"code": <code>, "message": …}}``."""
    assert result.returncode == 1, str(result)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, str(result)
    if lines[0].startswith("{"):  # --json (or SQEW_JSON)
        error = json.loads(lines[0])["error"]
        assert error["code"] == code and error["message"], str(result)
    else:
        assert lines[0].startswith(f"error: {code}: "), str(result)
        assert len(lines[0]) > len(f"error: {code}: "), str(result)
    assert "Traceback" not in result.stderr + result.stdout, str(result)


def assert_usage_error(result: Result) -> None:
    """Exit 2 (usage error), no traceback."""
    assert result.returncode == 2, str(result)
    assert "Traceback" not in result.stderr + result.stdout, str(result)


# --- a real server ------------------------------------------------------------------------------
class Server:
    """A ``sqew serve --db <db> --port 0`` process, started by the constructor: forked by the
    fork server (``cli_runs``: a start costs no imports), or the binary under
    ``SQEW_TEST_FORKSERVER=0``. Either ends when the test process does.

    Its stdout and stderr go to the file ``log`` (by default ``<db>.serve.log`` beside a
    database file; a server on a database URL needs one given), never a pipe: with the access
    log on, a pipe nobody reads would fill and stall the server. The first ``sqew serving on
    http://…`` line there gives the URL. ``stop()`` ends it by its PID: SIGTERM, then SIGKILL
    if it has not exited within ``SERVE_STOP_S``.
    """

    def __init__(self, db: Path | str, cwd: Path, *, access_log: bool = False,
                 log: Path | None = None, **settings: str) -> None:
        self.db = db
        self.log = log or Path(db).with_name(Path(db).name + ".serve.log")
        env = clean_env(**({"SQEW_ACCESS_LOG": "true"} if access_log else {}),
                        **{"SQEW_" + k.upper(): v for k, v in settings.items()})
        argv = ["serve", "--db", str(db), "--port", "0"]
        self.proc: cli_runs.Started
        with self.log.open("wb") as log:
            if cli_runs.forking():
                self.proc = cli_runs.fork_server().start(argv, cwd=cwd, env=env, stdout=log,
                                                         stderr=log)
            else:
                self.proc = subprocess.Popen(
                    [sqew_binary(), *argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT,
                    preexec_fn=functools.partial(forkserver.die_with, os.getpid()),
                )
        self.pid = self.proc.pid
        try:
            self.url = self._announced_url()
        except BaseException:
            self.stop()
            raise

    def _announced_url(self) -> str:
        deadline = time.monotonic() + SERVE_START_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            found = re.search(r"sqew serving on (http://\S+)", self.log_text())
            if found:
                return found.group(1)
            time.sleep(0.02)
        raise RuntimeError(f"sqew serve did not start (exit {self.proc.poll()}): "
                           f"{self.log_text()[-2000:]!r}")

    def log_text(self) -> str:
        """What the server wrote so far (stdout and stderr)."""
        return self.log.read_text(errors="replace")

    def requests(self, method: str, route: str, queue: str | None = None) -> int:
        """How many ``method route`` requests (of ``queue``) the access log shows (needs
        ``access_log``; the server logs JSON lines, its stderr being no terminal)."""
        count = 0
        for line in self.log_text().splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            count += (record.get("event"), record.get("method"), record.get("route"),
                      record.get("queue")) == ("request", method, route, queue)
        return count

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL if it is still there after ``SERVE_STOP_S``; idempotent."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(SERVE_STOP_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(SERVE_STOP_S)


@contextlib.contextmanager
def serve(db: Path | str, cwd: Path, *, access_log: bool = False,
          log: Path | None = None, **settings: str) -> Iterator[Server]:
    """A ``Server`` for the duration of a ``with`` block, stopped however the block ends."""
    server = Server(db, cwd, access_log=access_log, log=log, **settings)
    try:
        yield server
    finally:
        server.stop()


PROBE_QUEUE = "cli-id-probe"


@dataclass
class SharedServer:
    """The session's server, and an HttpClient to it for finding where message ids are."""

    server: Server
    client: sqew_lib.Client

    def last_id(self) -> int:
        """The largest message id given out so far (enqueues one message and removes it)."""
        result = self.client.enqueue(PROBE_QUEUE, None)
        self.client.remove_message(PROBE_QUEUE, result.message_id)
        return result.message_id

    def runner(self, cwd: Path) -> Sqew:
        """A runner of this server for one test: unique queue names, ids after the last."""
        return Sqew(cwd, self.server.db, self.server.url, tag=next_tag(),
                    id_base=self.last_id(), server=self.server)


_tags = itertools.count(1)


def next_tag() -> str:
    """A suffix for queue names unique within this process (one xdist worker)."""
    return f"t{next(_tags)}"
