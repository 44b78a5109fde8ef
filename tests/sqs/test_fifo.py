"""FIFO queues: names and attributes, what a send must give, deduplication, sequence numbers,
and message groups delivered in order, one message of a group in flight at a time (also
under concurrent consumers), on both backends."""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from targets import ServerThread

from .conftest import client_for

_names = itertools.count()


@pytest.fixture
def fifo(sqs: Any) -> Iterator[str]:
    """The URL of a fresh FIFO queue (explicit deduplication ids), deleted after."""
    url: str = sqs.create_queue(QueueName=f"f{next(_names)}.fifo",
                                Attributes={"FifoQueue": "true"})["QueueUrl"]
    yield url
    sqs.delete_queue(QueueUrl=url)


def code(caught: pytest.ExceptionInfo[Any]) -> str:
    """The error code of a ClientError."""
    return str(caught.value.response["Error"]["Code"])


def receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    """The messages of one receive (no wait, up to 10, every system attribute)."""
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                              MessageSystemAttributeNames=["All"], **kwargs)
    return list(got.get("Messages", []))


def test_a_fifo_queue_has_its_attributes(sqs: Any) -> None:
    name = f"attrs{next(_names)}.fifo"
    url = sqs.create_queue(QueueName=name, Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    try:
        got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert {k: got[k] for k in ("FifoQueue", "ContentBasedDeduplication",
                                    "DeduplicationScope", "FifoThroughputLimit")} == {
            "FifoQueue": "true", "ContentBasedDeduplication": "true",
            "DeduplicationScope": "queue", "FifoThroughputLimit": "perQueue"}
        sqs.set_queue_attributes(QueueUrl=url, Attributes={
            "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
        got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "DeduplicationScope", "FifoThroughputLimit"])["Attributes"]
        assert got == {"DeduplicationScope": "messageGroup",
                       "FifoThroughputLimit": "perMessageGroupId"}
        # The same CreateQueue again answers the URL; a different one is refused.
        assert sqs.create_queue(QueueName=name, Attributes={
            "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"] == url
        with pytest.raises(sqs.exceptions.QueueNameExists):
            sqs.create_queue(QueueName=name, Attributes={
                "FifoQueue": "true", "ContentBasedDeduplication": "false"})
        # Its dead-letter queue is FIFO too (AWS requires a FIFO queue's DLQ to be FIFO).
        dlq = sqs.get_queue_url(QueueName=name + ".dlq")["QueueUrl"]
        assert sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["FifoQueue"])[
            "Attributes"] == {"FifoQueue": "true"}
        assert json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "RedrivePolicy"])["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"].endswith(
            name + ".dlq")
    finally:
        sqs.delete_queue(QueueUrl=url)


@pytest.mark.parametrize(("name", "attributes", "error"), [
    ("plain", {"FifoQueue": "true"}, "InvalidParameterValue"),
    ("named.fifo", {}, "InvalidParameterValue"),
    ("named.fifo", {"FifoQueue": "false"}, "InvalidParameterValue"),
    ("named.fifo", {"FifoQueue": "maybe"}, "InvalidAttributeValue"),
    ("a" * 76 + ".fifo", {"FifoQueue": "true"}, "InvalidParameterValue"),
    ("bad!.fifo", {"FifoQueue": "true"}, "InvalidParameterValue"),
    ("named.fifo", {"FifoQueue": "true", "ContentBasedDeduplication": "yes"},
     "InvalidAttributeValue"),
    ("named.fifo", {"FifoQueue": "true", "DeduplicationScope": "group"},
     "InvalidAttributeValue"),
    ("named.fifo", {"FifoQueue": "true", "FifoThroughputLimit": "perMessageGroupId"},
     "InvalidAttributeValue"),  # (only with DeduplicationScope messageGroup)
    ("plain", {"ContentBasedDeduplication": "true"}, "InvalidAttributeName"),
    ("plain", {"DeduplicationScope": "queue"}, "InvalidAttributeName"),
])
def test_create_queue_refusals(sqs: Any, name: str, attributes: dict[str, str],
                               error: str) -> None:
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.create_queue(QueueName=name, Attributes=attributes)
    assert code(caught) == error
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=name[:10])


