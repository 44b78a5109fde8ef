"""ListDeadLetterSourceQueues and RedriveAllowPolicy."""

from __future__ import annotations

import json
from typing import Any

import pytest


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
