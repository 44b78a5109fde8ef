"""sqew: a lightweight, reliable at-least-once message queue.

``Client(target)`` talks to a SQLite file (the embedded default) or a sqew server.
"""

from __future__ import annotations

from sqew import errors
from sqew.client.base import Client
from sqew.client.local import LocalClient
from sqew.core.signing import verify_signature
from sqew.errors import SqewError
from sqew.models import EnqueueResult, ItemResult, LeasedMessage, Message, Queue, Stats

__version__ = "0.1.0"

__all__ = [
    "Client",
    "EnqueueResult",
    "ItemResult",
    "LeasedMessage",
    "LocalClient",
    "Message",
    "Queue",
    "SqewError",
    "Stats",
    "__version__",
    "errors",
    "verify_signature",
]
