"""SigV4 on the SQS endpoint while API keys are enforced: keys from ``keys create --sqs``,
requests signed by boto3 itself (and by botocore's signer where a test needs a request boto3
would never send: a stale one, one without ``host``), on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from targets import ServerThread

import sqew

boto3 = pytest.importorskip("boto3")
from botocore.auth import SigV4Auth, SigV4QueryAuth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

from .conftest import BACKENDS, served  # noqa: E402

REGION = "us-east-1"


@pytest.fixture(scope="module", params=BACKENDS)
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """A server of this module's own: its keys turn auth on."""
    with served(request.param, tmp_path_factory.mktemp("sigv4")) as thread:
        yield thread


@pytest.fixture(scope="module")
def rest(server: ServerThread) -> Iterator[sqew.Client]:
    """An admin REST client (the first key is minted open, then keys are enforced)."""
    with sqew.Client(server.url) as open_client:
        admin = open_client.create_key(["admin"], name="root").key
    with sqew.Client(server.url, api_key=admin) as client:
        yield client


def sqs_client(url: str, key_id: str, secret: str, region: str = REGION) -> Any:
    return boto3.client("sqs", endpoint_url=url, region_name=region,
                        aws_access_key_id=key_id, aws_secret_access_key=secret,
                        config=Config(retries={"total_max_attempts": 1}))


@pytest.fixture
def clients(server: ServerThread) -> Iterator[Callable[..., Any]]:
    """Makes boto3 SQS clients, closed after the test."""
    made: list[Any] = []

    def make(key_id: str, secret: str, region: str = REGION) -> Any:
        made.append(sqs_client(server.url, key_id, secret, region))
        return made[-1]

    yield make
    for c in made:
        c.close()


def code_of(call: Callable[[], Any]) -> tuple[str, int]:
    with pytest.raises(boto3.client("sqs", region_name=REGION).exceptions.ClientError) as err:
        call()
    r = err.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


class _SignedAt(SigV4Auth):
    """botocore's signer, at a time of the test's choosing (``headers``: the names to sign,
    by default botocore's choice)."""

    def __init__(self, creds: Credentials, when: dt.datetime,
                 headers: list[str] | None = None) -> None:
        super().__init__(creds, "sqs", REGION)
        self.when, self.names = when, headers

    def add_auth(self, request: AWSRequest) -> None:
        request.context["timestamp"] = self.when.strftime("%Y%m%dT%H%M%SZ")
        self._modify_request_before_signing(request)
        canonical = self.canonical_request(request)
        signature = self.signature(self.string_to_sign(request, canonical), request)
        self._inject_signature_to_request(request, signature)

    def headers_to_sign(self, request: AWSRequest) -> Any:
        got = super().headers_to_sign(request)
        if self.names is not None:
            for name in list(got.keys()):
                if name not in self.names:
                    del got[name]
        return got


class _PresignedAt(SigV4QueryAuth):
    """botocore's presigner, at a time of the test's choosing."""

    def __init__(self, creds: Credentials, when: dt.datetime, expires: int) -> None:
        super().__init__(creds, "sqs", REGION, expires=expires)
        self.when = when

    add_auth = _SignedAt.add_auth


def list_queues_request(url: str, body: bytes = b"{}") -> AWSRequest:
    return AWSRequest(method="POST", url=url + "/", data=body, headers={
        "X-Amz-Target": "AmazonSQS.ListQueues",
        "Content-Type": "application/x-amz-json-1.0"})


def send(request: AWSRequest) -> httpx.Response:
    prepared = request.prepare()
    return httpx.request(prepared.method, prepared.url, headers=dict(prepared.headers),
                         content=prepared.body)


def test_a_signed_client_works_and_others_are_refused(
        rest: sqew.Client, server: ServerThread, clients: Callable[..., Any]) -> None:
    key = rest.create_key(["admin"], sqs=True)
    assert key.sqs and len(key.id) == 20 and len(key.key) == 40
    good = clients(key.id, key.key)
    url = good.create_queue(QueueName="signed")["QueueUrl"]
    good.send_message(QueueUrl=url, MessageBody="hello")
    (m,) = good.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert m["Body"] == "hello"
    good.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert code_of(lambda: clients(key.id, "x" * 40).list_queues()) == (
        "SignatureDoesNotMatch", 403)
    assert code_of(lambda: clients("SQEWAAAAAAAAAAAAAAAA", key.key).list_queues()) == (
        "InvalidClientTokenId", 403)
    assert code_of(lambda: clients(key.id, key.key, "eu-west-1").list_queues()) == (
        "SignatureDoesNotMatch", 403)
    # A bearer key's id is no SQS key, and an SQS secret is no bearer key.
    bearer = rest.create_key(["admin"])
    assert code_of(lambda: clients(bearer.id, bearer.key).list_queues())[0] == \
        "InvalidClientTokenId"
    with sqew.Client(server.url, api_key=key.key) as wrong, \
            pytest.raises(sqew.errors.Unauthorized):
        wrong.list_queues()
    listed = {k.id: k.sqs for k in rest.list_keys()}
    assert listed[key.id] is True and listed[bearer.id] is False
    rest.revoke_key(key.id)  # stops working at once in this process
    assert code_of(good.list_queues) == ("InvalidClientTokenId", 403)
    rest.delete_queue("signed")


