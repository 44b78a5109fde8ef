"""``sqew message tail`` in a process of its own, on a file, a server and PostgreSQL: a line
per message as it comes; ``--ack`` acks each; without it what was shown is given back when
it exits (attempts not counted); Ctrl-C and SIGTERM end it quietly (130, 143)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable

from cli_support import Sqew
from process_support import TIMEOUT_S, Lines, end


def _follow(proc: subprocess.Popen[bytes], count: int) -> list[str]:
    """The first ``count`` lines of ``proc``'s stdout, waited for."""
    assert proc.stdout is not None
    out = Lines(proc.stdout)
    assert out.until(lambda lines: len(lines) >= count, TIMEOUT_S), out.text()
    return [line.rstrip("\n") for line in out.text().splitlines()[:count]]


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _stop(proc: subprocess.Popen[bytes], signum: int) -> tuple[int, bytes]:
    proc.send_signal(signum)
    proc.wait(TIMEOUT_S)
    assert proc.stderr is not None
    return proc.returncode, proc.stderr.read()


def test_tail_ack_prints_and_acks_each_message_and_ctrl_c_exits_130(sqew: Sqew) -> None:
    q = sqew.name("q")
    with sqew.arrange(q) as client:
        ids = [client.enqueue(q, {"n": n}).message_id for n in range(3)]
        proc = sqew.start("message", "tail", "--queue", q, "--ack")
        try:
            lines = _follow(proc, 3)
            _until(lambda: client.stats(q).acked_total == 3, "the third ack")  # (after its line)
            status, err = _stop(proc, signal.SIGINT)
        finally:
            end(proc)
        assert [line.split()[0].split(":")[0] for line in lines] == [str(i) for i in ids]
        assert [line.split("  ", 2)[1:] for line in lines] == [
            ["attempt 1", f'{{"n":{n}}}'] for n in range(3)]
        assert (status, err) == (130, b"")
        stats = client.stats(q)
        assert (stats.acked_total, stats.ready, stats.leased) == (3, 0, 0)


def test_tail_without_ack_gives_back_what_it_showed_on_sigterm(sqew: Sqew) -> None:
    q = sqew.name("q")
    with sqew.arrange(q) as client:
        ids = [client.enqueue(q, n).message_id for n in range(2)]
        proc = sqew.start("--json", "message", "tail", "--queue", q)
        try:
            shown = [json.loads(line) for line in _follow(proc, 2)]
            assert client.poll(q, wait_ms=0) == []  # held while tail shows them
            status, err = _stop(proc, signal.SIGTERM)
        finally:
            end(proc)
        assert [(m["id"], m["payload"], m["attempts"]) for m in shown] == [
            (ids[0], 0, 1), (ids[1], 1, 1)]
        assert shown[0]["token"]
        assert (status, err) == (143, b"")
        back = client.poll(q, batch=10, wait_ms=10_000)  # given back when tail exited
        assert [(m.id, m.attempts) for m in back] == [(ids[0], 1), (ids[1], 1)]
        assert client.stats(q).acked_total == 0


def test_tail_of_a_missing_queue_is_one_error_line(sqew: Sqew) -> None:
    sqew.arrange(sqew.name("other")).close()  # the store exists; the queue does not
    sqew.fails("message", "tail", "--queue", sqew.name("nope"), code="QueueNotFound")