def test_set_queue_attributes_refusals(sqs: Any, fifo: str) -> None:
    for attributes, error in [
        ({"FifoQueue": "false"}, "InvalidAttributeName"),
        ({"FifoQueue": "true"}, "InvalidAttributeName"),
        ({"FifoThroughputLimit": "perMessageGroupId"}, "InvalidAttributeValue"),
        ({"ContentBasedDeduplication": "TRUE"}, "InvalidAttributeValue"),
    ]:
        with pytest.raises(sqs.exceptions.ClientError) as caught:
            sqs.set_queue_attributes(QueueUrl=fifo, Attributes=attributes)
        assert code(caught) == error, attributes


def test_what_a_send_must_give(sqs: Any, fifo: str, queue: str) -> None:
    for params, error in [
        ({"MessageDeduplicationId": "d"}, "MissingParameter"),  # no MessageGroupId
        ({"MessageGroupId": "g"}, "InvalidParameterValue"),  # no deduplication id
        ({"MessageGroupId": "g", "MessageDeduplicationId": "d", "DelaySeconds": 1},
         "InvalidParameterValue"),
        ({"MessageGroupId": "g" * 129, "MessageDeduplicationId": "d"}, "InvalidParameterValue"),
        ({"MessageGroupId": "g", "MessageDeduplicationId": "sp ace"}, "InvalidParameterValue"),
    ]:
        with pytest.raises(sqs.exceptions.ClientError) as caught:
            sqs.send_message(QueueUrl=fifo, MessageBody="b", **params)
        assert code(caught) == error, params
    with pytest.raises(sqs.exceptions.ClientError) as caught:  # a standard queue
        sqs.send_message(QueueUrl=queue, MessageBody="b", MessageDeduplicationId="d")
    assert code(caught) == "InvalidParameterValue"
    got = sqs.send_message_batch(QueueUrl=fifo, Entries=[
        {"Id": "ok", "MessageBody": "b", "MessageGroupId": "g", "MessageDeduplicationId": "1"},
        {"Id": "nogroup", "MessageBody": "b", "MessageDeduplicationId": "2"},
        {"Id": "delay", "MessageBody": "b", "MessageGroupId": "g",
         "MessageDeduplicationId": "3", "DelaySeconds": 2},
    ])
    assert [e["Id"] for e in got["Successful"]] == ["ok"]
    assert {e["Id"]: e["Code"] for e in got["Failed"]} == {
        "nogroup": "MissingParameter", "delay": "InvalidParameterValue"}
    assert sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=[
        "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"] == "1"


def test_deduplication_answers_the_first_and_enqueues_nothing(sqs: Any, fifo: str) -> None:
    first = sqs.send_message(QueueUrl=fifo, MessageBody="one", MessageGroupId="g",
                             MessageDeduplicationId="d1")
    again = sqs.send_message(QueueUrl=fifo, MessageBody="other", MessageGroupId="h",
                             MessageDeduplicationId="d1")
    assert (again["MessageId"], again["SequenceNumber"]) == (
        first["MessageId"], first["SequenceNumber"])
    batch = sqs.send_message_batch(QueueUrl=fifo, Entries=[
        {"Id": "a", "MessageBody": "two", "MessageGroupId": "g", "MessageDeduplicationId": "d2"},
        {"Id": "b", "MessageBody": "two", "MessageGroupId": "g", "MessageDeduplicationId": "d2"},
        {"Id": "c", "MessageBody": "one", "MessageGroupId": "g", "MessageDeduplicationId": "d1"},
    ])["Successful"]
    ids = {e["Id"]: (e["MessageId"], e["SequenceNumber"]) for e in batch}
    assert ids["a"] == ids["b"] and ids["c"] == (first["MessageId"], first["SequenceNumber"])
    assert int(ids["a"][1]) > int(first["SequenceNumber"])
    assert len(first["SequenceNumber"]) == 20
    # Only "one" and "two" are there, in order (one group: one at a time).
    (m,) = receive(sqs, fifo)
    assert (m["Body"], m["Attributes"]["MessageDeduplicationId"],
            m["Attributes"]["MessageGroupId"], m["Attributes"]["SequenceNumber"]) == (
        "one", "d1", "g", first["SequenceNumber"])
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=m["ReceiptHandle"])
    (m,) = receive(sqs, fifo)
    assert m["Body"] == "two"
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=m["ReceiptHandle"])
    assert receive(sqs, fifo) == []
    # Still within 5 minutes: deleted, the id still deduplicates.
    assert sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g",
                            MessageDeduplicationId="d1")["MessageId"] == first["MessageId"]
    assert receive(sqs, fifo) == []


