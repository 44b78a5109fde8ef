"""``message enqueue --file``: NDJSON streamed in batches; bad lines reported and skipped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from typing import IO

import pytest
from process_support import TIMEOUT_S, end


def _ready(sqew, queue: str) -> list:
    """The ready messages of ``queue``, read in-process (the CLI's output is what is tested)."""
    with sqew.arrange() as client:
        return client.peek(queue, limit=100)


def test_good_and_bad_lines(sqew, tmp_path) -> None:
    q = sqew.name("q")
    sqew.arrange(q, max_payload_bytes=64).close()
    lines = [
        b'{"n": 1}',  # 1
        b"",  # 2 blank: skipped, not a failure
        b"[1, 2, 3]",  # 3
        b"{not json",  # 4
        b'"' + b"x" * 100 + b'"',  # 5 larger than max_payload_bytes: the service refuses it
        b'"caf\xff"',  # 6 not UTF-8
        b"   42   ",  # 7
        b"1 2",  # 8 two values on one line
        b"null\r",  # 9 CRLF line ending
    ]
    path = tmp_path / "in.ndjson"
    path.write_bytes(b"\n".join(lines) + b"\n")

    result = sqew.run("--json", "message", "enqueue", "--queue", q, "--file", str(path),
                      "--priority", "3", "--attr", "src=file")
    sqew.assert_failed(result, "ValidationError")
    summary = result.json()
    assert set(summary) == {"enqueued", "duplicates", "failed"}
    assert (summary["enqueued"], summary["duplicates"]) == (4, 0)
    assert [(f["line"], f["error"]["code"]) for f in summary["failed"]] == [
        (4, "ValidationError"), (5, "PayloadTooLarge"), (6, "ValidationError"),
        (8, "ValidationError"),
    ]
    assert all(set(f) == {"line", "error"} and set(f["error"]) == {"code", "message"}
               for f in summary["failed"])
    assert "line 4" in result.stderr

    ready = _ready(sqew, q)
    assert [m.payload for m in ready] == [{"n": 1}, [1, 2, 3], 42, None]
    assert {(m.priority, m.attributes["src"]) for m in ready} == {(3, "file")}


def test_human_summary_lists_failed_line_numbers(sqew, tmp_path) -> None:
    q = sqew.name("q")
    sqew.arrange(q).close()
    path = tmp_path / "in.ndjson"
    path.write_text("1\n2\noops\n3\n")
    result = sqew.run("message", "enqueue", "--queue", q, "--file", str(path))
    sqew.assert_failed(result, "ValidationError")
    assert f"enqueued 3 messages to {q}\n" in result.stdout
    assert "line 3: ValidationError" in result.stdout


def test_stdin_in_batches_with_a_bad_line_in_a_later_batch(sqew) -> None:
    q = sqew.name("q")
    sqew.arrange(q, max_payload_bytes=20).close()
    # 1200 lines: three batches; line 1100 is too large, so its whole batch is refused by the
    # service and retried one message at a time
    lines = [json.dumps({"i": i}) for i in range(1, 1201)]
    lines[1099] = json.dumps({"i": "x" * 40})
    result = sqew.run("--json", "message", "enqueue", "--queue", q, "--file", "-",
                      stdin="\n".join(lines))  # no newline after the last line
    sqew.assert_failed(result, "PayloadTooLarge")
    summary = result.json()
    assert summary["enqueued"] == 1199
    assert [(f["line"], f["error"]["code"]) for f in summary["failed"]] == [
        (1100, "PayloadTooLarge")]
    assert "message 0" not in summary["failed"][0]["error"]["message"]
    assert len(_ready(sqew, q)) == 100  # peek's limit
    with sqew.arrange() as client:
        assert client.stats(q).ready == 1199


def test_envelope_lines_carry_their_own_fields(sqew) -> None:
    q = sqew.name("q")
    sqew.arrange(q).close()
    lines = [
        {"payload": {"a": 1}, "priority": 7, "attributes": {"k": "v"}},
        {"payload": "dup", "idempotency_key": "key-1"},
        {"payload": "dup", "idempotency_key": "key-1"},
        {"payload": 1, "unknown": True},
        {"priority": 1},
        [1, 2],
        {"payload": 2, "priority": 5000},
        {"payload": "later", "delay_ms": 3_600_000},
    ]
    result = sqew.run("--json", "message", "enqueue", "--queue", q, "--file", "-",
                      "--envelope", stdin="\n".join(json.dumps(x) for x in lines) + "\n")
    sqew.assert_failed(result, "ValidationError")
    summary = result.json()
    assert (summary["enqueued"], summary["duplicates"]) == (3, 1)
    assert [f["line"] for f in summary["failed"]] == [4, 5, 6, 7]
    assert [(m.payload, m.priority, m.attributes) for m in _ready(sqew, q)] == [
        ({"a": 1}, 7, {"k": "v"}), ("dup", 0, {})]
    with sqew.arrange() as client:
        assert client.stats(q).delayed == 1


def test_envelope_lines_not_utf8_fail_by_line_number(sqew) -> None:
    """An ``--envelope`` line with invalid UTF-8 anywhere (a field's name included) is a
    failed line like any other, and the lines around it are enqueued."""
    q = sqew.name("q")
    sqew.arrange(q).close()
    lines = [b'{"payload": 1}', b'{"\xffpayload": {"n": 2}}', b'{"payload": "caf\xff"}',
             b'{"payload": 4, "attributes": {"k\xc3": "v"}}', b'{"payload": 5}']
    result = sqew.run("--json", "message", "enqueue", "--queue", q, "--file", "-",
                      "--envelope", stdin=b"\n".join(lines) + b"\n")
    sqew.assert_failed(result, "ValidationError")
    summary = result.json()
    assert [(f["line"], f["error"]["code"]) for f in summary["failed"]] == [
        (2, "ValidationError"), (3, "ValidationError"), (4, "ValidationError")]
    assert all("UTF-8" in f["error"]["message"] for f in summary["failed"])
    assert [m.payload for m in _ready(sqew, q)] == [1, 5]


def test_all_good_exits_0_and_an_unknown_queue_stops_the_run(sqew) -> None:
    q = sqew.name("q")
    sqew.arrange(q).close()
    ok = sqew.json("message", "enqueue", "--queue", q, "--file", "-", stdin="1\n2\n\n3\n")
    assert ok == {"enqueued": 3, "duplicates": 0, "failed": []}
    stopped = sqew.run("--json", "message", "enqueue", "--queue", "nope", "--file", "-",
                       stdin="1\n2\n")
    sqew.assert_failed(stopped, "QueueNotFound")
    assert stopped.json() == {"enqueued": 0, "duplicates": 0, "failed": []}
    assert "stopped at line 1" in stopped.stderr


def test_one_line_is_one_message(sqew) -> None:
    q = sqew.name("q")
    sqew.arrange(q).close()
    result = sqew.ok("message", "enqueue", "--queue", q, "--file", "-", stdin='{"n": 1}\n')
    assert result.stdout == f"enqueued 1 message to {q}\n"


SIGNALS = [pytest.param(signal.SIGINT, 130, id="SIGINT"),
           pytest.param(signal.SIGTERM, 143, id="SIGTERM")]


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_signal_prints_what_was_committed_then_exits_128_plus_it(sqew, sig, status) -> None:
    q = sqew.name("q")
    sqew.arrange(q).close()
    proc = sqew.start("--json", "message", "enqueue", "--queue", q, "--file", "-",
                      stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        # Three batches, and stdin left open: the run commits them, then waits for more.
        proc.stdin.write(b"".join(b'{"i": %d}\n' % i for i in range(1, 1501)))
        proc.stdin.flush()
        _until_enqueued(sqew, q, 1500, proc)
        proc.send_signal(sig)
        assert proc.wait(TIMEOUT_S) == status
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        end(proc)
    assert json.loads(out) == {"enqueued": 1500, "duplicates": 0, "failed": [],
                               "interrupted": True, "last_committed_line": 1500}, err
    assert err == b""


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_signal_mid_stream_reports_exactly_what_was_committed(sqew, sig, status) -> None:
    q = sqew.name("q")
    sqew.arrange(q).close()
    proc = sqew.start("--json", "message", "enqueue", "--queue", q, "--file", "-",
                      stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    feeder = threading.Thread(target=_feed, args=(proc.stdin,), daemon=True)
    feeder.start()  # lines without end: the run can only stop by the signal
    try:
        _until_enqueued(sqew, q, 1000, proc)
        proc.send_signal(sig)
        assert proc.wait(TIMEOUT_S) == status
        out = proc.stdout.read()
    finally:
        end(proc)
        feeder.join(TIMEOUT_S)
    summary = json.loads(out)
    with sqew.arrange() as client:
        committed = client.stats(q).enqueued_total
    # Every line is good and counted from 1: exact means every line up to the one reported was
    # enqueued, and none after it.
    assert summary["interrupted"] is True
    assert summary["last_committed_line"] == summary["enqueued"] == committed >= 1000


def _feed(stdin: IO[bytes]) -> None:
    """Write NDJSON lines to ``stdin`` until its reader is gone."""
    line = 0
    try:
        while True:
            stdin.write(b"".join(b'{"i": %d}\n' % i for i in range(line + 1, line + 101)))
            stdin.flush()
            line += 100
    except (BrokenPipeError, ValueError, OSError):
        pass


def _until_enqueued(sqew, queue: str, count: int, proc: subprocess.Popen[bytes]) -> None:
    """Return once ``count`` messages of ``queue`` were committed (read in-process)."""
    deadline = time.monotonic() + TIMEOUT_S
    with sqew.arrange() as client:
        while client.stats(queue).enqueued_total < count:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)


def _stdin_closed() -> None:
    os.close(0)


def test_stdin_closed_is_a_usage_error(local_sqew) -> None:
    sqew = local_sqew
    sqew.arrange("q").close()
    args = [sqew.binary, "--db", str(sqew.db), "message", "enqueue", "--queue", "q",
            "--file", "-"]
    proc = subprocess.run(args, capture_output=True, cwd=sqew.cwd, env=sqew.env,
                          preexec_fn=_stdin_closed, timeout=TIMEOUT_S, check=False)
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert "standard input" in stderr and "--file" in stderr, stderr
    assert "Traceback" not in stderr and "InternalError" not in stderr, stderr