def test_unsigned_stale_and_incomplete_requests_get_awss_errors(
        rest: sqew.Client, server: ServerThread) -> None:
    key = rest.create_key(["admin"], sqs=True)
    creds = Credentials(key.id, key.key)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)

    r = httpx.post(server.url + "/", content=b"{}", headers={
        "X-Amz-Target": "AmazonSQS.ListQueues", "Content-Type": "application/x-amz-json-1.0"})
    assert (r.status_code, r.json()["__type"]) == (
        403, "com.amazonaws.sqs#MissingAuthenticationToken")

    def signed(when: dt.datetime, headers: list[str] | None = None,
               body: bytes = b"{}") -> AWSRequest:
        request = list_queues_request(server.url, body)
        _SignedAt(creds, when, headers).add_auth(request)
        return request

    assert send(signed(now)).status_code == 200  # the oracle signs as the server checks
    for when in (now - dt.timedelta(minutes=16), now + dt.timedelta(minutes=16)):
        r = send(signed(when))
        assert (r.status_code, r.headers["x-amzn-query-error"]) == (
            400, "RequestExpired;Sender")
    r = send(signed(now, headers=["x-amz-date", "x-amz-target"]))
    assert r.json()["__type"].endswith("#IncompleteSignature") and r.status_code == 400
    tampered = signed(now, body=b'{"QueueNamePrefix": "a"}')
    tampered.data = b'{"QueueNamePrefix": "b"}'
    assert send(tampered).json()["__type"].endswith("#SignatureDoesNotMatch")
    lying = signed(now)
    lying.headers["X-Amz-Content-SHA256"] = "0" * 64
    _SignedAt(creds, now).add_auth(lying)  # signed with a hash that is not the body's
    assert send(lying).json()["__type"].endswith("#SignatureDoesNotMatch")
    r = httpx.post(server.url + "/", content=b"{}", headers={
        "Authorization": "AWS4-HMAC-SHA256 Credential=x", "X-Amz-Date": "20260101T000000Z"})
    assert r.json()["__type"].endswith("#IncompleteSignature")


def test_presigned_urls(rest: sqew.Client, server: ServerThread) -> None:
    key = rest.create_key(["admin"], sqs=True)
    creds = Credentials(key.id, key.key)
    rest.create_queue("presigned")
    try:
        request = list_queues_request(server.url)
        SigV4QueryAuth(creds, "sqs", REGION, expires=60).add_auth(request)
        assert "X-Amz-Signature=" in request.url
        r = send(request)
        assert r.status_code == 200, r.text
        assert any(u.endswith("/presigned") for u in r.json()["QueueUrls"])
        forged = request.url.replace("X-Amz-Expires=60", "X-Amz-Expires=600")
        r = httpx.post(forged, content=b"{}", headers={
            "X-Amz-Target": "AmazonSQS.ListQueues",
            "Content-Type": "application/x-amz-json-1.0"})
        assert r.json()["__type"].endswith("#SignatureDoesNotMatch")
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        late = list_queues_request(server.url)
        _PresignedAt(creds, now - dt.timedelta(seconds=120), expires=60).add_auth(late)
        r = send(late)
        assert (r.status_code, r.json()["__type"]) == (400, "com.amazonaws.sqs#RequestExpired")
        still = list_queues_request(server.url)  # signed long ago, valid for longer still
        _PresignedAt(creds, now - dt.timedelta(hours=1), expires=7200).add_auth(still)
        assert send(still).status_code == 200
    finally:
        rest.delete_queue("presigned")


def test_scopes_and_queue_bindings_apply_as_on_rest(
        rest: sqew.Client, clients: Callable[..., Any]) -> None:
    rest.create_queue("bound-a")
    rest.create_queue("bound-b")
    try:
        key = rest.create_key(["produce"], queue="bound-a", sqs=True)
        sqs = clients(key.id, key.key)
        url_a = sqs.get_queue_url(QueueName="bound-a")["QueueUrl"]
        sqs.send_message(QueueUrl=url_a, MessageBody="ok")
        assert rest.stats("bound-a").ready == 1
        urls = sqs.list_queues()["QueueUrls"]
        assert sorted(u.rsplit("/", 1)[1] for u in urls) == ["bound-a", "bound-a.dlq"]
        denied = [
            lambda: sqs.receive_message(QueueUrl=url_a),          # no consume scope
            lambda: sqs.send_message(QueueUrl=url_a.replace("bound-a", "bound-b"),
                                     MessageBody="no"),          # another queue
            lambda: sqs.send_message(QueueUrl=url_a + ".dlq", MessageBody="no"),  # admin
            lambda: sqs.get_queue_url(QueueName="bound-b"),
            lambda: sqs.create_queue(QueueName="bound-c"),
            lambda: sqs.purge_queue(QueueUrl=url_a),
        ]
        for call in denied:
            assert code_of(call) == ("AccessDenied", 403)
        assert rest.stats("bound-b").ready == 0
        rest.delete_queue("bound-a")  # and with it the keys bound to it
        rest.create_queue("bound-a")  # a new queue of the name is not theirs
        assert code_of(lambda: sqs.send_message(QueueUrl=url_a, MessageBody="no")) == (
            "InvalidClientTokenId", 403)
    finally:
        rest.delete_queue("bound-a")
        rest.delete_queue("bound-b")


def test_failed_signatures_count_like_failed_keys(
        start_server: Callable[..., ServerThread]) -> None:
    server = start_server(auth_failures_per_minute=3)
    with sqew.Client(server.url) as open_client:
        key = open_client.create_key(["admin"], sqs=True)
    good = sqs_client(server.url, key.id, key.key)
    bad = sqs_client(server.url, key.id, "y" * 40)
    try:
        good.list_queues()
        for _ in range(3):
            assert code_of(bad.list_queues)[0] == "SignatureDoesNotMatch"
        assert code_of(good.list_queues)[0] == "RequestThrottled"  # the address is spent
        r = httpx.get(server.url + "/queues", headers={"Authorization": "Bearer nope"})
        assert r.status_code == 429  # the same bucket as REST's failures
    finally:
        good.close()
        bad.close()
