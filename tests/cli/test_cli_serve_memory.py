"""``sqew serve --memory`` as a user runs it (``cli_runs.start``): a server on a throwaway
database that leaves nothing behind once it stops, refused with ``--db`` and with ``--workers``
above 1."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import cli_runs
import pytest
from cli_runs import Started
from cli_support import SERVE_START_S, SERVE_STOP_S, Sqew, assert_failed, clean_env

import sqew

boto3 = pytest.importorskip("boto3")


def _start(tmp_path: Path) -> tuple[Started, Path]:
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = cli_runs.start(["serve", "--memory", "--port", "0"], cwd=tmp_path,
                              env=clean_env(), log=out)
    return proc, log


def _announced(proc: Started, log: Path) -> re.Match[str]:
    deadline = time.monotonic() + SERVE_START_S
    while time.monotonic() < deadline and proc.poll() is None:
        found = re.search(r"sqew serving on (http://\S+) \(db: (\S+)\)", log.read_text())
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"no server: {log.read_text()[-2000:]}")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_memory_serves_and_leaves_nothing_behind(tmp_path: Path, stop: int) -> None:
    proc, log = _start(tmp_path)
    try:
        found = _announced(proc, log)
        url, db = found.group(1), Path(found.group(2))
        assert db.exists() and db.parent.name.startswith("sqew-memory-")
        if Path("/dev/shm").is_dir():
            assert db.parent.parent == Path("/dev/shm")  # in RAM: nothing reaches a disk
        assert (db.parent.stat().st_mode & 0o777) == 0o700
        with sqew.Client(url) as rest:
            rest.create_queue("jobs")
            rest.enqueue("jobs", {"n": 1})
        sqs = boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                           aws_access_key_id="x", aws_secret_access_key="x")
        (m,) = sqs.receive_message(QueueUrl=f"{url}/123456789012/jobs")["Messages"]
        assert m["Body"] == '{"n":1}'
        sqs.close()
    finally:
        os.kill(proc.pid, stop)
        assert proc.wait(SERVE_STOP_S) == 0
    assert not db.parent.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serve.log"]


def test_memory_is_refused_with_a_database_or_workers(local_sqew: Sqew) -> None:
    result = local_sqew.run("serve", "--memory", "--workers", "2", "--port", "0",
                            use_db=False)
    assert_failed(result, "ValidationError")
    assert "--memory" in result.stderr and "workers" in result.stderr
    result = local_sqew.run("serve", "--memory", "--port", "0")  # with --db
    assert_failed(result, "ValidationError")
    assert not (local_sqew.cwd / "cli.db").exists()
