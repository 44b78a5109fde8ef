"""What the SQS endpoint keeps of a queue beside sqew's settings: tags, and the queue-level
DelaySeconds and ReceiveMessageWaitTimeSeconds applied to sends and receives."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest

from .test_query import query_client_for

_names = itertools.count()


def test_tags_added_changed_listed_and_removed(sqs: Any, queue: str) -> None:
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=queue)
    sqs.tag_queue(QueueUrl=queue, Tags={"team": "billing", "env": "dev"})
    sqs.tag_queue(QueueUrl=queue, Tags={"env": "prod", "empty": ""})
    assert sqs.list_queue_tags(QueueUrl=queue)["Tags"] == {
        "team": "billing", "env": "prod", "empty": ""}
    sqs.untag_queue(QueueUrl=queue, TagKeys=["team", "not-there"])
    assert sqs.list_queue_tags(QueueUrl=queue)["Tags"] == {"env": "prod", "empty": ""}
    sqs.untag_queue(QueueUrl=queue, TagKeys=["env", "empty"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=queue)


def test_tags_on_create_and_gone_with_the_queue(sqs: Any) -> None:
    name = f"tagged{next(_names)}"
    url = sqs.create_queue(QueueName=name, tags={"a": "1"})["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"a": "1"}
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.list_queue_tags(QueueUrl=url)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    try:
        assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)  # a new queue, no old tags
    finally:
        sqs.delete_queue(QueueUrl=url)


@pytest.mark.parametrize(("tags", "code"), [
    ({"": "v"}, "InvalidParameterValue"),
    ({"k" * 129: "v"}, "InvalidParameterValue"),
    ({"k": "v" * 257}, "InvalidParameterValue"),
    ({"aws:reserved": "v"}, "InvalidParameterValue"),
    ({}, "MissingParameter"),
])
def test_tag_refusals(sqs: Any, queue: str, tags: dict[str, str], code: str) -> None:
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.tag_queue(QueueUrl=queue, Tags=tags)
    assert caught.value.response["Error"]["Code"] == code
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=queue)


def test_at_most_fifty_tags(sqs: Any, queue: str) -> None:
    sqs.tag_queue(QueueUrl=queue, Tags={f"k{i}": "v" for i in range(50)})
    sqs.tag_queue(QueueUrl=queue, Tags={"k0": "changed"})  # a key it has: still 50
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.tag_queue(QueueUrl=queue, Tags={"one-more": "v"})
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert len(sqs.list_queue_tags(QueueUrl=queue)["Tags"]) == 50
    with pytest.raises(sqs.exceptions.ClientError):
        sqs.create_queue(QueueName=f"many{next(_names)}",
                         tags={f"k{i}": "v" for i in range(51)})
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.untag_queue(QueueUrl=queue, TagKeys=[])
    assert caught.value.response["Error"]["Code"] == "MissingParameter"


def test_tags_over_the_query_protocol(sqs: Any, server: Any, queue: str) -> None:
    q = query_client_for(server.url)
    try:
        q.tag_queue(QueueUrl=queue, Tags={"over": "query", "x": "<&>"})
        q.untag_queue(QueueUrl=queue, TagKeys=["x"])
        assert q.list_queue_tags(QueueUrl=queue)["Tags"] == {"over": "query"}
        url = q.create_queue(QueueName=f"qtag{next(_names)}", tags={"t": "1"})["QueueUrl"]
        assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"t": "1"}
        q.delete_queue(QueueUrl=url)
    finally:
        q.close()


def test_queue_level_delay_applies_to_sends_without_their_own(sqs: Any, queue: str) -> None:
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"DelaySeconds": "600"})
    got = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["DelaySeconds"])
    assert got["Attributes"] == {"DelaySeconds": "600"}
    sqs.send_message(QueueUrl=queue, MessageBody="delayed by the queue")
    sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": "a", "MessageBody": "also"}])
    sqs.send_message(QueueUrl=queue, MessageBody="now", DelaySeconds=0)
    sqs.send_message_batch(QueueUrl=queue, Entries=[
        {"Id": "b", "MessageBody": "now too", "DelaySeconds": 0}])
    counts = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    assert (counts["ApproximateNumberOfMessages"],
            counts["ApproximateNumberOfMessagesDelayed"]) == ("2", "2")
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in got) == ["now", "now too"]


def test_queue_level_wait_makes_receives_long_polls(sqs: Any, queue: str) -> None:
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"ReceiveMessageWaitTimeSeconds": "20"})
    got = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    assert got["ReceiveMessageWaitTimeSeconds"] == "20"
    assert "Messages" not in sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0)
    # A receive that gives no WaitTimeSeconds waits (the queue's 20 s) for a later send: a
    # short poll would have answered empty before it.
    received: list[Any] = []
    waiting = threading.Thread(target=lambda: received.append(
        sqs.receive_message(QueueUrl=queue)))
    waiting.start()
    time.sleep(0.5)
    sqs.send_message(QueueUrl=queue, MessageBody="worth the wait")
    waiting.join(25)
    assert [m["Body"] for m in received[0]["Messages"]] == ["worth the wait"]


def test_create_queue_keeps_and_compares_delay_and_wait(sqs: Any) -> None:
    name = f"defaults{next(_names)}"
    given = {"DelaySeconds": "5", "ReceiveMessageWaitTimeSeconds": "2"}
    url = sqs.create_queue(QueueName=name, Attributes=given)["QueueUrl"]
    try:
        got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert {k: got[k] for k in given} == given
        assert sqs.create_queue(QueueName=name, Attributes=given)["QueueUrl"] == url
        with pytest.raises(sqs.exceptions.QueueNameExists):
            sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "6"})
    finally:
        sqs.delete_queue(QueueUrl=url)


def _ready_and_delayed(sqs: Any, queue: str) -> tuple[str, str]:
    got = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    return got["ApproximateNumberOfMessages"], got["ApproximateNumberOfMessagesDelayed"]


def test_a_changed_queue_delay_applies_to_the_very_next_send(sqs: Any, queue: str) -> None:
    # Sends before the change read the queue's (absent) delay; the next ones, right after the
    # change, must not go by what those read.
    sqs.send_message(QueueUrl=queue, MessageBody="before")
    sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": "a", "MessageBody": "before too"}])
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"DelaySeconds": "600"})
    sqs.send_message(QueueUrl=queue, MessageBody="after")
    sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": "b", "MessageBody": "after too"}])
    assert _ready_and_delayed(sqs, queue) == ("2", "2")
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"DelaySeconds": "0"})
    sqs.send_message(QueueUrl=queue, MessageBody="undelayed")
    assert _ready_and_delayed(sqs, queue) == ("3", "2")


def test_a_queue_made_again_over_rest_has_no_old_delay(server: Any, sqs: Any) -> None:
    import sqew

    name = f"again{next(_names)}"
    url = sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "600"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="delayed by the first queue")
    rest = sqew.Client(server.url)
    try:
        rest.delete_queue(name)
        rest.create_queue(name)
        sqs.send_message(QueueUrl=url, MessageBody="not delayed")
        assert _ready_and_delayed(sqs, url) == ("1", "0")
    finally:
        rest.delete_queue(name)
        rest.close()
