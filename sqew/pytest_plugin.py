"""A pytest plugin with a real sqew server per test (docs/sqs.md, "For tests and development").

Enable it in a ``conftest.py`` with ``pytest_plugins = ["sqew.pytest_plugin"]``; then::

    def test_orders(sqew_server):
        sqs = boto3.client("sqs", endpoint_url=sqew_server.sqs_endpoint_url, ...)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sqew import testing


@pytest.fixture
def sqew_server() -> Iterator[testing.Server]:
    """A server on a fresh throwaway database for the test (``sqew.testing.serve()``),
    stopped after it."""
    with testing.serve() as server:
        yield server
