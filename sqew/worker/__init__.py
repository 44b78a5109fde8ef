"""Consumers built on ``sqew.Client``: the ``Worker`` (poll, handle, ack; docs/consumers.md).

``runner.py`` is the Worker and ``Reject``; ``held.py`` the leases it holds and their
heartbeats; ``settle.py`` its batched acks and nacks; ``signals.py`` SIGINT/SIGTERM as a stop.
Like the CLI, it reaches the queue through a Client only, so it works the same on a file,
PostgreSQL or a server.
"""

from __future__ import annotations

from sqew.worker.runner import Handler, Reject, Retry, Worker

__all__ = ["Handler", "Reject", "Retry", "Worker"]
