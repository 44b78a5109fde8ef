"""Helpers for the auth tests: keys minted straight into a database file, headers that carry them.

Minting goes through ``QueueService`` on the file (argon2 hashing, ~100 ms a key), as the owner
of the file does with ``sqew keys create``: a server that requires keys can then be started with
one already there.
"""

from __future__ import annotations

from pathlib import Path

from sqew import models
from sqew.backends import open_backend
from sqew.core.service import QueueService
from sqew.core.writer import run_sync


def mint(db: Path, *scopes: str, queue: str | None = None, name: str | None = None
         ) -> models.KeyCreated:
    """A new key in the database file ``db`` (created if needed); ``queue`` must exist."""
    service = QueueService(open_backend(str(db), upgrade=True))
    try:
        spec = models.KeyCreate(scopes=list(scopes), queue=queue, name=name)  # type: ignore[arg-type]
        return run_sync(service.create_key(spec))
    finally:
        service.close()


def create_queue(db: Path, name: str) -> None:
    """A queue in the database file ``db`` (so that a key can be bound to it)."""
    service = QueueService(open_backend(str(db), upgrade=True))
    try:
        run_sync(service.create_queue(models.QueueCreate(name=name)))
    finally:
        service.close()


def bearer(key: str) -> dict[str, str]:
    """The header that sends ``key``."""
    return {"Authorization": f"Bearer {key}"}
