"""The JSON 1.0 protocol over plain HTTP: AWS's error shapes for every malformed request, the
queue-URL path, and the refusal while API keys are enforced."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from targets import ServerThread

import sqew
from sqew.server import openapi

from .conftest import client_for

JSON_1_0 = "application/x-amz-json-1.0"


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """One connection pool for the module (a client per request costs milliseconds)."""
    with httpx.Client() as client:
        yield client


def post(http: httpx.Client, url: str, target: str | None, body: bytes | str,
         path: str = "/") -> httpx.Response:
    headers = {"Content-Type": JSON_1_0}
    if target is not None:
        headers["X-Amz-Target"] = target
    return http.post(url + path, content=body, headers=headers)


def assert_error(r: httpx.Response, status: int, code: str, legacy: str | None = None) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == JSON_1_0
    body = r.json()
    assert body["__type"] == f"com.amazonaws.sqs#{code}"
    assert body["message"]
    assert r.headers["x-amzn-query-error"] == f"{legacy or code};Sender"
    assert r.headers["x-amzn-requestid"]


@pytest.mark.parametrize(("target", "body", "code"), [
    ("AmazonSQS.Nonsense", "{}", "InvalidAction"),
    ("Other.ListQueues", "{}", "InvalidAction"),
    (None, "Action=ListQueues", "InvalidAction"),
    ("AmazonSQS.ListQueues", "{not json", "SerializationException"),
    ("AmazonSQS.ListQueues", "[1]" * 1, "InvalidParameterValue"),
    ("AmazonSQS.ListQueues", "[" * 10_000 + "]" * 10_000, "SerializationException"),
    ("AmazonSQS.ListQueues", '{"MaxResults": "ten"}', "InvalidParameterValue"),
    ("AmazonSQS.ListQueues", '{"MaxResults": true}', "InvalidParameterValue"),
    ("AmazonSQS.SendMessage", '{"QueueUrl": "q"}', "MissingParameter"),
    ("AmazonSQS.SendMessage", '{"QueueUrl": 5, "MessageBody": "b"}', "InvalidParameterValue"),
    ("AmazonSQS.SendMessage", '{"QueueUrl": "q", "MessageBody": "b", "MessageAttributes": '
     '{"a": {"DataType": "Binary", "BinaryValue": "%%%"}}}', "InvalidParameterValue"),
    ("AmazonSQS.SendMessage", '{"QueueUrl": "q", "MessageBody": "b", "MessageAttributes": '
     '{"a": {"StringValue": "v"}}}', "MissingParameter"),
    ("AmazonSQS.SendMessageBatch", '{"QueueUrl": "q", "Entries": {}}', "InvalidParameterValue"),
    ("AmazonSQS.GetQueueAttributes", '{"QueueUrl": "q", "AttributeNames": ["Bad"]}',
     "InvalidAttributeName"),
    ("AmazonSQS.StartMessageMoveTask", '{"SourceArn": "arn:aws:sqs:us-east-1:1:q"}',
     "InvalidParameterValue"),
])
def test_malformed_requests_get_aws_errors(http: httpx.Client, server: ServerThread,
                                           target: str | None, body: str, code: str) -> None:
    legacy = "AWS.SimpleQueueService.UnsupportedOperation" if code == "UnsupportedOperation" \
        else None
    assert_error(post(http, server.url, target, body), 400, code, legacy)


def test_requests_to_a_queue_url_path(http: httpx.Client, server: ServerThread, sqs: Any,
                                      queue: str) -> None:
    path = "/" + "/".join(queue.rsplit("/", 2)[1:])
    r = post(http, server.url, "AmazonSQS.SendMessage",
             json.dumps({"QueueUrl": queue, "MessageBody": "by path"}), path)
    assert r.status_code == 200 and r.headers["content-type"] == JSON_1_0
    assert r.json()["MessageId"]
    assert sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"] == "by path"


def test_no_input_is_a_500(http: httpx.Client, server: ServerThread, queue: str) -> None:
    """Every member of every action's input, given values of every wrong kind: AWS errors,
    never a 500."""
    from botocore.loaders import Loader

    model = Loader().load_service_model("sqs", "service-2")
    values: list[Any] = [None, -1, 2**70, 1.5, "", [], {}, [{}], {"a": {}}, True]
    base = {"QueueUrl": queue, "QueueName": "n", "MessageBody": "b", "ReceiptHandle": "h"}
    for action, op in model["operations"].items():
        for member in model["shapes"][op["input"]["shape"]]["members"]:
            for value in values:
                body = json.dumps({**base, member: value})
                r = post(http, server.url, f"AmazonSQS.{action}", body)
                assert r.status_code < 500, (action, member, value, r.text)
                if r.status_code != 200:
                    assert r.json()["__type"].startswith("com.amazonaws.sqs#")


def test_sqs_routes_are_not_in_the_rest_openapi_document(server: ServerThread) -> None:
    paths = openapi.document(server.app)["paths"]
    assert "/queues" in paths
    assert "/" not in paths and not any(p.startswith("/{account") for p in paths)


def test_with_api_keys_unsigned_or_unknown_sqs_requests_are_refused(
        start_server: Callable[..., ServerThread]) -> None:
    server = start_server()
    with sqew.Client(server.url) as rest:
        rest.create_queue("guarded")
        rest.create_key(scopes=["admin"])  # from now on keys are enforced
    r = httpx.post(server.url + "/", content=b"{}", headers={
        "X-Amz-Target": "AmazonSQS.ListQueues", "Content-Type": "application/x-amz-json-1.0"})
    assert (r.status_code, r.headers["x-amzn-query-error"]) == (
        403, "MissingAuthenticationToken;Sender")
    sqs = client_for(server.url)  # signed, with a key id the server never issued
    for call in (sqs.list_queues,  # (closed below: its connection would hold the server's stop)
                 lambda: sqs.send_message(QueueUrl="guarded", MessageBody="b"),
                 lambda: sqs.receive_message(QueueUrl="guarded")):
        with pytest.raises(sqs.exceptions.ClientError) as err:
            call()
        assert err.value.response["Error"]["Code"] == "InvalidClientTokenId"
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    sqs.close()


def test_a_queue_url_path_is_otherwise_an_unknown_path(http: httpx.Client,
                                                         server: ServerThread) -> None:
    for method in ("GET", "PUT", "DELETE", "PATCH", "POST"):
        r = http.request(method, server.url + "/123456789012/q")
        assert r.status_code == 404 and r.json()["error"]["code"] == "NotFound", (method, r.text)
    r = http.post(server.url + "/123456789012/q", content="Action=SendMessage",
                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    # A form is the Query protocol: the path names the queue, and the answer is XML.
    assert r.status_code == 400 and "<Code>MissingParameter</Code>" in r.text, r.text
