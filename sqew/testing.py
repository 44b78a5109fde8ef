"""A real sqew server for your own tests (docs/sqs.md, "For tests and development").

``serve()`` starts the whole server (REST API and SQS endpoint) in a thread of the calling
process, on a free port of 127.0.0.1, on a throwaway database (``sqew.scratch``) unless given
one, and stops it on exit::

    import boto3, sqew, sqew.testing

    with sqew.testing.serve() as server:
        sqs = boto3.client("sqs", endpoint_url=server.sqs_endpoint_url,
                           region_name=server.region, aws_access_key_id="x",
                           aws_secret_access_key="x")
        with sqew.Client(server.url) as rest:
            ...

For pytest, the plugin ``sqew.pytest_plugin`` gives the fixture ``sqew_server``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

START_S = 30.0
"""How long a server may take to start (its database created) before ``serve`` gives up."""


@dataclass(frozen=True)
class Server:
    """A running server: where to reach it."""

    url: str
    """The REST API's base URL (for ``sqew.Client``), ``http://127.0.0.1:<port>``."""
    sqs_endpoint_url: str
    """The SQS endpoint, for an AWS SDK's ``endpoint_url`` (the same port)."""
    region: str
    """The region the SQS endpoint signs and names queues' ARNs with."""
    account_id: str
    """The account id in queue URLs and ARNs."""
    db: str
    """The database it serves."""


@contextlib.contextmanager
def serve(db: str | None = None, **settings: Any) -> Iterator[Server]:
    """Run a server on 127.0.0.1 and a free port until the block ends.

    Args:
        db: the database (a file, or a PostgreSQL URL); default: a throwaway one, removed when
            the server stops.
        settings: any other server setting by name (``require_auth=True``,
            ``sqs_region="eu-west-1"``, …: docs/cli.md). ``host``, ``port`` and ``workers``
            are this function's to choose.

    Raises:
        sqew.errors.ValidationError: a setting is unknown or out of range.
        sqew.errors.Unavailable: the server could not start.
    """
    from sqew import errors, scratch

    for fixed in ("host", "port", "workers"):
        if fixed in settings:
            raise errors.ValidationError(f"sqew.testing.serve() chooses {fixed} itself")
    with contextlib.ExitStack() as stack:
        where = db if db is not None else str(stack.enter_context(scratch.database()))
        yield stack.enter_context(_running(where, settings))


@contextlib.contextmanager
def _running(db: str, settings: dict[str, Any]) -> Iterator[Server]:
    import uvicorn

    from sqew import errors
    from sqew.server import runner, uvicorn_range
    from sqew.server.app import create_app
    from sqew.settings import from_mapping

    effective = from_mapping({"log_level": "warning", **settings, "db": db,
                              "host": "127.0.0.1", "port": 0, "workers": 1})
    uvicorn_range.check()
    app = create_app(effective)
    sock = runner.bind("127.0.0.1", 0)
    try:
        server = uvicorn.Server(runner.uvicorn_config(effective, app=app))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                                  name="sqew-testing-server", daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + START_S
            while not server.started:
                if not thread.is_alive() or time.monotonic() > deadline:
                    raise errors.Unavailable("the sqew test server did not start")
                time.sleep(0.01)
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            yield Server(url=url, sqs_endpoint_url=url, region=effective.sqs_region,
                         account_id=effective.sqs_account_id, db=db)
        finally:
            server.should_exit = True
            thread.join(START_S)
    finally:
        sock.close()
