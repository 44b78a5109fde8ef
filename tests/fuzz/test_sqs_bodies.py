"""The SQS endpoint (docs/sqs.md) on malformed requests: AWS's error shapes, never a 500.

Generated requests — random bytes, invalid UTF-8, truncated or deeply nested JSON, NUL bytes,
junk members, every action name and some that are not, form bodies with junk parameters for
the Query protocol — are posted to ``/`` and to a queue's URL on a live server on 127.0.0.1.
Every answer is below 500 and, when refused, AWS's error shape: JSON with ``__type`` and
``message`` plus the ``x-amzn-query-error`` header on the JSON protocol, an XML
``<ErrorResponse>`` with a ``<Code>`` on the Query protocol; no traceback in either. A refused
SendMessage or SendMessageBatch enqueued nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlencode
from xml.etree import ElementTree

import httpx
import pytest
from fuzz_support import broken, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from targets import ServerThread, server_settings

import sqew
from sqew.sqs import service

QUEUE = "jobs"
ACCOUNT_PATH = "/123456789012/" + QUEUE
SENDS = {"SendMessage", "SendMessageBatch"}

JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.text(max_size=12),
              st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(
            ["QueueUrl", "QueueName", "MessageBody", "Entries", "Id", "ReceiptHandle",
             "MaxNumberOfMessages", "WaitTimeSeconds", "VisibilityTimeout", "Attributes",
             "AttributeNames", "MessageAttributes", "DataType", "StringValue", "BinaryValue",
             "DelaySeconds", "Tags", "x"]), inner, max_size=5)),
    max_leaves=12)


def actions() -> st.SearchStrategy[str]:
    """An action of botocore's SQS model, or a name that is not one."""
    return st.one_of(st.sampled_from(sorted(service.operations())),
                     st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=20))


@st.composite
def json_bodies(draw: st.DrawFn) -> bytes:
    """A JSON 1.0 body a client might send by mistake (or on purpose)."""
    base = {"QueueUrl": draw(st.sampled_from([ACCOUNT_PATH, QUEUE, "", "http://x/1/nope"]))}
    base.update(draw(st.dictionaries(st.sampled_from(
        ["MessageBody", "Entries", "ReceiptHandle", "MaxNumberOfMessages", "WaitTimeSeconds",
         "VisibilityTimeout", "Attributes", "MessageAttributes", "QueueName", "Tags"]),
        JSONISH, max_size=4)))
    _no_wait(base)
    text = json.dumps(base).encode()
    kind = draw(st.sampled_from(["json", "random", "utf8", "truncated", "nul", "deep"]))
    if kind in ("random", "utf8", "truncated", "nul"):
        return broken(draw, text, kind)
    if kind == "deep":
        depth = draw(st.integers(20, 3000))
        return b'{"MessageBody": "x", "MessageAttributes": ' + b"[" * depth + b"]" * depth + b"}"
    return text


@st.composite
def forms(draw: st.DrawFn) -> bytes:
    """A Query protocol form: an action, junk parameters, sometimes bytes that are no form."""
    params = {"Action": draw(actions()), "Version": "2012-11-05",
              "QueueUrl": draw(st.sampled_from([ACCOUNT_PATH, QUEUE, ""]))}
    params.update(draw(st.dictionaries(st.sampled_from(
        ["MessageBody", "MaxNumberOfMessages", "WaitTimeSeconds", "AttributeName.1",
         "MessageAttribute.1.Name", "MessageAttribute.1.Value.DataType",
         "SendMessageBatchRequestEntry.1.Id", "SendMessageBatchRequestEntry.1.MessageBody",
         "ReceiptHandle", "VisibilityTimeout", "Attribute.1.Name", "Attribute.1.Value"]),
        st.text(max_size=30), max_size=5)))
    _no_wait(params)
    body = urlencode(params).encode()
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(body)))
        body = body[:cut] + draw(st.binary(max_size=20)) + body[cut:]
    return body


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    db = tmp_path_factory.mktemp("sqs-fuzz") / "sqew.db"
    with sqew.Client(str(db)) as client:
        client.create_queue(QUEUE)
    thread = ServerThread(server_settings(db))
    yield thread
    thread.stop()


def _enqueued(server: ServerThread) -> int:
    """The queue's enqueued total (made again if an example deleted it)."""
    with sqew.Client(server.url) as client:
        try:
            return client.stats(QUEUE).enqueued_total
        except sqew.errors.QueueNotFound:
            client.create_queue(QUEUE)
            return 0


def _no_wait(params: dict[str, object]) -> None:
    """A receive that would wait its whole time on the empty queue takes 0 instead: the wait
    is tested elsewhere, and here it would only slow every example."""
    if "WaitTimeSeconds" in params:
        params["WaitTimeSeconds"] = 0


@fuzz_settings(examples=40)
@given(action=actions(), body=json_bodies(), path=st.sampled_from(["/", ACCOUNT_PATH]),
       content_type=st.sampled_from(["application/x-amz-json-1.0", "application/json", ""]))
def test_malformed_json_requests_get_aws_errors(
    action: str, body: bytes, path: str, content_type: str, server: ServerThread,
) -> None:
    before = _enqueued(server)
    headers = {"X-Amz-Target": f"AmazonSQS.{action}"}
    if content_type:
        headers["Content-Type"] = content_type
    answer = httpx.post(server.url + path, content=body, headers=headers, timeout=30)
    shown = f"{action} {path} {body[:300]!r} -> {answer.status_code} {answer.text[:300]}"
    assert answer.status_code < 500 or answer.status_code == 503, shown
    assert "Traceback" not in answer.text, shown
    if answer.status_code >= 400:
        error = answer.json()
        assert str(error.get("__type")).startswith("com.amazonaws.sqs#"), shown
        assert isinstance(error["message"], str), shown
        assert ";" in answer.headers["x-amzn-query-error"], shown
        if action in SENDS:
            assert _enqueued(server) == before, shown


@fuzz_settings(examples=40)
@given(body=forms(), path=st.sampled_from(["/", ACCOUNT_PATH]))
def test_malformed_query_requests_get_xml_errors(
    body: bytes, path: str, server: ServerThread,
) -> None:
    answer = httpx.post(server.url + path, content=body, timeout=30,
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    shown = f"{path} {body[:300]!r} -> {answer.status_code} {answer.text[:300]}"
    assert answer.status_code < 500 or answer.status_code == 503, shown
    assert "Traceback" not in answer.text, shown
    try:
        root = ElementTree.fromstring(answer.content)  # every answer is XML
    except ElementTree.ParseError as exc:
        raise AssertionError(f"not XML ({exc}): {shown}") from None
    if answer.status_code >= 400:
        assert root.tag.endswith("ErrorResponse"), shown
        codes = [e.text for e in root.iter() if e.tag.endswith("Code")]
        assert codes and codes[0], shown
