"""A payload is data: every command that shows one as data (``--json`` of poll, get, peek,
``message peek``, ``dlq list``; ``queue export``) and ``Client.scan`` print the exact text the
producer sent, as the REST API answers it — never re-encoded (``2.50`` stays ``2.50``)."""

from __future__ import annotations

import json

import httpx

import sqew as sqew_lib
from sqew import payloads

SENT = '{"a": 2.50,  "b" : [1 ,2], "c": "\\u00e9"}'


def test_every_command_prints_the_payload_as_sent(sqew) -> None:
    q, dead = sqew.name("q"), sqew.name("dead")
    with sqew.arrange(q) as client:
        client.create_queue(dead, max_attempts=1)
        kept = sqew.json("message", "enqueue", "--queue", q, "--payload", SENT)["message_id"]
        sqew.json("message", "enqueue", "--queue", dead, "--payload", SENT)
        (failed,) = client.poll(dead)
        client.nack(dead, failed.id, failed.token)
        assert payloads.text_of(client.peek(q)[0]) == SENT
        assert payloads.text_of(client.get_message(q, kept)) == SENT
        assert payloads.text_of(client.dlq_list(dead)[0]) == SENT
        assert [payloads.text_of(m) for m in client.export(q)] == [SENT]

        def payload_of(out: str) -> str:
            """The payload's text in a JSON answer, as printed."""
            start = out.index('"payload":') + len('"payload":')
            return out[start:start + len(SENT)]

        for args in (["queue", "peek", "--name", q], ["message", "peek", "--queue", q, "--id",
                     str(kept)], ["dlq", "list", "--queue", dead],
                     ["message", "get", "--queue", q]):
            out = sqew.ok("--json", *args).stdout
            assert payload_of(out) == SENT, (args, out)
            json.loads(out)  # still one JSON document
        exported = sqew.run("queue", "export", "--name", q, "--source", "queue")
        assert exported.returncode == 0, str(exported)
        assert payload_of(exported.stdout) == SENT


def test_the_server_answers_the_same_text(http_sqew) -> None:
    q = http_sqew.name("q")
    with http_sqew.arrange(q):
        http_sqew.ok("message", "enqueue", "--queue", q, "--payload", SENT)
        rest = httpx.get(f"{http_sqew.url}/queues/{q}/peek").text
        cli = http_sqew.ok("--json", "queue", "peek", "--name", q).stdout.strip()
        assert cli == rest
        assert SENT in rest


def test_a_client_message_made_by_hand_shows_its_value(tmp_path) -> None:
    with sqew_lib.Client(str(tmp_path / "h.db")) as client:
        client.create_queue("q")
        client.enqueue("q", {"x": 1})
        (m,) = client.peek("q")
    assert payloads.text_of(m) == '{"x":1}'  # sent compact by the Python client


def test_an_envelope_keeps_every_field_it_gives(sqew) -> None:
    # traceparent and tracestate are fields of the API's message: an envelope given with
    # --payload stores them as REST and the --file envelopes do.
    q = sqew.name("q")
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with sqew.arrange(q):
        envelope = json.dumps({"payload": 0, "priority": 3, "traceparent": traceparent,
                               "tracestate": "vendor=1", "idempotency_key": "k-1"})
        envelope = envelope.replace('"payload": 0', f'"payload": {SENT}')
        first = sqew.json("message", "enqueue", "--queue", q, "--envelope", "--payload", envelope)
        again = sqew.json("message", "enqueue", "--queue", q, "--envelope", "--payload", envelope)
        assert (again["message_id"], again["duplicate"]) == (first["message_id"], True)
        out = sqew.ok("--json", "queue", "peek", "--name", q).stdout
        (m,) = json.loads(out)["messages"]
        assert (m["priority"], m["traceparent"], m["tracestate"]) == (3, traceparent, "vendor=1")
        assert f'"payload":{SENT}' in out
