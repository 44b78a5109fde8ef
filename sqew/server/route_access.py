"""What a route may need (``Access``): each route handler declares one in ``opt["access"]``.

The middleware (``sqew.server.auth``) enforces it and the authenticator
(``sqew.server.authenticator``) resolves ``metrics``; both read the names from here.
"""

from __future__ import annotations

from typing import Literal, get_args

Access = Literal["open", "read", "produce", "consume", "admin", "metrics"]
"""``open`` (no key consulted), ``read`` (any scope), ``produce``, ``consume``, ``admin``, or
``metrics`` (``admin`` when the setting ``metrics_auth`` is on, else ``open``)."""
ACCESS: frozenset[str] = frozenset(get_args(Access))
"""Every value of ``Access``."""
