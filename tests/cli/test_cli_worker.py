"""``sqew worker`` in a process of its own: SIGTERM mid-batch finishes and acks what it
started and exits 0; SIGKILL leaves leases that expire and are delivered again; a handler it
cannot use is a one-line error. The handler is a module written into the working directory;
it marks each message it starts with a file, and waits for a file the test makes."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from cli_support import Sqew
from process_support import TIMEOUT_S, Lines, end

HANDLER = """
import os, time
import sqew

def handle(m):
    open(f"started-{m.id}", "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists("go-on") and time.monotonic() < deadline:
        time.sleep(0.01)
    if m.payload == "bad":
        raise sqew.Reject("bad payload")
    if m.payload == "flaky":
        raise ValueError("flaky payload")
"""


def _started(cwd: Path) -> list[str]:
    return sorted(p.name for p in cwd.glob("started-*"))


def _until(done: object, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_sigterm_mid_batch_finishes_what_it_started_and_exits_0(sqew: Sqew) -> None:
    q = sqew.name("q")
    (sqew.cwd / "tasks.py").write_text(HANDLER)
    # A backoff far longer than the test: the flaky message is still delayed when counted.
    with sqew.arrange(q, visibility_ms=2000, backoff_base_ms=600_000) as client:
        client.enqueue_batch(q, [{"payload": p} for p in ("ok", "bad", "flaky", "ok", "ok")])
    proc = sqew.start("worker", "--queue", q, "--handler", "tasks:handle", "--concurrency", "3")
    try:
        _until(lambda: len(_started(sqew.cwd)) == 3, "three handlers under way")
        proc.send_signal(signal.SIGTERM)
        (sqew.cwd / "go-on").touch()
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        end(proc)
    assert proc.returncode == 0, err
    assert out.decode().strip() == ("1 processed, 1 failed, 1 rejected, 0 lost, "
                                    "0 lease extensions")
    lines = [json.loads(line) for line in err.decode().splitlines()]  # JSON logs: not a tty
    messages = [line["message"] for line in lines]
    assert any("rejected (to the DLQ): bad payload" in m for m in messages), messages
    assert any("failed (attempt 1): ValueError: flaky payload" in m for m in messages)
    assert any(m.startswith("SIGTERM: stopping") for m in messages)
    with sqew.arrange() as client:
        stats = client.stats(q)
        assert (stats.acked_total, stats.dead_lettered_total, stats.leased) == (1, 1, 0)
        assert (stats.ready, stats.delayed) == (2, 1)  # the flaky one waits out its backoff
        assert [(m.payload, m.attempts) for m in client.peek(q)] == [("ok", 0), ("ok", 0)]
        (dead,) = client.dlq_list(q)
        assert (dead.payload, dead.last_error) == ("bad", "bad payload")


def test_a_second_signal_stops_waiting_for_the_handlers(local_sqew: Sqew) -> None:
    (local_sqew.cwd / "tasks.py").write_text(HANDLER)
    with local_sqew.arrange("q", visibility_ms=500) as client:
        msg_id = client.enqueue("q", "stuck").message_id
    proc = local_sqew.start("worker", "--queue", "q", "--handler", "tasks:handle")
    try:
        assert proc.stderr is not None
        err = Lines(proc.stderr)  # (read as it comes; the test waits for a line of it)
        _until(lambda: len(_started(local_sqew.cwd)) == 1, "the handler under way")
        proc.send_signal(signal.SIGTERM)
        assert err.until(lambda lines: any("waiting up to 30 s for 1 messages" in line
                                           for line in lines), TIMEOUT_S)
        proc.send_signal(signal.SIGINT)
        proc.wait(TIMEOUT_S)
        assert proc.stdout is not None
        out = proc.stdout.read()  # (a line: it fits the pipe)
    finally:
        end(proc)
    assert proc.returncode == 0
    assert out.decode().startswith("0 processed, 0 failed, 0 rejected, 0 lost, ")
    with local_sqew.arrange() as client:  # its lease is no longer kept: it comes back
        back: list[int] = []
        _until(lambda: back.extend(m.id for m in client.poll("q")) or back == [msg_id],
               "the lease to expire")


def test_sigkill_leaves_leases_that_expire_and_come_back(sqew: Sqew) -> None:
    q = sqew.name("q")
    (sqew.cwd / "tasks.py").write_text(HANDLER)
    with sqew.arrange(q, visibility_ms=500) as client:
        ids = [r.message_id for r in client.enqueue_batch(q, [{"payload": n} for n in range(2)])]
    proc = sqew.start("worker", "--queue", q, "--handler", "tasks:handle", "--concurrency", "2")
    try:
        _until(lambda: len(_started(sqew.cwd)) == 2, "two handlers under way")
        proc.send_signal(signal.SIGKILL)
        proc.wait(TIMEOUT_S)
    finally:
        end(proc)
    with sqew.arrange() as client:
        assert client.stats(q).leased == 2
        back: list[tuple[int, int]] = []
        _until(lambda: back.extend((m.id, m.attempts) for m in client.poll(q, batch=2))
               or len(back) == 2, "the leases to expire")
        assert sorted(back) == [(i, 2) for i in ids]
        assert client.stats(q).acked_total == 0


def test_a_handler_it_cannot_use_is_one_line_and_a_failure(local_sqew: Sqew) -> None:
    (local_sqew.cwd / "tasks.py").write_text(HANDLER + "\nLIMIT = 3\n")
    with local_sqew.arrange("q"):
        pass
    cases = [("tasks", "expected MODULE:FUNCTION"),
             ("no_such_module:handle", "cannot import 'no_such_module'"),
             ("tasks:missing", "has no 'missing'"),
             ("tasks:LIMIT", "the handler must be callable, not int")]
    results = local_sqew.many([("worker", "--queue", "q", "--handler", spec)
                               for spec, _ in cases]
                              + [("worker", "--queue", "nope", "--handler", "tasks:handle")])
    for (_, says), result in zip(cases, results, strict=False):
        local_sqew.assert_usage_error(result)
        assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    local_sqew.assert_failed(results[-1], "QueueNotFound")
