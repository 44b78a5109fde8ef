"""Fixtures of the server tests: one client of the module's server, and a queue of one's own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest


@pytest.fixture(scope="module")
def shared(module_server: Any) -> Iterator[httpx.Client]:
    """A client of the module's server (default settings), for tests that change nothing that
    others read."""
    with httpx.Client(base_url=module_server.url, timeout=30) as client:
        yield client


@pytest.fixture
def queue(shared: httpx.Client) -> Iterator[str]:
    """A new queue of its own on the module's server, as ``/queues/<name>``."""
    name = f"t{uuid.uuid4().hex[:12]}"
    assert shared.post("/queues", json={"name": name}).status_code == 201
    yield f"/queues/{name}"
    shared.delete(f"/queues/{name}")
