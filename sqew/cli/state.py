"""What the root options decide for every command: where to connect and how to print.

The Client is built on first use, so ``--help``, ``--version`` and usage errors never open (or
create) a database file.
"""

from __future__ import annotations

import typer

from sqew import errors
from sqew.client.base import Client
from sqew.client.local import LocalClient


class State:
    """The global options of one ``sqew`` invocation and its lazily built Client.

    Args:
        db: database file path or URL (local mode).
        url: server URL (remote mode); wins over ``db`` when given.
        api_key: key sent to the server in remote mode.
        json: print the REST API's JSON instead of human output.
        ca_cert: CA certificate file to verify an ``https://`` server against.
    """

    def __init__(self, db: str, url: str | None, api_key: str | None, json: bool,
                 ca_cert: str | None = None) -> None:
        self.ca_cert = ca_cert
        self.db = db
        self.url = url
        self.api_key = api_key
        self.json = json
        self._client: Client | None = None
        self.hmac_secret: str | None = None
        """Signs enqueues in remote mode (``--hmac-secret``); a local file needs none."""

    @property
    def client(self) -> Client:
        """The Client for this invocation, opened on first use."""
        if self._client is None:
            self._client = self._open()
        return self._client

    def _open(self) -> Client:
        if self.url:
            try:
                # Client() dispatches an http(s) URL to sqew.client.http.HttpClient.
                return Client(  # type: ignore[abstract]
                    self.url, api_key=self.api_key, hmac_secret=self.hmac_secret,
                    ca_cert=self.ca_cert,
                )
            except ImportError:
                raise errors.Unavailable(
                    "this sqew cannot talk to a server: sqew.client.http is not available"
                ) from None
        return LocalClient(self.db)

    def close(self) -> None:
        """Close the Client if one was opened."""
        if self._client is not None:
            client, self._client = self._client, None
            client.close()


def current(ctx: typer.Context) -> State:
    """The State of the running command (set by the root callback on the root context)."""
    state = ctx.find_object(State)
    if state is None:  # only when a command is invoked without the root app
        raise errors.InternalError("sqew command run outside the sqew app")
    return state
