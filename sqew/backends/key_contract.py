"""The API keys' part of the storage contract (``sqew.backends.base.Tx``): a key is stored as
its argon2 hash with what it may do (``sqew.core.keys``); these statements keep the rows."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from sqew.backends.rows import KeyRow


class KeyStatementsContract(abc.ABC):
    """The statements of a transaction on the ``api_keys`` table (a part of ``Tx``)."""

    @abc.abstractmethod
    def insert_key(self, row: KeyRow) -> None:
        """Store a new API key (its hash, never the key)."""

    @abc.abstractmethod
    def get_key(self, key_id: str) -> KeyRow | None:
        """The API key with id ``key_id``, or None."""

    @abc.abstractmethod
    def list_keys(self) -> list[KeyRow]:
        """Every API key, oldest first."""

    @abc.abstractmethod
    def delete_key(self, key_id: str) -> bool:
        """Remove an API key; True if there was one."""

    @abc.abstractmethod
    def delete_keys_of_queue(self, queue: str) -> int:
        """Remove the API keys bound to ``queue``; returns how many."""

    @abc.abstractmethod
    def auth_required(self) -> bool:
        """Whether API keys are enforced on this database: a key exists, or one existed
        (the ``auth_required`` setting, set with the first key and kept when every key is
        gone)."""

    @abc.abstractmethod
    def set_auth_required(self, required: bool) -> None:
        """Set the database's ``auth_required`` setting."""

    @abc.abstractmethod
    def touch_keys(self, used: Sequence[tuple[str, int]]) -> None:
        """Set ``last_used_at`` of keys from (key id, time) pairs (ids gone meanwhile are
        skipped)."""