def test_content_based_deduplication_and_group_scope(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=f"cbd{next(_names)}.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true",
        "DeduplicationScope": "messageGroup"})["QueueUrl"]
    try:
        a = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g1")
        b = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g1")
        c = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g2")
        d = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g1",
                             MessageDeduplicationId="own")  # (overrides the body's hash)
        assert a["MessageId"] == b["MessageId"]
        assert len({a["MessageId"], c["MessageId"], d["MessageId"]}) == 3
        got = {m["Attributes"]["MessageGroupId"]: m for m in receive(sqs, url)}
        assert got["g1"]["Attributes"]["MessageDeduplicationId"] == hashlib.sha256(
            b"same").hexdigest()
        assert set(got) == {"g1", "g2"}
    finally:
        sqs.delete_queue(QueueUrl=url)


def test_a_group_is_delivered_in_order_one_at_a_time(sqs: Any, fifo: str) -> None:
    for group, n in (("a", 3), ("b", 2)):
        for i in range(n):
            sqs.send_message(QueueUrl=fifo, MessageBody=f"{group}{i}", MessageGroupId=group,
                             MessageDeduplicationId=f"{group}{i}")
    heads = {m["Body"]: m for m in receive(sqs, fifo)}
    assert set(heads) == {"a0", "b0"}
    assert receive(sqs, fifo) == []  # both groups are in flight
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=heads["a0"]["ReceiptHandle"])
    (a1,) = receive(sqs, fifo)
    assert a1["Body"] == "a1"
    # A head made visible again is delivered again before the rest of its group.
    sqs.change_message_visibility(QueueUrl=fifo, ReceiptHandle=heads["b0"]["ReceiptHandle"],
                                  VisibilityTimeout=0)
    (b0,) = receive(sqs, fifo)
    assert (b0["Body"], b0["Attributes"]["ApproximateReceiveCount"]) == ("b0", "2")
    for m in (a1, b0):
        sqs.delete_message(QueueUrl=fifo, ReceiptHandle=m["ReceiptHandle"])
    assert sorted(m["Body"] for m in receive(sqs, fifo)) == ["a2", "b1"]


def test_a_dead_lettered_head_unblocks_its_group(sqs: Any) -> None:
    name = f"dl{next(_names)}.fifo"
    url = sqs.create_queue(QueueName=name, Attributes={
        "FifoQueue": "true", "RedrivePolicy": json.dumps({"maxReceiveCount": 1})})["QueueUrl"]
    try:
        for i in range(2):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g",
                             MessageDeduplicationId=f"m{i}")
        (m0,) = receive(sqs, url)
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m0["ReceiptHandle"],
                                      VisibilityTimeout=0)
        (m1,) = receive(sqs, url)  # m0 had its one receive: it went to the DLQ
        assert m1["Body"] == "m1"
        dlq = sqs.get_queue_url(QueueName=name + ".dlq")["QueueUrl"]
        (dead,) = receive(sqs, dlq)
        assert (dead["Body"], dead["Attributes"]["MessageGroupId"]) == ("m0", "g")
        assert "SequenceNumber" in dead["Attributes"]
        with pytest.raises(sqs.exceptions.ClientError) as caught:  # a FIFO queue's rules
            sqs.send_message(QueueUrl=dlq, MessageBody="x", MessageDeduplicationId="x")
        assert code(caught) == "MissingParameter"
    finally:
        sqs.delete_queue(QueueUrl=url)


