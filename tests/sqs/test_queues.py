"""The queue actions over boto3: create, URL, list, delete, attributes, purge."""

from __future__ import annotations

import json
from typing import Any

import pytest
from targets import ServerThread

from .conftest import client_for


def test_create_queue_maps_attributes_onto_settings_and_is_idempotent(sqs: Any) -> None:
    attrs = {"VisibilityTimeout": "45", "MessageRetentionPeriod": "3600",
             "MaximumMessageSize": "2048",
             "RedrivePolicy": json.dumps({"maxReceiveCount": 3})}
    url = sqs.create_queue(QueueName="made", Attributes=attrs)["QueueUrl"]
    try:
        assert url.endswith("/123456789012/made")
        got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert got["VisibilityTimeout"] == "45"
        assert got["MessageRetentionPeriod"] == "3600"
        assert got["MaximumMessageSize"] == "2048"
        assert got["QueueArn"] == "arn:aws:sqs:us-east-1:123456789012:made"
        assert json.loads(got["RedrivePolicy"]) == {
            "deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:made.dlq",
            "maxReceiveCount": 3}
        # The same attributes again: the same queue.
        assert sqs.create_queue(QueueName="made", Attributes=attrs)["QueueUrl"] == url
        assert sqs.create_queue(QueueName="made")["QueueUrl"] == url
        with pytest.raises(sqs.exceptions.QueueNameExists) as err:
            sqs.create_queue(QueueName="made", Attributes={"VisibilityTimeout": "46"})
        assert err.value.response["Error"]["Code"] == "QueueAlreadyExists"
    finally:
        sqs.delete_queue(QueueUrl=url)


def test_get_queue_url_and_missing_queues(sqs: Any, queue: str) -> None:
    name = queue.rsplit("/", 1)[1]
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == queue
    assert sqs.get_queue_url(QueueName=f"{name}.dlq")["QueueUrl"] == f"{queue}.dlq"
    for call in (lambda: sqs.get_queue_url(QueueName="absent"),
                 lambda: sqs.get_queue_attributes(QueueUrl=queue + "x"),
                 lambda: sqs.send_message(QueueUrl=queue + "x", MessageBody="b"),
                 lambda: sqs.receive_message(QueueUrl=queue + "x"),
                 lambda: sqs.purge_queue(QueueUrl=queue + "x"),
                 lambda: sqs.delete_queue(QueueUrl=queue + "x")):
        with pytest.raises(sqs.exceptions.QueueDoesNotExist) as err:
            call()
        assert err.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_queue_url_resolves_by_its_path_whatever_its_host(sqs: Any, queue: str) -> None:
    name = queue.rsplit("/", 1)[1]
    for url in (f"https://sqs.us-east-1.amazonaws.com/000000000000/{name}", name,
                f"/123456789012/{name}"):
        sqs.send_message(QueueUrl=url, MessageBody="here")
    got = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])
    assert got["Attributes"] == {"ApproximateNumberOfMessages": "3"}


def test_queue_urls_follow_the_host_header(server: ServerThread) -> None:
    local = client_for(server.url.replace("127.0.0.1", "localhost"))
    url = local.create_queue(QueueName="hosted")["QueueUrl"]
    try:
        assert url == server.url.replace("127.0.0.1", "localhost") + "/123456789012/hosted"
    finally:
        local.delete_queue(QueueUrl=url)


def test_list_queues_by_prefix_in_pages(sqs: Any) -> None:
    urls = [sqs.create_queue(QueueName=f"page-{i}")["QueueUrl"] for i in range(5)]
    try:
        everything = sqs.list_queues(QueueNamePrefix="page-")["QueueUrls"]
        # Each queue with its dead-letter queue, by name.
        assert everything == [u for url in urls for u in (url, f"{url}.dlq")]
        seen: list[str] = []
        token: dict[str, str] = {}
        while True:
            page = sqs.list_queues(QueueNamePrefix="page-", MaxResults=3, **token)
            seen += page["QueueUrls"]
            if "NextToken" not in page:
                break
            token = {"NextToken": page["NextToken"]}
        assert seen == everything
        assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix="nothing-")
        with pytest.raises(sqs.exceptions.ClientError) as err:
            sqs.list_queues(MaxResults=1001)
        assert err.value.response["Error"]["Code"] == "InvalidParameterValue"
    finally:
        for url in urls:
            sqs.delete_queue(QueueUrl=url)


