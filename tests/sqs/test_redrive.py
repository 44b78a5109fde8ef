"""ListDeadLetterSourceQueues and RedriveAllowPolicy."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from targets import ServerThread


def test_list_dead_letter_source_queues(sqs: Any, queue: str) -> None:
    dlq = sqs.get_queue_url(QueueName=queue.rsplit("/", 1)[1] + ".dlq")["QueueUrl"]
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [queue]
    got = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=1)
    assert got["queueUrls"] == [queue] and "NextToken" not in got
    assert sqs.list_dead_letter_source_queues(QueueUrl=queue)["queueUrls"] == []
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.list_dead_letter_source_queues(QueueUrl=queue + "-gone")
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=0)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"


@pytest.mark.parametrize("policy", [
    "{not json", json.dumps({"redrivePermission": "sometimes"}),
    json.dumps({"redrivePermission": "byQueue"}),
    json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": [
        f"arn:aws:sqs:us-east-1:123456789012:q{i}" for i in range(11)]}),
    json.dumps({"redrivePermission": "allowAll", "sourceQueueArns": [
        "arn:aws:sqs:us-east-1:123456789012:q"]}),
    json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": ["not an arn"]}),
])
def test_redrive_allow_policy_refusals(sqs: Any, queue: str, policy: str) -> None:
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedriveAllowPolicy": policy})
    assert caught.value.response["Error"]["Code"] in {
        "InvalidAttributeValue", "InvalidParameterValue"}


def test_redrive_allow_policy_kept_and_enforced(sqs: Any, queue: str) -> None:
    name = queue.rsplit("/", 1)[1]
    dlq = sqs.get_queue_url(QueueName=name + ".dlq")["QueueUrl"]
    arn = f"arn:aws:sqs:us-east-1:123456789012:{name}"
    redrive = json.dumps({"deadLetterTargetArn": arn + ".dlq", "maxReceiveCount": 4})
    by_queue = json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": [arn]})
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": by_queue})
    got = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["All"])["Attributes"]
    assert got["RedriveAllowPolicy"] == by_queue
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedrivePolicy": redrive})
    deny = json.dumps({"redrivePermission": "denyAll"})
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": deny})
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedrivePolicy": redrive})
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": ""})
    assert "RedriveAllowPolicy" not in sqs.get_queue_attributes(
        QueueUrl=dlq, AttributeNames=["All"])["Attributes"]
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedrivePolicy": redrive})


# --- named dead-letter targets --------------------------------------------------------------------
ARN = "arn:aws:sqs:us-east-1:123456789012:"


def _name(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _redrive_to(sqs: Any, source: str, target: str, count: int = 1) -> None:
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": ARN + _name(target), "maxReceiveCount": count})})


@pytest.fixture
def target(sqs: Any, queue: str) -> Iterator[str]:
    """The URL of a second fresh queue (a dead-letter target), deleted after the test."""
    url: str = sqs.create_queue(QueueName=_name(queue) + "-target")["QueueUrl"]
    yield url
    sqs.delete_queue(QueueUrl=url)


def _depth(sqs: Any, url: str) -> int:
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(got["Attributes"]["ApproximateNumberOfMessages"])


def test_named_target_receives_what_exceeds_max_receive_count(
        sqs: Any, queue: str, target: str) -> None:
    _redrive_to(sqs, queue, target)
    policy = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["RedrivePolicy"])
    assert json.loads(policy["Attributes"]["RedrivePolicy"]) == {
        "deadLetterTargetArn": ARN + _name(target), "maxReceiveCount": 1}
    sent = sqs.send_message(QueueUrl=queue, MessageBody="once")["MessageId"]
    assert len(sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0)["Messages"]) == 1
    # Its one allowed receive is over: the next receive moves it to the named target.
    assert "Messages" not in sqs.receive_message(QueueUrl=queue)
    (m,) = sqs.receive_message(QueueUrl=target, MessageSystemAttributeNames=["All"])["Messages"]
    assert m["MessageId"] == sent and m["Body"] == "once"
    assert m["Attributes"]["DeadLetterQueueSourceArn"] == ARN + _name(queue)
    own_dlq = sqs.get_queue_url(QueueName=_name(queue) + ".dlq")["QueueUrl"]
    assert _depth(sqs, own_dlq) == 0
    assert sqs.list_dead_letter_source_queues(QueueUrl=target)["queueUrls"] == [queue]
    assert sqs.list_dead_letter_source_queues(QueueUrl=own_dlq)["queueUrls"] == []


def test_named_target_takes_nacked_and_reaped_messages(
        sqs: Any, server: ServerThread, queue: str, target: str) -> None:
    _redrive_to(sqs, queue, target, count=1)
    sqs.send_message(QueueUrl=queue, MessageBody="{}")
    sqs.send_message(QueueUrl=queue, MessageBody="{}")
    with httpx.Client(base_url=server.url) as http:
        # A nack with dead_letter (a permanent failure) moves the message at once.
        (m,) = http.post(f"/queues/{_name(queue)}/poll").json()["messages"]
        nacked = http.post(f"/queues/{_name(queue)}/nack", json={
            "id": m["id"], "token": m["token"], "dead_letter": True})
        assert nacked.status_code == 200, nacked.text
        # A lease that ends on the last allowed attempt: the reaper moves it, no poll needed.
        (r,) = http.post(f"/queues/{_name(queue)}/poll",
                         params={"visibility_ms": 1}).json()["messages"]
        for _ in range(200):  # the reaper runs every second; bounded
            if _depth(sqs, target) == 2:
                break
            time.sleep(0.05)
        got = http.get(f"/queues/{_name(target)}/peek", params={"limit": 10}).json()
    assert sorted(x["id"] for x in got["messages"]) == sorted([m["id"], r["id"]])
    assert {x["origin_queue"] for x in got["messages"]} == {_name(queue)}


def test_named_target_refusals(sqs: Any, queue: str, target: str) -> None:
    def refused(arn: str) -> str:
        with pytest.raises(sqs.exceptions.ClientError) as caught:
            sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": arn, "maxReceiveCount": 2})})
        return str(caught.value.response["Error"]["Code"])

    assert refused(ARN + _name(queue) + "-gone") == "InvalidParameterValue"
    assert refused(ARN + _name(queue)) == "InvalidAttributeValue"
    sqs.set_queue_attributes(QueueUrl=target, Attributes={"RedriveAllowPolicy": json.dumps(
        {"redrivePermission": "byQueue", "sourceQueueArns": [ARN + "someone-else"]})})
    assert refused(ARN + _name(target)) == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ClientError):  # (nothing changed meanwhile)
        sqs.create_queue(QueueName=_name(queue) + "-new", Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": ARN + _name(target),
                                         "maxReceiveCount": 2})})
    assert sqs.list_dead_letter_source_queues(QueueUrl=target)["queueUrls"] == []


def test_create_queue_with_named_target_and_target_removed(sqs: Any, queue: str) -> None:
    other = sqs.create_queue(QueueName=_name(queue) + "-t")["QueueUrl"]
    attrs = {"RedrivePolicy": json.dumps({"deadLetterTargetArn": ARN + _name(other),
                                          "maxReceiveCount": 1})}
    source = sqs.create_queue(QueueName=_name(queue) + "-s", Attributes=attrs)["QueueUrl"]
    try:
        assert sqs.create_queue(QueueName=_name(source), Attributes=attrs)["QueueUrl"] == source
        with pytest.raises(sqs.exceptions.QueueNameExists):  # another target: not the same
            sqs.create_queue(QueueName=_name(source), Attributes={
                "RedrivePolicy": json.dumps({"maxReceiveCount": 1})})
        assert sqs.list_dead_letter_source_queues(QueueUrl=other)["queueUrls"] == [source]
        sqs.delete_queue(QueueUrl=other)
        # Its target gone, the queue dead-letters into its own DLQ again.
        sqs.send_message(QueueUrl=source, MessageBody="x")
        sqs.receive_message(QueueUrl=source, VisibilityTimeout=0)
        assert "Messages" not in sqs.receive_message(QueueUrl=source)
        own = sqs.get_queue_url(QueueName=_name(source) + ".dlq")["QueueUrl"]
        assert _depth(sqs, own) == 1
        # The policy still names it, as on AWS: a queue of that name made again is the target.
        policy = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["RedrivePolicy"])
        assert json.loads(policy["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"] == (
            ARN + _name(other))
    finally:
        sqs.delete_queue(QueueUrl=source)


def test_queues_dead_lettering_into_each_other_concurrently(
        sqs: Any, server: ServerThread, queue: str, target: str) -> None:
    # A names B and B names A: a nack on either locks both rows; taken in one order (by id)
    # they never deadlock, and no message or count goes astray.
    _redrive_to(sqs, queue, target, count=5)
    _redrive_to(sqs, target, queue, count=5)
    names = (_name(queue), _name(target))
    for name in names:
        sqs.send_message_batch(QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"],
                               Entries=[{"Id": str(i), "MessageBody": "{}"} for i in range(10)])
    failures: list[str] = []

    def bounce(order: tuple[str, str]) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for _ in range(8):
                for name in order:
                    got = http.post(f"/queues/{name}/poll", params={"batch": 5})
                    nacks = [{"id": m["id"], "token": m["token"], "dead_letter": True}
                             for m in got.json().get("messages", [])]
                    if nacks:
                        r = http.post(f"/queues/{name}/nack", json={"nacks": nacks})
                        if r.status_code != 200:
                            failures.append(r.text)

    threads = [threading.Thread(target=bounce, args=(order,))
               for order in (names, names[::-1], names, names[::-1])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failures == []
    with httpx.Client(base_url=server.url) as http:
        held = {name: len(http.get(f"/queues/{name}/messages",
                                   params={"limit": 100}).json()["messages"])
                for name in names}
        depth = {name: sum(http.get(f"/queues/{name}/stats").json()[k]
                           for k in ("ready", "delayed", "leased")) for name in names}
    assert sum(held.values()) == 20 and held == depth
