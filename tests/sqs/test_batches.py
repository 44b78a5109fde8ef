"""The batch actions over boto3: entries failing alone, the batch's own errors."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import attributes_md5, md5

ATTRS = {"k": {"DataType": "String", "StringValue": "v"}}


def test_send_batch_sends_the_valid_entries_and_fails_the_others(sqs: Any, queue: str) -> None:
    got = sqs.send_message_batch(QueueUrl=queue, Entries=[
        {"Id": "ok-1", "MessageBody": "one", "MessageAttributes": ATTRS},
        {"Id": "bad", "MessageBody": "bad \x00"},
        {"Id": "ok_2", "MessageBody": '{"two": 2}', "DelaySeconds": 0},
        {"Id": "late", "MessageBody": "x", "DelaySeconds": 901},
    ])
    ok = {e["Id"]: e for e in got["Successful"]}
    assert set(ok) == {"ok-1", "ok_2"}
    assert ok["ok-1"]["MD5OfMessageBody"] == md5(b"one")
    assert ok["ok-1"]["MD5OfMessageAttributes"] == attributes_md5(ATTRS)
    assert {(f["Id"], f["Code"], f["SenderFault"]) for f in got["Failed"]} == {
        ("bad", "InvalidMessageContents", True), ("late", "InvalidParameterValue", True)}
    bodies = sorted(m["Body"] for m in sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10)["Messages"])
    assert bodies == ["one", '{"two": 2}']


def test_a_batch_entry_over_the_queue_limit_fails_alone(sqs: Any, queue: str) -> None:
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"MaximumMessageSize": "1024"})
    got = sqs.send_message_batch(QueueUrl=queue, Entries=[
        {"Id": "small", "MessageBody": "s"}, {"Id": "big", "MessageBody": "b" * 2000}])
    assert [e["Id"] for e in got["Successful"]] == ["small"]
    assert [(f["Id"], f["Code"]) for f in got["Failed"]] == [("big", "InvalidParameterValue")]


def test_delete_and_visibility_batches(sqs: Any, queue: str) -> None:
    sqs.send_message_batch(QueueUrl=queue, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)])
    handles = [m["ReceiptHandle"] for m in sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=3)["Messages"]]
    assert len(handles) == 3
    changed = sqs.change_message_visibility_batch(QueueUrl=queue, Entries=[
        {"Id": "a", "ReceiptHandle": handles[0], "VisibilityTimeout": 0},
        {"Id": "b", "ReceiptHandle": "nonsense", "VisibilityTimeout": 0},
        {"Id": "c", "ReceiptHandle": handles[1], "VisibilityTimeout": 50_000}])
    assert [e["Id"] for e in changed["Successful"]] == ["a"]
    assert sorted((f["Id"], f["Code"]) for f in changed["Failed"]) == [
        ("b", "ReceiptHandleIsInvalid"), ("c", "InvalidParameterValue")]
    again = sqs.receive_message(QueueUrl=queue)["Messages"][0]["ReceiptHandle"]
    deleted = sqs.delete_message_batch(QueueUrl=queue, Entries=[
        {"Id": "x", "ReceiptHandle": again}, {"Id": "y", "ReceiptHandle": handles[1]},
        {"Id": "z", "ReceiptHandle": handles[2]}, {"Id": "w", "ReceiptHandle": "junk"}])
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["x", "y", "z"]
    assert [(f["Id"], f["Code"]) for f in deleted["Failed"]] == [("w", "ReceiptHandleIsInvalid")]
    stats = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    assert stats["ApproximateNumberOfMessages"] == stats[
        "ApproximateNumberOfMessagesNotVisible"] == "0"


@pytest.mark.parametrize("action", ["send_message_batch", "delete_message_batch",
                                    "change_message_visibility_batch"])
def test_whole_batch_errors(sqs: Any, queue: str, action: str) -> None:
    def entry(i: Any) -> dict[str, Any]:
        if action == "send_message_batch":
            return {"Id": str(i), "MessageBody": "b"}
        return {"Id": str(i), "ReceiptHandle": "h"}

    call = getattr(sqs, action)
    with pytest.raises(sqs.exceptions.EmptyBatchRequest):
        call(QueueUrl=queue, Entries=[])
    with pytest.raises(sqs.exceptions.TooManyEntriesInBatchRequest):
        call(QueueUrl=queue, Entries=[entry(i) for i in range(11)])
    with pytest.raises(sqs.exceptions.BatchEntryIdsNotDistinct):
        call(QueueUrl=queue, Entries=[entry(1), entry(1)])
    for bad in ("has space", "x" * 81, "dot.ted"):
        with pytest.raises(sqs.exceptions.InvalidBatchEntryId):
            call(QueueUrl=queue, Entries=[entry(bad)])


def test_a_send_batch_over_256_kib_is_too_long(sqs: Any, queue: str) -> None:
    with pytest.raises(sqs.exceptions.BatchRequestTooLong):
        sqs.send_message_batch(QueueUrl=queue, Entries=[
            {"Id": str(i), "MessageBody": "x" * 100_000} for i in range(3)])
    assert "Messages" not in sqs.receive_message(QueueUrl=queue)