def test_delete_queue_removes_it_and_its_dlq(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="doomed")["QueueUrl"]
    sqs.delete_queue(QueueUrl=url)
    names = [u.rsplit("/", 1)[1] for u in sqs.list_queues().get("QueueUrls", [])]
    assert "doomed" not in names and "doomed.dlq" not in names
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="doomed")


def test_counters_and_named_attributes(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="ready")
    sqs.send_message(QueueUrl=queue, MessageBody="later", DelaySeconds=900)
    sqs.send_message(QueueUrl=queue, MessageBody="taken")
    sqs.receive_message(QueueUrl=queue)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed", "CreatedTimestamp"]
    got = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=names)["Attributes"]
    assert set(got) == set(names)
    assert (got["ApproximateNumberOfMessages"], got["ApproximateNumberOfMessagesNotVisible"],
            got["ApproximateNumberOfMessagesDelayed"]) == ("1", "1", "1")
    assert len(got["CreatedTimestamp"]) == 10  # epoch seconds
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["Nonsense"])


def test_set_queue_attributes(sqs: Any, queue: str) -> None:
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={
        "VisibilityTimeout": "7", "RedrivePolicy": json.dumps({
            "deadLetterTargetArn": f"arn:aws:sqs:us-east-1:123456789012:"
                                   f"{queue.rsplit('/', 1)[1]}.dlq",
            "maxReceiveCount": "9"}),
        "DelaySeconds": "0", "ReceiveMessageWaitTimeSeconds": "0"})
    got = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    assert got["VisibilityTimeout"] == "7"
    assert json.loads(got["RedrivePolicy"])["maxReceiveCount"] == 9


@pytest.mark.parametrize(("attributes", "error"), [
    ({"VisibilityTimeout": "43201"}, "InvalidAttributeValue"),
    ({"VisibilityTimeout": "soon"}, "InvalidAttributeValue"),
    ({"MaximumMessageSize": "1023"}, "InvalidAttributeValue"),
    ({"MessageRetentionPeriod": "59"}, "InvalidAttributeValue"),
    ({"DelaySeconds": "901"}, "InvalidAttributeValue"),
    ({"ReceiveMessageWaitTimeSeconds": "21"}, "InvalidAttributeValue"),
    ({"RedrivePolicy": "{not json"}, "InvalidAttributeValue"),
    ({"RedrivePolicy": json.dumps({"maxReceiveCount": 0})}, "InvalidAttributeValue"),
    ({"QueueArn": "arn:aws:sqs:us-east-1:123456789012:x"}, "InvalidAttributeName"),
    ({"Bogus": "1"}, "InvalidAttributeName"),
    ({"FifoQueue": "true"}, "InvalidAttributeName"),
    ({"ContentBasedDeduplication": "true"}, "InvalidAttributeName"),
    ({"Policy": "[not an object]"}, "InvalidAttributeValue"),
    ({"KmsMasterKeyId": "alias/x"}, "UnsupportedOperation"),
])
def test_set_queue_attributes_refusals(sqs: Any, queue: str, attributes: dict[str, str],
                                       error: str) -> None:
    with pytest.raises(getattr(sqs.exceptions, error)):
        sqs.set_queue_attributes(QueueUrl=queue, Attributes=attributes)


@pytest.mark.parametrize("name", ["", "a" * 81, "has space", "dot.ted", "_lead", "x.fifo"])
def test_create_queue_refuses_bad_names(sqs: Any, name: str) -> None:
    with pytest.raises(sqs.exceptions.ClientError) as err:
        sqs.create_queue(QueueName=name)
    assert err.value.response["Error"]["Code"] in {
        "InvalidParameterValue", "AWS.SimpleQueueService.UnsupportedOperation"}


def test_purge_queue(sqs: Any, queue: str) -> None:
    sqs.send_message_batch(QueueUrl=queue, Entries=[
        {"Id": str(i), "MessageBody": "m"} for i in range(3)])
    sqs.purge_queue(QueueUrl=queue)
    assert "Messages" not in sqs.receive_message(QueueUrl=queue)


def test_account_and_region_are_settings(start_server: Any) -> None:
    server = start_server(sqs_account_id="000000000042", sqs_region="eu-west-1")
    sqs = client_for(server.url)
    url = sqs.create_queue(QueueName="placed")["QueueUrl"]
    assert url == f"{server.url}/000000000042/placed"
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    assert got == {"QueueArn": "arn:aws:sqs:eu-west-1:000000000042:placed"}
    sqs.close()
