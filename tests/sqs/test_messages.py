"""The message actions over boto3: send, receive, delete, visibility; digests recomputed."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from targets import ServerThread

from .conftest import attributes_md5, md5

ATTRIBUTES = {
    "text": {"DataType": "String", "StringValue": "héllo"},
    "count": {"DataType": "Number", "StringValue": "-12.5e3"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffraw"},
    "custom": {"DataType": "Number.float", "StringValue": "3.14"},
    "app.kind": {"DataType": "String.enum", "StringValue": "order"},
}


def test_send_and_receive_round_trip_with_digests(sqs: Any, queue: str) -> None:
    body = "not JSON: {ünïcödé}\t\r\n"
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
    sent = sqs.send_message(QueueUrl=queue, MessageBody=body, MessageAttributes=ATTRIBUTES,
                            MessageSystemAttributes={"AWSTraceHeader": {
                                "DataType": "String", "StringValue": trace}})
    assert sent["MD5OfMessageBody"] == md5(body.encode())
    assert sent["MD5OfMessageAttributes"] == attributes_md5(ATTRIBUTES)
    assert sent["MD5OfMessageSystemAttributes"] == attributes_md5(
        {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}})
    got = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"],
                              MessageSystemAttributeNames=["All"])["Messages"]
    (m,) = got
    assert m["MessageId"] == sent["MessageId"]
    assert m["Body"] == body
    assert m["MD5OfBody"] == md5(body.encode())
    assert m["MessageAttributes"] == ATTRIBUTES
    assert m["MD5OfMessageAttributes"] == attributes_md5(m["MessageAttributes"])
    a = m["Attributes"]
    assert a["ApproximateReceiveCount"] == "1"
    assert a["AWSTraceHeader"] == trace
    assert a["SenderId"] == "123456789012"
    assert int(a["ApproximateFirstReceiveTimestamp"]) >= int(a["SentTimestamp"]) > 0


def test_attribute_selection(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="{}", MessageAttributes=ATTRIBUTES)
    (m,) = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["app.*", "count"],
                               AttributeNames=["SentTimestamp"],
                               VisibilityTimeout=0)["Messages"]
    assert set(m["MessageAttributes"]) == {"app.kind", "count"}
    assert m["MD5OfMessageAttributes"] == attributes_md5(m["MessageAttributes"])
    assert set(m["Attributes"]) == {"SentTimestamp"}
    (m,) = sqs.receive_message(QueueUrl=queue)["Messages"]
    assert "MessageAttributes" not in m and "Attributes" not in m
    assert "MD5OfMessageAttributes" not in m


def test_delete_and_receive_counts(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="once")
    first = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0,
                                AttributeNames=["All"])["Messages"][0]
    second = sqs.receive_message(QueueUrl=queue, AttributeNames=["All"])["Messages"][0]
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    # A handle of an earlier receive succeeds and deletes nothing, as on SQS.
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=first["ReceiptHandle"])
    sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=second["ReceiptHandle"],
                                  VisibilityTimeout=0)
    third = sqs.receive_message(QueueUrl=queue)["Messages"][0]
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=third["ReceiptHandle"])
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=third["ReceiptHandle"])  # gone: fine
    assert "Messages" not in sqs.receive_message(QueueUrl=queue)


def test_change_visibility_of_a_message_received_again(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="m")
    old = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0)["Messages"][0]
    new = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=60)["Messages"][0]
    with pytest.raises(sqs.exceptions.MessageNotInflight):
        sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=old["ReceiptHandle"],
                                      VisibilityTimeout=5)
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=new["ReceiptHandle"])
    with pytest.raises(sqs.exceptions.ClientError) as err:
        sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=new["ReceiptHandle"],
                                      VisibilityTimeout=5)
    assert err.value.response["Error"]["Code"] == "InvalidParameterValue"


@pytest.mark.parametrize("handle", ["garbage", "", "a" * 2000, "cXVldWUvMS8="])
def test_receipt_handle_is_invalid(sqs: Any, queue: str, handle: str) -> None:
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=1)


def test_a_handle_of_another_queue_is_invalid(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="m")
    handle = sqs.receive_message(QueueUrl=queue)["Messages"][0]["ReceiptHandle"]
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=queue + ".dlq", ReceiptHandle=handle)


def test_a_receive_waiting_wakes_on_a_send(server: ServerThread, sqs: Any,
                                            queue: str) -> None:
    got: list[Any] = []
    waiting = threading.Thread(target=lambda: got.append(
        sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=20)))
    waiting.start()
    rt = server.app.state.runtime
    deadline = time.monotonic() + 10
    while rt.waiting_polls == 0 and time.monotonic() < deadline:  # the receive is waiting
        time.sleep(0.01)
    sqs.send_message(QueueUrl=queue, MessageBody="wake")
    waiting.join(20)
    assert [m["Body"] for m in got[0]["Messages"]] == ["wake"]


def test_receive_many_and_dead_letter_source(sqs: Any, queue: str) -> None:
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedrivePolicy": '{"maxReceiveCount": 1}'})
    sqs.send_message_batch(QueueUrl=queue, Entries=[
        {"Id": f"e{i}", "MessageBody": str(i)} for i in range(10)])
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert sorted(m["Body"] for m in got["Messages"]) == [str(i) for i in range(10)]
    # Received once (maxReceiveCount 1) and visible again: the next receive dead-letters.
    assert "Messages" not in sqs.receive_message(QueueUrl=queue)
    dlq = sqs.receive_message(QueueUrl=queue + ".dlq", MaxNumberOfMessages=10,
                              AttributeNames=["DeadLetterQueueSourceArn"])["Messages"]
    assert len(dlq) == 10
    assert dlq[0]["Attributes"]["DeadLetterQueueSourceArn"].endswith(
        ":" + queue.rsplit("/", 1)[1])


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"MessageBody": ""}, "InvalidParameterValue"),
    ({"MessageBody": "bad \x01 char"}, "InvalidMessageContents"),
    ({"MessageBody": "b", "DelaySeconds": 901}, "InvalidParameterValue"),
    ({"MessageBody": "b", "MessageDeduplicationId": "d"}, "InvalidParameterValue"),
    ({"MessageBody": "b", "MessageAttributes": {
        f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)}},
     "InvalidParameterValue"),
    ({"MessageBody": "b", "MessageAttributes": {
        "AWS.x": {"DataType": "String", "StringValue": "v"}}}, "InvalidParameterValue"),
    ({"MessageBody": "b", "MessageAttributes": {
        "a": {"DataType": "Number", "StringValue": "twelve"}}}, "InvalidParameterValue"),
    ({"MessageBody": "b", "MessageAttributes": {
        "a": {"DataType": "Integer", "StringValue": "1"}}}, "InvalidParameterValue"),
    ({"MessageBody": "b", "MessageAttributes": {
        "a": {"DataType": "String", "StringValue": ""}}}, "InvalidParameterValue"),
    ({"MessageBody": "x" * 262_145}, "InvalidParameterValue"),
])
def test_send_refusals(sqs: Any, queue: str, kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(sqs.exceptions.ClientError) as err:
        sqs.send_message(QueueUrl=queue, **kwargs)
    assert err.value.response["Error"]["Code"] == error


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"MaxNumberOfMessages": 11}, "InvalidParameterValue"),
    ({"MaxNumberOfMessages": 0}, "InvalidParameterValue"),
    ({"WaitTimeSeconds": 21}, "InvalidParameterValue"),
    ({"VisibilityTimeout": 43_201}, "InvalidParameterValue"),
    ({"MessageSystemAttributeNames": ["Nonsense"]}, "InvalidAttributeName"),
])
def test_receive_refusals(sqs: Any, queue: str, kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(sqs.exceptions.ClientError) as err:
        sqs.receive_message(QueueUrl=queue, **kwargs)
    assert err.value.response["Error"]["Code"] == error


def test_a_message_group_id_round_trips_on_a_standard_queue(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="m", MessageGroupId="tenant-7")
    (m,) = sqs.receive_message(QueueUrl=queue, MessageSystemAttributeNames=[
        "MessageGroupId"])["Messages"]
    assert m["Attributes"] == {"MessageGroupId": "tenant-7"}


def test_first_receive_time_is_kept_across_receives(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="again")
    (first,) = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0,
                                   MessageSystemAttributeNames=["All"])["Messages"]
    stamp = first["Attributes"]["ApproximateFirstReceiveTimestamp"]
    assert int(stamp) >= int(first["Attributes"]["SentTimestamp"])
    time.sleep(0.005)  # (so that a time taken at the second receive would differ)
    (second,) = sqs.receive_message(QueueUrl=queue, MessageSystemAttributeNames=[
        "ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount"])["Messages"]
    assert second["Attributes"] == {"ApproximateReceiveCount": "2",
                                    "ApproximateFirstReceiveTimestamp": stamp}
