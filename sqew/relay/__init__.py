"""The webhook relay: each message of a queue POSTed to a URL (docs/consumers.md).

``runner.py`` is ``Relay``, a ``sqew.Worker`` whose handler delivers; ``delivery.py`` the
request a message becomes, what an answer means, and ``verify_delivery`` for receivers.
"""

from __future__ import annotations

from sqew.relay.delivery import verify_delivery
from sqew.relay.runner import Relay

__all__ = ["Relay", "verify_delivery"]
