"""StartMessageMoveTask, ListMessageMoveTasks and CancelMessageMoveTask over boto3, on two
servers on one store (replicas): a task started on one is seen, cancelled and run from the
other; the task runs in the server, not in the request."""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import targets
from targets import ServerThread, server_settings

from .conftest import BACKENDS, client_for

ARN = "arn:aws:sqs:us-east-1:123456789012:"
_names = itertools.count()


@pytest.fixture(scope="module", params=BACKENDS)
def replicas(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """boto3 clients on two servers of one fresh store of the backend."""
    directory = tmp_path_factory.mktemp("moves")
    store = (targets.sqlite(directory) if request.param == "sqlite"
             else targets.postgres(directory))
    with contextlib.ExitStack() as stack:
        stack.callback(store.drop)
        clients = []
        for _ in range(2):
            thread = ServerThread(server_settings(store.url))
            stack.callback(thread.stop)
            client = client_for(thread.url)
            stack.callback(client.close)
            clients.append(client)
        yield clients[0], clients[1]


def _dead_lettered(sqs: Any, count: int, target: str | None = None) -> tuple[str, str]:
    """A fresh queue whose ``count`` messages were each received once, past its
    ``maxReceiveCount`` of 1, and so moved to its DLQ (``target``, else its own): the URLs of
    the queue and of that DLQ."""
    name = f"mv{next(_names)}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    dlq_name = target or name + ".dlq"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": ARN + dlq_name, "maxReceiveCount": 1})})
    for i in range(count):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    got = 0
    while got < count:  # (each receive leases what is ready; bounded by the count)
        got += len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                       VisibilityTimeout=0).get("Messages", []))
    assert "Messages" not in sqs.receive_message(QueueUrl=url)  # (the sweep to the DLQ)
    return url, sqs.get_queue_url(QueueName=dlq_name)["QueueUrl"]


def _task(sqs: Any, source: str) -> dict[str, Any]:
    (task,) = sqs.list_message_move_tasks(SourceArn=source)["Results"]
    return dict(task)


def _until(sqs: Any, source: str, done: Any) -> dict[str, Any]:
    """The task of ``source`` once ``done(task)``, asked up to 30 s (the server's background
    timer steps it every second)."""
    for _ in range(300):
        task = _task(sqs, source)
        if done(task):
            return task
        time.sleep(0.1)
    raise AssertionError(f"the task never got there: {task}")


def _depth(sqs: Any, url: str) -> int:
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(got["Attributes"]["ApproximateNumberOfMessages"])


def test_redrive_to_the_origin_queue(replicas: tuple[Any, Any]) -> None:
    one, other = replicas
    queue, dlq = _dead_lettered(one, 3)
    source = ARN + dlq.rsplit("/", 1)[1]
    handle = one.start_message_move_task(SourceArn=source)["TaskHandle"]
    task = _until(other, source, lambda t: t["Status"] == "COMPLETED")
    assert handle and task["SourceArn"] == source
    assert "TaskHandle" not in task  # (AWS lists a handle for a running task only)
    assert task["ApproximateNumberOfMessagesMoved"] == 3
    assert task["ApproximateNumberOfMessagesToMove"] == 3
    assert task["StartedTimestamp"] > 0 and "DestinationArn" not in task
    got = one.receive_message(QueueUrl=queue, MaxNumberOfMessages=10,
                              MessageSystemAttributeNames=["All"])["Messages"]
    assert sorted(m["Body"] for m in got) == ["m0", "m1", "m2"]
    for m in got:  # receive counts start again; no first receive since the move
        assert m["Attributes"]["ApproximateReceiveCount"] == "1"
        assert "DeadLetterQueueSourceArn" not in m["Attributes"]
    assert _depth(one, dlq) == 0


def test_named_target_to_a_destination_at_a_rate_cancelled_midway(
        replicas: tuple[Any, Any]) -> None:
    one, other = replicas
    target = one.create_queue(QueueName=f"mvt{next(_names)}")["QueueUrl"]
    _, dlq = _dead_lettered(one, 6, target=target.rsplit("/", 1)[1])
    assert dlq == target
    dest = one.create_queue(QueueName=f"mvd{next(_names)}")["QueueUrl"]
    source, dest_arn = ARN + target.rsplit("/", 1)[1], ARN + dest.rsplit("/", 1)[1]
    handle = one.start_message_move_task(SourceArn=source, DestinationArn=dest_arn,
                                         MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    with pytest.raises(one.exceptions.UnsupportedOperation):  # one running task a source
        other.start_message_move_task(SourceArn=source, DestinationArn=dest_arn)
    # At one a second, six messages take more than one step: cancel after the first.
    running = _until(other, source, lambda t: t["ApproximateNumberOfMessagesMoved"] >= 1)
    assert running["Status"] == "RUNNING" and running["MaxNumberOfMessagesPerSecond"] == 1
    assert running["DestinationArn"] == dest_arn and running["TaskHandle"] == handle
    moved = other.cancel_message_move_task(TaskHandle=handle)[
        "ApproximateNumberOfMessagesMoved"]
    assert 1 <= moved < 6
    task = _task(one, source)
    assert task["Status"] == "CANCELLED"
    with pytest.raises(one.exceptions.UnsupportedOperation):
        one.cancel_message_move_task(TaskHandle=handle)
    # Cancelled: no later step moves anything (the timer ticks every second).
    time.sleep(1.5)
    assert _task(one, source)["ApproximateNumberOfMessagesMoved"] == moved
    assert _depth(one, dest) == moved and _depth(one, target) == 6 - moved
    # A new task may start now, and finishes the job.
    one.start_message_move_task(SourceArn=source, DestinationArn=dest_arn)
    _until(one, source, lambda t: t["Status"] == "COMPLETED")
    assert _depth(one, dest) == 6 and _depth(one, target) == 0
    tasks = one.list_message_move_tasks(SourceArn=source, MaxResults=10)["Results"]
    assert [t["Status"] for t in tasks] == ["COMPLETED", "CANCELLED"]


def test_refusals(replicas: tuple[Any, Any]) -> None:
    one, _ = replicas
    plain = one.create_queue(QueueName=f"mvp{next(_names)}")["QueueUrl"]
    plain_arn = ARN + plain.rsplit("/", 1)[1]

    def code(call: Any, **kw: Any) -> str:
        with pytest.raises(one.exceptions.ClientError) as caught:
            call(**kw)
        return str(caught.value.response["Error"]["Code"])

    assert code(one.start_message_move_task, SourceArn=plain_arn) == "InvalidParameterValue"
    assert code(one.start_message_move_task,
                SourceArn=ARN + "nowhere.dlq") == "ResourceNotFoundException"
    assert code(one.start_message_move_task, SourceArn=plain_arn + ".dlq",
                DestinationArn=ARN + "nowhere") == "ResourceNotFoundException"
    assert code(one.start_message_move_task, SourceArn=plain_arn + ".dlq",
                MaxNumberOfMessagesPerSecond=501) == "InvalidParameterValue"
    assert code(one.start_message_move_task, SourceArn="not-an-arn") == "InvalidParameterValue"
    assert code(one.list_message_move_tasks, SourceArn=plain_arn + ".dlq",
                MaxResults=11) == "InvalidParameterValue"
    assert code(one.cancel_message_move_task,
                TaskHandle="no-such-task") == "ResourceNotFoundException"
    assert one.list_message_move_tasks(SourceArn=plain_arn + ".dlq")["Results"] == []
