"""One queue, two APIs: what REST enqueues SQS receives, and the other way round."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from targets import ServerThread

import sqew

from .conftest import attributes_md5, md5


@pytest.fixture
def rest(server: ServerThread) -> Iterator[sqew.Client]:
    with sqew.Client(server.url) as client:
        yield client


def test_rest_payloads_read_over_sqs_as_their_json_text(rest: sqew.Client, sqs: Any,
                                                          queue: str) -> None:
    name = queue.rsplit("/", 1)[1]
    rest.enqueue(name, {"order": 42, "items": ["a", "b"]}, attributes={"source": "rest"})
    rest.enqueue(name, "a JSON string")
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10,
                              MessageAttributeNames=["All"])["Messages"]
    by_body = {m["Body"]: m for m in got}
    assert len(got) == 2
    obj = next(m for m in got if m["Body"].startswith("{"))
    assert json.loads(obj["Body"]) == {"order": 42, "items": ["a", "b"]}
    assert obj["MD5OfBody"] == md5(obj["Body"].encode())
    # sqew's plain attributes read as String message attributes.
    assert obj["MessageAttributes"] == {"source": {"DataType": "String", "StringValue": "rest"}}
    assert obj["MD5OfMessageAttributes"] == attributes_md5(obj["MessageAttributes"])
    assert '"a JSON string"' in by_body  # its JSON text, quotes and all
    for m in got:  # deleting over SQS acks over REST's store
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])
    assert rest.stats(name).ready == rest.stats(name).leased == 0


def test_sqs_bodies_read_over_rest(rest: sqew.Client, sqs: Any, queue: str) -> None:
    name = queue.rsplit("/", 1)[1]
    sqs.send_message(QueueUrl=queue, MessageBody='{"k": [1, 2]}')
    sqs.send_message(QueueUrl=queue, MessageBody="plain text",
                     MessageAttributes={"n": {"DataType": "Number", "StringValue": "7"}})
    got = rest.poll(name, batch=10)
    payloads = [m.payload for m in sorted(got, key=lambda m: m.id)]
    assert payloads == [{"k": [1, 2]}, "plain text"]
    for m in got:
        rest.ack(name, m.id, m.token)


def test_a_message_keeps_its_sqs_parts_through_the_dead_letter_queue(
        rest: sqew.Client, sqs: Any, queue: str) -> None:
    name = queue.rsplit("/", 1)[1]
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedrivePolicy": '{"maxReceiveCount": 1}'})
    attrs = {"b": {"DataType": "Binary", "BinaryValue": b"\x01\x02"}}
    sqs.send_message(QueueUrl=queue, MessageBody="text body", MessageAttributes=attrs)
    (m,) = rest.poll(name)
    rest.nack(name, m.id, m.token)  # its one delivery spent: to the DLQ
    assert rest.dlq_requeue(name).requeued == 1  # and back, over REST
    (again,) = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"])["Messages"]
    assert again["Body"] == "text body"
    assert again["MessageAttributes"] == attrs


def test_a_queue_with_an_hmac_secret_takes_no_unsigned_sqs_send(
        rest: sqew.Client, sqs: Any) -> None:
    rest.create_queue("signed", hmac_secret="s" * 32)
    try:
        url = sqs.get_queue_url(QueueName="signed")["QueueUrl"]
        for call in (lambda: sqs.send_message(QueueUrl=url, MessageBody="forged"),
                     lambda: sqs.send_message(QueueUrl=url + ".dlq", MessageBody="forged"),
                     lambda: sqs.send_message_batch(QueueUrl=url, Entries=[
                         {"Id": "a", "MessageBody": "forged"}])):
            with pytest.raises(sqs.exceptions.ClientError) as err:
                call()
            assert err.value.response["Error"]["Code"] == "AccessDenied"
        assert rest.stats("signed").ready == rest.stats("signed").dlq == 0
    finally:
        rest.delete_queue("signed")


def test_a_rest_message_with_anything_in_the_reserved_attribute_still_reads(
        rest: sqew.Client, sqs: Any, queue: str) -> None:
    name = queue.rsplit("/", 1)[1]
    for junk in ("not json", "[1, 2]", '{"text": true, "attrs": {"a": 5}, "sys": []}'):
        rest.enqueue(name, {"n": 1}, attributes={"sqew.sqs": junk})
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10,
                              MessageAttributeNames=["All"])["Messages"]
    assert [json.loads(m["Body"]) for m in got] == [{"n": 1}] * 3
    assert all("MessageAttributes" not in m for m in got)
