"""``queue export``: NDJSON envelopes that ``message enqueue --file F --envelope`` reads back, so
export → import round-trips; on a database file and over a server (the ``sqew`` fixture)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from typing import Any

import msgspec
import pytest
from cli_runs import foreground
from cli_support import sqew_binary

import sqew as sqew_lib

PAYLOADS: list[Any] = [{"order": 1, "items": [1, 2.5, "x"]}, [1, 2, 3], "text", 42, None, True]


def _scan(client: sqew_lib.Client, queue: str, source: str = "queue") -> list[Any]:
    return list(client.export(queue, source=source))


def _fill(client: sqew_lib.Client, queue: str) -> None:
    for i, payload in enumerate(PAYLOADS):
        client.enqueue(queue, payload, priority=i - 2, attributes={"i": str(i)} if i % 2 else None,
                       idempotency_key=f"key-{i}" if i < 3 else None)
    client.enqueue(queue, {"later": True}, delay_ms=600_000, idempotency_key="later")
    client.enqueue(queue, "short", ttl_ms=120_000)


def _same_messages(src: list[Any], dst: list[Any]) -> None:
    def key(m: Any) -> tuple[Any, ...]:
        return (json.dumps(m.payload), m.priority, m.attributes, m.idempotency_key, m.state)

    assert [key(m) for m in dst] == [key(m) for m in src]


def test_export_to_a_file_and_import_round_trips(sqew, tmp_path) -> None:
    src, dst = sqew.name("src"), sqew.name("dst")
    out = tmp_path / "export.ndjson"
    with sqew.arrange(src, dst) as client:
        _fill(client, src)
        result = sqew.run("queue", "export", "--name", src, "--out", str(out))
        assert result.returncode == 0 and result.stdout == "", str(result)
        assert result.stderr.strip() == f"exported 8 messages from {src}"
        lines = out.read_bytes().splitlines()
        assert [json.loads(line)["payload"] for line in lines] == [
            *PAYLOADS, {"later": True}, "short"]
        sqew.ok("message", "enqueue", "--queue", dst, "--file", str(out), "--envelope")
        before, after = _scan(client, src), _scan(client, dst)
        _same_messages(before, after)
        assert {m.state for m in after} == {"ready", "delayed"}
        for old, new in zip(before, after, strict=True):
            # the time left at the export carries over (ttl_ms, delay_ms): never more than the
            # original's, so the short TTL and the delay are not replaced by defaults
            assert new.expires_at - new.enqueued_at <= old.expires_at - old.enqueued_at
            assert new.available_at - new.enqueued_at <= old.available_at - old.enqueued_at
        short = after[-1]
        assert short.payload == "short"
        assert short.expires_at - short.enqueued_at <= 120_000
        # nothing was leased or changed by the export
        assert client.stats(src).ready == 7 and client.stats(src).leased == 0


def test_export_to_stdout_pipes_into_enqueue(sqew) -> None:
    src, dst = sqew.name("src"), sqew.name("dst")
    with sqew.arrange(src, dst) as client:
        _fill(client, src)
        leased = client.poll(src)[0]  # a leased message is exported too
        result = sqew.run("--json", "queue", "export", "--name", src)
        assert result.returncode == 0, str(result)
        # stdout holds the messages only; the --json summary goes to stderr then
        assert json.loads(result.stderr) == {"exported": 8}
        assert [json.loads(line)["payload"] for line in result.stdout.splitlines()] == [
            *PAYLOADS, {"later": True}, "short"]
        summary = sqew.json("message", "enqueue", "--queue", dst, "--file", "-", "--envelope",
                            stdin=result.stdout)
        assert summary == {"enqueued": 8, "duplicates": 0, "failed": []}
        before = _scan(client, src)
        assert [m.state for m in before].count("leased") == 1
        after = _scan(client, dst)
        assert [m.payload for m in after] == [m.payload for m in before]
        assert leased.id in {m.id for m in before}


def test_json_summary_on_stdout_with_a_file(sqew, tmp_path) -> None:
    q = sqew.name("q")
    with sqew.arrange(q) as client:
        client.enqueue(q, 1)
    assert sqew.json("queue", "export", "--name", q, "--out", str(tmp_path / "o")) == {
        "exported": 1}


def test_replay_a_dlq_and_an_archive(sqew, tmp_path) -> None:
    q, replay = sqew.name("q"), sqew.name("replay")
    with sqew.arrange(q, max_attempts=1, archive=True) as client:
        client.create_queue(replay)
        client.enqueue_batch(q, [{"payload": {"n": i}, "priority": i,
                                  "attributes": {"n": str(i)}, "idempotency_key": f"k{i}"}
                                 for i in range(4)])
        for m in client.poll(q, batch=4):
            if m.payload["n"] % 2:
                client.nack(q, m.id, m.token, error="failed")  # dead-lettered
            else:
                client.ack(q, m.id, m.token)  # archived
        for source, expected in (("dlq", [1, 3]), ("archive", [0, 2])):
            out = tmp_path / f"{source}.ndjson"
            result = sqew.run("queue", "export", "--name", q, "--source", source,
                              "--out", str(out))
            assert result.returncode == 0, str(result)
            assert result.stderr.startswith("exported 2 messages from ")
            envelopes = [json.loads(line) for line in out.read_text().splitlines()]
            exported = {m.payload["n"]: m for m in _scan(client, q, source)}
            assert envelopes == [
                {"payload": {"n": n}, "priority": n, "attributes": {"n": str(n)},
                 "idempotency_key":
                     f"sqew-replay:{exported[n].id}:{exported[n].enqueued_at}",
                 **({"ttl_ms": e["ttl_ms"]} if source == "dlq" else {})}
                for n, e in zip(expected, envelopes, strict=True)]
            client.purge(replay)
            sqew.ok("message", "enqueue", "--queue", replay, "--file", str(out), "--envelope")
            assert [m.payload for m in _scan(client, replay)] == [{"n": n} for n in expected]


def test_errors(sqew, tmp_path) -> None:
    out = tmp_path / "never.ndjson"
    sqew.arrange().close()
    sqew.fails("queue", "export", "--name", sqew.name("nope"), "--out", str(out),
               code="QueueNotFound")
    assert not out.exists()
    q = sqew.name("q")
    sqew.arrange(q).close()
    sqew.usage_error("queue", "export", "--name", q, "--source", "messages")
    sqew.fails("queue", "export", "--name", f"{q}.dlq", "--source", "dlq", code="ValidationError")


def test_an_empty_export(sqew) -> None:
    q = sqew.name("q")
    sqew.arrange(q).close()
    result = sqew.run("queue", "export", "--name", q)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr.strip() == f"exported 0 messages from {q}"
    assert msgspec.json.decode(
        sqew.run("--json", "queue", "export", "--name", q, "--source", "archive").stderr
    ) == {"exported": 0}


def test_replaying_a_dlq_of_keyed_messages_into_its_queue_delivers_them_once(
    sqew, tmp_path
) -> None:
    """The documented recipe: export the DLQ, enqueue the file back into the queue. The
    messages' own keys are still in the queue's dedup window; the replay delivers them anyway,
    and running it twice delivers them once."""
    q = sqew.name("q")
    out = tmp_path / "failed.ndjson"
    with sqew.arrange(q, max_attempts=1) as client:
        sent = [client.enqueue(q, {"order": n}, idempotency_key=f"order-{n}").message_id
                for n in range(3)]
        for m in client.poll(q, batch=3):
            client.nack(q, m.id, m.token, error="failed")
        assert client.stats(q).dlq == 3
        assert sqew.run("queue", "export", "--name", q, "--source", "dlq",
                        "--out", str(out)).returncode == 0
        first = sqew.json("message", "enqueue", "--queue", q, "--file", str(out), "--envelope")
        assert first == {"enqueued": 3, "duplicates": 0, "failed": []}
        again = sqew.json("message", "enqueue", "--queue", q, "--file", str(out), "--envelope")
        assert again == {"enqueued": 0, "duplicates": 3, "failed": []}
        sqew.ok("dlq", "purge", "--queue", q)
        replayed = client.poll(q, batch=10)
        assert sorted(m.payload["order"] for m in replayed) == [0, 1, 2]
        assert not {m.id for m in replayed} & set(sent)
        # the producers' own keys still deduplicate their retries
        assert client.enqueue(q, {"order": 0}, idempotency_key="order-0").duplicate


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_export_leaves_no_file_and_says_how_far_it_got(
    tmp_path, signum: int, status: int
) -> None:
    db, out = tmp_path / "big.db", tmp_path / "out.ndjson"
    out.write_text("the previous export\n")
    with sqew_lib.Client(str(db)) as client:
        client.create_queue("q")
        for _ in range(120):  # an export of seconds: the signal comes long before its end
            client.enqueue_batch("q", [{"payload": {"n": i}} for i in range(1000)])
    proc = subprocess.Popen(
        [sqew_binary(), "--db", str(db), "queue", "export", "--name", "q", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=foreground)  # SIGINT not ignored, as from a terminal (a worker ignores it)
    try:
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size for p in tmp_path.glob(".out.ndjson.*.partial")):
            assert proc.poll() is None, "the export ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == status
    (line,) = err.splitlines()
    assert re.fullmatch(rf"export stopped after \d+ messages: '{re.escape(str(out))}' was not "
                        r"written \(run the export again\)", line), line
    assert out.read_text() == "the previous export\n"
    assert not list(tmp_path.glob("*.partial"))
