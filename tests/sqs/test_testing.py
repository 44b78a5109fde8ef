"""``sqew.testing.serve()`` and the ``sqew_server`` fixture, used as a user's tests use them:
boto3 and ``sqew.Client`` on the server they start."""

from __future__ import annotations

from pathlib import Path

import pytest

import sqew
import sqew.testing

boto3 = pytest.importorskip("boto3")

pytest_plugins = ["sqew.pytest_plugin"]


def test_serve_starts_a_server_and_removes_its_database() -> None:
    with sqew.testing.serve() as server:
        assert server.url.startswith("http://127.0.0.1:")
        sqs = boto3.client("sqs", endpoint_url=server.sqs_endpoint_url,
                           region_name=server.region, aws_access_key_id="x",
                           aws_secret_access_key="x")
        url = sqs.create_queue(QueueName="orders")["QueueUrl"]
        assert url == f"{server.url}/{server.account_id}/orders"
        sqs.send_message(QueueUrl=url, MessageBody="hello")
        with sqew.Client(server.url) as rest:
            (m,) = rest.poll("orders")
            assert m.payload == "hello"
        sqs.close()
        db = Path(server.db)
        assert db.exists()
    assert not db.parent.exists()
    with pytest.raises(sqew.errors.SqewError):
        sqew.Client(server.url).list_queues()  # stopped


def test_serve_takes_settings_and_a_database(tmp_path: Path) -> None:
    db = tmp_path / "kept.db"
    with sqew.testing.serve(str(db), sqs_region="eu-west-1", require_auth=True) as server:
        assert server.region == "eu-west-1"
        with sqew.Client(server.url) as rest, pytest.raises(sqew.errors.Unauthorized):
            rest.list_queues()
    assert db.exists()  # a database given is the caller's: kept
    with pytest.raises(sqew.errors.ValidationError), sqew.testing.serve(port=8888):
        pass


def test_the_fixture(sqew_server: sqew.testing.Server) -> None:
    with sqew.Client(sqew_server.url) as rest:
        rest.create_queue("fixture")
        rest.enqueue("fixture", 1)
    sqs = boto3.client("sqs", endpoint_url=sqew_server.sqs_endpoint_url,
                       region_name=sqew_server.region, aws_access_key_id="x",
                       aws_secret_access_key="x")
    (m,) = sqs.receive_message(QueueUrl="fixture")["Messages"]
    assert m["Body"] == "1"
    sqs.close()
