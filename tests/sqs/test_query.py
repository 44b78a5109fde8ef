"""The Query protocol (form-encoded ``Action=…``, XML answers): boto3 made to speak it with the
Query model botocore shipped before SQS moved to JSON; plain HTTP for what an SDK never sends;
and the AWS CLI."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import httpx
import pytest
from botocore.config import Config
from targets import ServerThread

from sqew.sqs import query

from .conftest import attributes_md5, client_for, md5

NS = {"sqs": query.XMLNS}
ATTRIBUTES = {
    "text": {"DataType": "String", "StringValue": "héllo <&> \"x\""},
    "count": {"DataType": "Number", "StringValue": "-12.5e3"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffraw"},
    "custom": {"DataType": "Number.float", "StringValue": "3.14"},
}


def query_client_for(url: str) -> Any:
    """boto3's SQS client on ``url``, speaking the Query protocol: its loader finds sqew's copy
    of the Query model before the JSON model botocore ships."""
    session = botocore.session.get_session()
    session.get_component("data_loader").search_paths.insert(0, str(query.MODEL_DIR))
    client = boto3.Session(botocore_session=session).client(
        "sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="test",
        aws_secret_access_key="test", config=Config(retries={"total_max_attempts": 1}))
    assert client.meta.service_model.protocol == "query"
    return client


@pytest.fixture(scope="module")
def qsqs(server: ServerThread) -> Iterator[Any]:
    """boto3 on the Query protocol."""
    client = query_client_for(server.url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client() as client:
        yield client


def test_every_queue_action_over_query(qsqs: Any) -> None:
    url = qsqs.create_queue(QueueName="query-queue", Attributes={
        "VisibilityTimeout": "45", "RedrivePolicy": '{"maxReceiveCount": 3}'})["QueueUrl"]
    try:
        assert url.endswith("/123456789012/query-queue")
        assert qsqs.get_queue_url(QueueName="query-queue")["QueueUrl"] == url
        assert url in qsqs.list_queues(QueueNamePrefix="query-q")["QueueUrls"]
        page = qsqs.list_queues(QueueNamePrefix="query-queue", MaxResults=1)
        assert page["QueueUrls"] == [url] and page["NextToken"]
        attrs = qsqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert attrs["VisibilityTimeout"] == "45"
        assert json.loads(attrs["RedrivePolicy"])["maxReceiveCount"] == 3
        qsqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "50"})
        got = qsqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
        assert got["Attributes"] == {"VisibilityTimeout": "50"}
        qsqs.send_message(QueueUrl=url, MessageBody="x")
        qsqs.purge_queue(QueueUrl=url)
        assert qsqs.receive_message(QueueUrl=url).get("Messages", []) == []
    finally:
        qsqs.delete_queue(QueueUrl=url)
    with pytest.raises(qsqs.exceptions.QueueDoesNotExist) as caught:
        qsqs.get_queue_url(QueueName="query-queue")
    assert caught.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


def test_messages_round_trip_over_query_with_digests(qsqs: Any, sqs: Any, queue: str) -> None:
    body = "not JSON: <ünïcödé> & \"quotes\"\t\r\n"
    sent = qsqs.send_message(QueueUrl=queue, MessageBody=body, MessageAttributes=ATTRIBUTES)
    assert sent["MD5OfMessageBody"] == md5(body.encode())
    assert sent["MD5OfMessageAttributes"] == attributes_md5(ATTRIBUTES)
    (m,) = qsqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"],
                                AttributeNames=["All"], VisibilityTimeout=0)["Messages"]
    assert m["Body"] == body
    assert m["MessageAttributes"] == ATTRIBUTES
    assert m["MD5OfMessageAttributes"] == attributes_md5(ATTRIBUTES)
    assert m["Attributes"]["ApproximateReceiveCount"] == "1"
    # The same message over the JSON protocol: one queue, two wire codecs.
    (j,) = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"])["Messages"]
    assert (j["MessageId"], j["Body"], j["MessageAttributes"]) == (
        m["MessageId"], body, ATTRIBUTES)
    qsqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=j["ReceiptHandle"],
                                   VisibilityTimeout=30)
    qsqs.delete_message(QueueUrl=queue, ReceiptHandle=j["ReceiptHandle"])
    assert sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"][
        "ApproximateNumberOfMessagesNotVisible"] == "0"


def test_batches_over_query(qsqs: Any, queue: str) -> None:
    sent = qsqs.send_message_batch(QueueUrl=queue, Entries=[
        {"Id": "a", "MessageBody": "first", "MessageAttributes": ATTRIBUTES},
        {"Id": "b", "MessageBody": "second", "DelaySeconds": 0},
        {"Id": "c", "MessageBody": "x", "DelaySeconds": 901}])
    assert sorted(e["Id"] for e in sent["Successful"]) == ["a", "b"]
    assert [(f["Id"], f["SenderFault"]) for f in sent["Failed"]] == [("c", True)]
    got = qsqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                               MessageAttributeNames=["All"])["Messages"]
    assert sorted(m["Body"] for m in got) == ["first", "second"]
    handles = [{"Id": f"m{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
    changed = qsqs.change_message_visibility_batch(QueueUrl=queue, Entries=[
        {**h, "VisibilityTimeout": 60} for h in handles])
    assert len(changed["Successful"]) == 2
    deleted = qsqs.delete_message_batch(QueueUrl=queue, Entries=handles)
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["m0", "m1"]
    with pytest.raises(qsqs.exceptions.BatchEntryIdsNotDistinct) as caught:
        qsqs.delete_message_batch(QueueUrl=queue, Entries=[handles[0], handles[0]])
    assert caught.value.response["Error"]["Code"] == (
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct")


def _error(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == query.CONTENT_TYPE
    root = ET.fromstring(r.text)
    assert root.tag == f"{{{query.XMLNS}}}ErrorResponse"
    assert root.findtext("sqs:Error/sqs:Type", namespaces=NS) == "Sender"
    assert root.findtext("sqs:Error/sqs:Code", namespaces=NS) == code
    assert root.findtext("sqs:Error/sqs:Message", namespaces=NS)
    assert root.findtext("sqs:RequestId", namespaces=NS)


def test_plain_http_forms_gets_and_xml_errors(server: ServerThread, http: httpx.Client,
                                              sqs: Any, queue: str) -> None:
    path = queue.split("://", 1)[1].split("/", 1)[1]
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    # Posted to the queue's URL without QueueUrl: the path names the queue.
    r = http.post(f"{server.url}/{path}", headers=form, content="Action=SendMessage&"
                  "Version=2012-11-05&MessageBody=hello%20there")
    assert r.status_code == 200, r.text
    root = ET.fromstring(r.text)
    assert root.tag == f"{{{query.XMLNS}}}SendMessageResponse"
    assert root.findtext("sqs:SendMessageResult/sqs:MD5OfMessageBody", namespaces=NS) == md5(
        b"hello there")
    # A GET with a query string, as AWS accepts.
    r = http.get(f"{server.url}/{path}", params={
        "Action": "ReceiveMessage", "AttributeName.1": "All", "VisibilityTimeout": "0"})
    assert r.status_code == 200, r.text
    assert ET.fromstring(r.text).findtext(
        "sqs:ReceiveMessageResult/sqs:Message/sqs:Body", namespaces=NS) == "hello there"
    r = http.get(server.url + "/", params={"Action": "GetQueueUrl", "QueueName": "nope"})
    _error(r, 400, "AWS.SimpleQueueService.NonExistentQueue")
    _error(http.post(server.url + "/", headers=form, content="Version=2012-11-05"),
           400, "InvalidAction")
    _error(http.post(server.url + "/", headers=form, content="Action=Nonsense"),
           400, "InvalidAction")
    _error(http.post(server.url + "/", headers=form, content="Action=SendMessage&"
                     f"QueueUrl={queue}"), 400, "MissingParameter")
    _error(http.post(server.url + "/", headers=form, content=f"Action=ReceiveMessage&"
                     f"QueueUrl={queue}&MaxNumberOfMessages=ten"), 400, "InvalidParameterValue")
    _error(http.post(server.url + "/", headers=form, content=b"Action=ListQueues&x=%ff"),
           400, "InvalidParameterValue")
    # Control characters, which XML 1.0 cannot hold even escaped, quoted by an error: the
    # answer still parses (each is U+FFFD), so an SDK raises the error rather than a parse one.
    r = http.post(server.url + "/", headers=form, content="Action=List%01Queues%1b&Version=1")
    _error(r, 400, "InvalidAction")
    assert "List\ufffdQueues\ufffd" in ET.fromstring(r.text).findtext(".//sqs:Message",
                                                                     namespaces=NS)
    # A GET without an action is no SQS request.
    assert http.get(server.url + "/").status_code == 404
    assert http.get(f"{server.url}/{path}").status_code == 404


def test_aws_cli_smoke(server: ServerThread, tmp_path: Path,
                      request: pytest.FixtureRequest) -> None:
    if "postgres" in request.node.name:
        pytest.skip("the CLI smoke test is about the wire: SQLite's run covers it")
    aws = str(Path(sys.executable).parent / "aws")
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp_path / "config"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
           "AWS_MAX_ATTEMPTS": "1"}

    def cli(*args: str) -> Any:
        done = subprocess.run([aws, "--endpoint-url", server.url, "--output", "json", "sqs",
                               *args], env=env, capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    url = cli("create-queue", "--queue-name", "cli-smoke")["QueueUrl"]
    try:
        sent = cli("send-message", "--queue-url", url, "--message-body", "from the CLI")
        assert sent["MD5OfMessageBody"] == md5(b"from the CLI")
        got = cli("receive-message", "--queue-url", url, "--wait-time-seconds", "1")
        (m,) = got["Messages"]
        assert m["Body"] == "from the CLI"
        cli("delete-message", "--queue-url", url, "--receipt-handle", m["ReceiptHandle"])
    finally:
        cli("delete-queue", "--queue-url", url)
    client = client_for(server.url)
    try:
        with pytest.raises(client.exceptions.QueueDoesNotExist):
            client.get_queue_url(QueueName="cli-smoke")
    finally:
        client.close()


def test_no_query_input_is_a_500(http: httpx.Client, server: ServerThread, sqs: Any) -> None:
    """Every member of every action's Query input (by its member name and its Query names),
    given junk, alone or as the first item of a list or map: AWS errors in XML, never a 500.
    (The queue is the test's own: a DeleteQueue among the requests may remove it.)"""
    queue = sqs.create_queue(QueueName="query-fuzz")["QueueUrl"]
    model = json.loads((query.MODEL_DIR / "sqs" / "2012-11-05" / "service-2.json").read_text())
    shapes = model["shapes"]
    base = {"QueueUrl": queue, "QueueName": "n", "MessageBody": "b", "ReceiptHandle": "h"}
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for action, op in model["operations"].items():
        for member, spec in shapes[op["input"]["shape"]]["members"].items():
            target = shapes[spec["shape"]]
            names = {member, spec.get("locationName", member), target.get("locationName", member),
                     target.get("member", {}).get("locationName", member)}
            for name in names:
                for suffix in ("", ".1", ".1.Name", ".1.Value.DataType"):
                    for value in ("", "x", "-1", "99999999999999999999"):
                        r = http.post(server.url + "/", headers=form, data={
                            **base, "Action": action, name + suffix: value})
                        assert r.status_code < 500, (action, name + suffix, value, r.text)
                        if r.status_code != 200:
                            assert ET.fromstring(r.text).tag.endswith("ErrorResponse"), r.text
    with contextlib.suppress(sqs.exceptions.QueueDoesNotExist):
        sqs.delete_queue(QueueUrl=queue)
