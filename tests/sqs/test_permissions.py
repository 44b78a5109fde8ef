"""AddPermission and RemovePermission: statements of the queue's Policy attribute, as AWS
writes them; SetQueueAttributes' Policy; the errors AWS answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .test_query import query_client_for


def policy(sqs: Any, queue: str) -> dict[str, Any] | None:
    got = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    return json.loads(got["Policy"]) if "Policy" in got else None


def test_add_and_remove_permissions(sqs: Any, queue: str) -> None:
    assert policy(sqs, queue) is None
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    sqs.add_permission(QueueUrl=queue, Label="one", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    sqs.add_permission(QueueUrl=queue, Label="two",
                       AWSAccountIds=["111122223333", "444455556666"],
                       Actions=["ReceiveMessage", "DeleteMessage"])
    got = policy(sqs, queue)
    assert got is not None
    assert got["Version"] == "2012-10-17"
    assert got["Statement"] == [
        {"Sid": "one", "Effect": "Allow",
         "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
         "Action": "SQS:SendMessage", "Resource": arn},
        {"Sid": "two", "Effect": "Allow",
         "Principal": {"AWS": ["arn:aws:iam::111122223333:root",
                               "arn:aws:iam::444455556666:root"]},
         "Action": ["SQS:ReceiveMessage", "SQS:DeleteMessage"], "Resource": arn}]
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.add_permission(QueueUrl=queue, Label="one", AWSAccountIds=["111122223333"],
                           Actions=["SendMessage"])
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "Already exists" in caught.value.response["Error"]["Message"]
    sqs.remove_permission(QueueUrl=queue, Label="one")
    assert [s["Sid"] for s in policy(sqs, queue)["Statement"]] == ["two"]  # type: ignore[index]
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.remove_permission(QueueUrl=queue, Label="one")
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    sqs.remove_permission(QueueUrl=queue, Label="two")
    assert policy(sqs, queue) is None


@pytest.mark.parametrize(("label", "accounts", "actions", "code"), [
    ("bad label", ["111122223333"], ["SendMessage"], "InvalidParameterValue"),
    ("x" * 81, ["111122223333"], ["SendMessage"], "InvalidParameterValue"),
    ("ok", ["111122223333"], ["CreateQueue"], "InvalidParameterValue"),
    ("ok", ["not-an-account"], ["SendMessage"], "InvalidParameterValue"),
    ("ok", [], ["SendMessage"], "MissingParameter"),
    ("ok", ["111122223333"], [], "MissingParameter"),
    ("ok", ["111122223333"], ["SendMessage"] * 8, "OverLimit"),
])
def test_add_permission_refusals(sqs: Any, queue: str, label: str, accounts: list[str],
                                 actions: list[str], code: str) -> None:
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.add_permission(QueueUrl=queue, Label=label, AWSAccountIds=accounts,
                           Actions=actions)
    assert caught.value.response["Error"]["Code"] == code
    assert policy(sqs, queue) is None


def test_a_policy_set_as_an_attribute(sqs: Any, queue: str) -> None:
    document = {"Version": "2012-10-17", "Statement": []}
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"Policy": json.dumps(document)})
    assert policy(sqs, queue) == document
    sqs.add_permission(QueueUrl=queue, Label="l", AWSAccountIds=["111122223333"],
                       Actions=["*"])
    assert [s["Action"] for s in policy(sqs, queue)["Statement"]] == ["SQS:*"]  # type: ignore[index]
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"Policy": ""})
    assert policy(sqs, queue) is None


def test_permissions_and_dead_letter_sources_over_query(server: Any, sqs: Any,
                                                        queue: str) -> None:
    q = query_client_for(server.url)
    try:
        q.add_permission(QueueUrl=queue, Label="q", AWSAccountIds=["111122223333"],
                         Actions=["SendMessage", "GetQueueUrl"])
        statement = policy(sqs, queue)["Statement"][0]  # type: ignore[index]
        assert statement["Action"] == ["SQS:SendMessage", "SQS:GetQueueUrl"]
        q.remove_permission(QueueUrl=queue, Label="q")
        assert policy(sqs, queue) is None
        dlq = queue + ".dlq"
        assert q.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [queue]
    finally:
        q.close()
