"""``sqew relay`` in a process of its own, delivering to a real receiver on 127.0.0.1:
SIGTERM mid-batch lets the requests under way end, acks them and exits 0 with a summary; a
signed queue's deliveries verify with the secret given by ``--hmac-secret``; bad arguments
are one-line errors."""

from __future__ import annotations

import json
import signal

from cli_support import Sqew
from process_support import TIMEOUT_S, Lines, end
from relay_support import Answer, Receiver, until

from sqew.relay import verify_delivery

SECRET = "cli-s3cret-cli-s3cret-cli-s3cret"


def test_sigterm_mid_batch_delivers_what_it_started_and_exits_0(sqew: Sqew) -> None:
    q = sqew.name("hooks")
    with sqew.arrange(q) as client:
        ids = [r.message_id for r in client.enqueue_batch(
            q, [{"payload": {"n": n}} for n in range(5)])]
    with Receiver(lambda payload, attempts: Answer(hold=True)) as receiver:
        proc = sqew.start("relay", "--queue", q, "--to", receiver.url, "--concurrency", "3")
        try:
            assert proc.stderr is not None and proc.stdout is not None
            err = Lines(proc.stderr)
            until(lambda: receiver.held() == 3, "three requests under way")
            proc.send_signal(signal.SIGTERM)
            assert err.until(lambda lines: any("SIGTERM: stopping" in line for line in lines),
                             TIMEOUT_S)
            receiver.release()
            proc.wait(TIMEOUT_S)
            out = proc.stdout.read()
            assert err.finish()
        finally:
            end(proc)
    assert proc.returncode == 0
    assert out.decode().strip() == ("3 delivered, 0 failed, 0 rejected, 0 lost, "
                                    "0 connection retries")
    lines: list[str] = []
    err.until(lambda got: lines.extend(got) is None, TIMEOUT_S)  # (every line: it ended)
    logs = [json.loads(line)["message"] for line in lines]  # JSON logs: not a terminal
    assert any(m.startswith(f"relaying {q} to {receiver.url}") for m in logs), logs
    delivered = sorted(d.message_id for d in receiver.deliveries)
    assert len(delivered) == 3 and set(delivered) < set(ids) and receiver.overlaps == []
    with sqew.arrange() as client:
        stats = client.stats(q)
        assert (stats.acked_total, stats.leased, stats.ready) == (3, 0, 2)
        assert [m.attempts for m in client.peek(q)] == [0, 0]  # never leased


def test_hmac_secret_signs_the_deliveries(local_sqew: Sqew) -> None:
    with local_sqew.arrange("signed", hmac_secret=SECRET) as client:
        client.enqueue("signed", {"order": 1})
    with Receiver() as receiver:
        proc = local_sqew.start("--hmac-secret", SECRET, "relay", "--queue", "signed",
                                "--to", receiver.url)
        try:
            until(lambda: len(receiver.deliveries) == 1, "the delivery")
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=TIMEOUT_S)
        finally:
            end(proc)
    assert proc.returncode == 0 and out.decode().startswith("1 delivered, ")
    (d,) = receiver.deliveries
    assert verify_delivery(dict(d.headers), d.body, SECRET)
    assert SECRET not in out.decode()


def test_bad_arguments_are_one_line_errors(local_sqew: Sqew) -> None:
    with local_sqew.arrange("q"):
        pass
    results = local_sqew.many([
        ("relay", "--queue", "q", "--to", "ftp://example.com/"),
        ("relay", "--queue", "q", "--to", "http://127.0.0.1:1/", "--timeout", "0"),
        ("relay", "--queue", "q", "--to", "http://127.0.0.1:1/", "--concurrency", "0"),
        ("relay", "--queue", "nope", "--to", "http://127.0.0.1:1/"),
    ])
    for result in results[:3]:
        local_sqew.assert_usage_error(result)
        assert result.stderr.count("\n") == 1, result.stderr
    assert "http:// or https://" in results[0].stderr
    local_sqew.assert_failed(results[-1], "QueueNotFound")
