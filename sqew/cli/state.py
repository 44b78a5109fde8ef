"""What the root options decide for every command: where to connect and how to print.

The Client is built on first use, so ``--help``, ``--version`` and usage errors never open (or
create) a database file. Only the commands that make something (``queue add``, ``keys
create``, ``db upgrade``, ``serve``) create a missing database; every other command refuses
one with an error that names the path (a mistyped ``--db`` is not a new, empty store). A file
this user may read but not write is opened read-only: reads work, a write says so.
"""

from __future__ import annotations

import os

import typer

from sqew import errors, locations
from sqew.client.base import Client


class State:
    """The global options of one ``sqew`` invocation and its lazily built Client.

    Args:
        db: database file path or URL (local mode).
        url: server URL (remote mode); wins over ``db`` when given.
        api_key: key sent to the server in remote mode.
        json: print the REST API's JSON instead of human output.
        ca_cert: CA certificate file to verify an ``https://`` server against.
        wide: print tables whole, whatever the terminal's width (``--wide``).
    """

    def __init__(self, db: str, url: str | None, api_key: str | None, json: bool,
                 ca_cert: str | None = None, wide: bool = False) -> None:
        self.ca_cert = ca_cert
        self.wide = wide
        self.db = db
        self.url = url
        self.api_key = api_key
        self.json = json
        self._client: Client | None = None
        self.hmac_secret: str | None = None
        """Signs enqueues in remote mode (``--hmac-secret``); a local file needs none."""
        self.create = False
        """Whether the command may create a missing database (``current(ctx, create=True)``)."""

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
        # Imported here: a command on a server (--url) has no use for the local service.
        from sqew.client.local import LocalClient

        return LocalClient(self.db, create=self.create, read_only=_read_only(self.db))

    def close(self) -> None:
        """Close the Client if one was opened."""
        if self._client is not None:
            client, self._client = self._client, None
            client.close()


def current(ctx: typer.Context, *, create: bool = False) -> State:
    """The State of the running command (set by the root callback on the root context);
    ``create``: the command makes something, and may create a missing database for it."""
    state = ctx.find_object(State)
    if state is None:  # only when a command is invoked without the root app
        raise errors.InternalError("sqew command run outside the sqew app")
    state.create = create
    return state


def _read_only(db: str) -> bool:
    """Whether ``db`` is a SQLite file that exists and this user may not write (it, or the
    directory its ``-wal`` and ``-shm`` files go to)."""
    path = locations.sqlite_path(db)
    if not path or not os.path.exists(path):
        return False
    folder = os.path.dirname(os.path.abspath(path))
    return not (os.access(path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK))
