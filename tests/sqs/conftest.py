"""One real server per backend (SQLite, PostgreSQL) for the directory, a boto3 SQS client on
it, and a fresh queue per test (tests share the server, never a queue).

The client is boto3's own, unchanged but for ``endpoint_url``: what a user points at sqew.
Its retries are off, so that an error answer reaches the test as it was given.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import targets
from targets import ServerThread, server_settings

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402

_names = itertools.count()


BACKENDS = [pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]


@contextlib.contextmanager
def served(backend: str, directory: Path) -> Iterator[ServerThread]:
    """A server on a fresh store of ``backend`` (``sqlite`` or ``postgres``) in
    ``directory``; stopped, and its store dropped, after."""
    store = targets.sqlite(directory) if backend == "sqlite" else targets.postgres(directory)
    thread = ServerThread(server_settings(store.url))
    try:
        yield thread
    finally:
        thread.stop()
        store.drop()


@pytest.fixture(scope="package", params=BACKENDS)
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """A server on a fresh store of the backend, shared by the directory's tests."""
    with served(request.param, tmp_path_factory.mktemp("sqs")) as thread:
        yield thread


def client_for(url: str) -> Any:
    """boto3's SQS client on ``url`` (any credentials: auth is off; retries off)."""
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"total_max_attempts": 1}))


@pytest.fixture(scope="package")
def sqs(server: ServerThread) -> Iterator[Any]:
    """boto3's SQS client on the server (closed first: an open connection would hold up the
    server's graceful stop)."""
    client = client_for(server.url)
    yield client
    client.close()


@pytest.fixture
def queue(sqs: Any) -> Iterator[str]:
    """The URL of a fresh queue, deleted after the test."""
    url: str = sqs.create_queue(QueueName=f"q{next(_names)}")["QueueUrl"]
    yield url
    sqs.delete_queue(QueueUrl=url)


def md5(data: bytes) -> str:
    """Hex MD5 of ``data``."""
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def attributes_md5(attributes: dict[str, dict[str, Any]]) -> str:
    """MD5OfMessageAttributes as AWS documents it, computed from boto3's own view of the
    attributes: sorted by name; name, data type and value each length-prefixed (4 bytes, big
    endian), a transport byte (1 string, 2 binary) before the value."""
    out = b""
    for name in sorted(attributes):
        a = attributes[name]
        data_type = a["DataType"]
        out += struct.pack(">I", len(name.encode())) + name.encode()
        out += struct.pack(">I", len(data_type.encode())) + data_type.encode()
        if data_type.startswith("Binary"):
            value = a["BinaryValue"]
            out += b"\x02" + struct.pack(">I", len(value)) + value
        else:
            value = a["StringValue"].encode()
            out += b"\x01" + struct.pack(">I", len(value)) + value
    return md5(out)

