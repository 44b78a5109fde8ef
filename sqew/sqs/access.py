"""What each SQS action needs of a key, and the queue it acts on (docs/sqs.md,
"Authentication"): the same scopes and queue bindings as the REST API's (docs/rest.md, "Auth").

An action reads (``read``: any scope), sends (``produce``), receives, deletes or changes a
message's visibility (``consume``), or administers (``admin``: creating, changing, purging or
deleting queues, tags, permissions, move tasks). An action not listed needs ``admin``, so a new
one is never more open than that by oversight.
"""

from __future__ import annotations

from typing import Any

from sqew.core.keys import Need
from sqew.sqs import urls
from sqew.sqs.errors import SqsError

NEEDS: dict[str, Need] = {
    "GetQueueUrl": "read",
    "ListQueues": "read",
    "GetQueueAttributes": "read",
    "ListQueueTags": "read",
    "ListDeadLetterSourceQueues": "read",
    "SendMessage": "produce",
    "SendMessageBatch": "produce",
    "ReceiveMessage": "consume",
    "DeleteMessage": "consume",
    "DeleteMessageBatch": "consume",
    "ChangeMessageVisibility": "consume",
    "ChangeMessageVisibilityBatch": "consume",
}
"""The actions that need less than ``admin``, as their REST counterparts do."""


def need_of(action: str) -> Need:
    """What ``action`` needs of a key."""
    return NEEDS.get(action, "admin")


def queue_of(params: Any) -> str | None:
    """The queue an action's input names (``QueueUrl``, or ``QueueName`` for CreateQueue and
    GetQueueUrl); None when it names none, or none that could be a queue (the action then
    answers as it answers without a key). A move task names its source by ARN: the last part."""
    if not isinstance(params, dict):
        return None
    url, name, arn = params.get("QueueUrl"), params.get("QueueName"), params.get("SourceArn")
    try:
        if isinstance(url, str):
            return urls.queue_name(url)
    except SqsError:
        return None
    if isinstance(name, str):
        return name
    if isinstance(arn, str):
        return arn.rsplit(":", 1)[-1]
    return None
