"""The CLI test harness: run the installed ``sqew`` binary, and a ``sqew serve`` to point it at.

Imported by ``conftest.py`` (fixtures) and by tests that need their own runners.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqew as sqew_lib

TIMEOUT_S = 60  # per subprocess; a hung command fails its test instead of the suite


def sqew_binary() -> str:
    """The installed console script (the venv's, next to this interpreter, if not on PATH)."""
    found = shutil.which("sqew")
    return found or str(Path(sys.executable).parent / "sqew")


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
                f"stdout: {self.stdout!r}\nstderr: {self.stderr!r}")


class Sqew:
    """Runs the ``sqew`` binary against one database, in one working directory."""

    def __init__(self, cwd: Path, db: Path, url: str | None = None) -> None:
        self.binary = sqew_binary()
        self.cwd = cwd
        self.db = db
        self.url = url
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SQEW_")}
        self.env["COLUMNS"] = "200"  # wide tables: human output is not cut mid-value

    def run(
        self,
        *args: str,
        stdin: str | bytes | None = None,
        db: Path | str | None = None,
        env: dict[str, str] | None = None,
        use_db: bool = True,
    ) -> Result:
        """``sqew --db <db> <args>`` (``--url <url>`` in http mode); stdin text/bytes optional."""
        if not use_db:
            where: list[str] = []
        elif self.url and db is None:
            where = ["--url", self.url]
        else:
            where = ["--db", str(db or self.db)]
        argv = [*where, *args]
        data = stdin.encode() if isinstance(stdin, str) else stdin
        proc = subprocess.run(
            [self.binary, *argv], input=data, capture_output=True, cwd=self.cwd,
            env={**self.env, **(env or {})}, timeout=TIMEOUT_S, check=False,
        )
        return Result(argv, proc.returncode, proc.stdout.decode(errors="replace"),
                      proc.stderr.decode(errors="replace"))

    def arrange(self, *queues: str, **settings: Any) -> sqew_lib.LocalClient:
        """Set up state in-process (fast) when it is not what a test is about.

        Creates ``queues`` with ``settings`` and returns an open client on the same database
        for more setup; close it (or use it as a context manager) before running commands.
        """
        client = sqew_lib.LocalClient(self.db)
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
        self.assert_failed(result, code)
        return result

    def usage_error(self, *args: str, **kwargs: Any) -> Result:
        """Run and require exit 2 (a usage error), without a traceback."""
        result = self.run(*args, **kwargs)
        self.assert_usage_error(result)
        return result

    def many(self, runs: Iterable[Sequence[str]], **kwargs: Any) -> list[Result]:
        """Run independent invocations concurrently (they share nothing but read-only state)."""
        with ThreadPoolExecutor(max_workers=4) as pool:
            return list(pool.map(lambda a: self.run(*a, **kwargs), runs))

    @staticmethod
    def assert_failed(result: Result, code: str) -> None:
        """Exit 1, one stderr line ``error: <code>: <message>``, no traceback."""
        assert result.returncode == 1, str(result)
        lines = result.stderr.splitlines()
        assert len(lines) == 1, str(result)
        assert lines[0].startswith(f"error: {code}: "), str(result)
        assert len(lines[0]) > len(f"error: {code}: "), str(result)
        assert "Traceback" not in result.stderr + result.stdout, str(result)

    @staticmethod
    def assert_usage_error(result: Result) -> None:
        """Exit 2 (usage error), no traceback."""
        assert result.returncode == 2, str(result)
        assert "Traceback" not in result.stderr + result.stdout, str(result)

    @staticmethod
    def handles(body: dict[str, Any]) -> list[str]:
        """``id:token`` handles of a poll response."""
        return [f"{m['id']}:{m['token']}" for m in body["messages"]]


SERVE_START_S = 30


@contextlib.contextmanager
def serve(db: Path, cwd: Path) -> Iterator[str]:
    """A real ``sqew serve`` subprocess on ``db`` and a free port; yields its URL.

    Stopped with SIGTERM (SIGKILL if it does not exit in 10 s), by its PID.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQEW_")}
    proc = subprocess.Popen(
        [sqew_binary(), "serve", "--db", str(db), "--port", "0"], cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        line: list[str] = []
        stdout = proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(SERVE_START_S)
        if not line or "serving on " not in line[0]:
            raise RuntimeError(f"sqew serve did not start: {line!r}, exit {proc.poll()}")
        yield line[0].split("serving on ", 1)[1].split()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