def test_a_named_dead_letter_target_is_of_the_source_s_type(sqs: Any) -> None:
    n = next(_names)
    source = sqs.create_queue(QueueName=f"src{n}.fifo",
                              Attributes={"FifoQueue": "true"})["QueueUrl"]
    ordered = sqs.create_queue(QueueName=f"dead{n}.fifo",
                               Attributes={"FifoQueue": "true"})["QueueUrl"]
    standard = sqs.create_queue(QueueName=f"plain{n}")["QueueUrl"]
    try:
        arn = sqs.get_queue_attributes(QueueUrl=standard, AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]
        for queue, target in ((source, arn), (standard, arn.replace(f"plain{n}", f"dead{n}.fifo"))):
            with pytest.raises(sqs.exceptions.ClientError) as caught:
                sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedrivePolicy": json.dumps(
                    {"maxReceiveCount": 1, "deadLetterTargetArn": target})})
            assert code(caught) == "InvalidParameterValue"
            assert "same type of queue" in caught.value.response["Error"]["Message"]
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": json.dumps(
            {"maxReceiveCount": 1, "deadLetterTargetArn": arn.replace(f"plain{n}",
                                                                      f"dead{n}.fifo")})})
        sqs.send_message(QueueUrl=source, MessageBody="m0", MessageGroupId="g",
                         MessageDeduplicationId="m0")
        (m0,) = receive(sqs, source)
        sqs.change_message_visibility(QueueUrl=source, ReceiptHandle=m0["ReceiptHandle"],
                                      VisibilityTimeout=0)
        assert receive(sqs, source) == []  # its one receive spent: moved to the target
        (dead,) = receive(sqs, ordered)
        assert (dead["Body"], dead["Attributes"]["MessageGroupId"]) == ("m0", "g")
    finally:
        for url in (source, ordered, standard):
            sqs.delete_queue(QueueUrl=url)


GROUPS, PER_GROUP, CONSUMERS = 6, 8, 4


def test_concurrent_consumers_never_hold_two_of_a_group(server: ServerThread, sqs: Any,
                                                        fifo: str) -> None:
    total = GROUPS * PER_GROUP
    for start in range(0, total, 10):  # message n: group n // PER_GROUP, its n % PER_GROUP-th
        sqs.send_message_batch(QueueUrl=fifo, Entries=[
            {"Id": f"e{n}", "MessageBody": json.dumps([n // PER_GROUP, n % PER_GROUP]),
             "MessageGroupId": f"g{n // PER_GROUP}", "MessageDeduplicationId": f"n{n}"}
            for n in range(start, min(start + 10, total))])
    lock = threading.Lock()
    in_flight: set[int] = set()
    seen: dict[int, list[int]] = {g: [] for g in range(GROUPS)}
    broken: list[str] = []
    done = threading.Event()

    def consume() -> None:
        client = client_for(server.url)
        try:
            deadline = time.monotonic() + 60
            while not done.is_set() and time.monotonic() < deadline:
                got = client.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10,
                                             VisibilityTimeout=60).get("Messages", [])
                with lock:
                    for m in got:
                        g, i = json.loads(m["Body"])
                        if g in in_flight:
                            broken.append(f"group {g} delivered twice at once")
                        in_flight.add(g)
                        seen[g].append(i)
                for m in got:
                    with lock:  # (out of flight before the delete lets the next one go)
                        in_flight.discard(json.loads(m["Body"])[0])
                    client.delete_message(QueueUrl=fifo, ReceiptHandle=m["ReceiptHandle"])
                with lock:
                    if sum(len(v) for v in seen.values()) >= total:
                        done.set()
        finally:
            client.close()

    threads = [threading.Thread(target=consume) for _ in range(CONSUMERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not broken
    assert seen == {g: list(range(PER_GROUP)) for g in range(GROUPS)}


def test_fifo_over_the_query_protocol(server: ServerThread) -> None:
    from .test_query import query_client_for

    qsqs = query_client_for(server.url)
    url = qsqs.create_queue(QueueName=f"query{next(_names)}.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    try:
        sent = qsqs.send_message(QueueUrl=url, MessageBody="q", MessageGroupId="g")
        batch = qsqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "a", "MessageBody": "q", "MessageGroupId": "g"}])["Successful"]
        assert batch[0]["SequenceNumber"] == sent["SequenceNumber"]
        (m,) = qsqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
        assert (m["Attributes"]["MessageGroupId"], m["Attributes"]["SequenceNumber"]) == (
            "g", sent["SequenceNumber"])
        with pytest.raises(qsqs.exceptions.ClientError) as caught:
            qsqs.send_message(QueueUrl=url, MessageBody="q")
        assert code(caught) == "MissingParameter"
    finally:
        qsqs.delete_queue(QueueUrl=url)
        qsqs.close()
