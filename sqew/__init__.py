"""sqew: a lightweight, reliable at-least-once message queue.

``Client(target)`` talks to a SQLite file (the embedded default) or a sqew server;
``AsyncClient(target)`` is the same on asyncio.

The names below are loaded on first use (PEP 562 ``__getattr__``): importing any ``sqew.*``
module imports this package first, and the ``sqew`` command must be able to take over Ctrl-C
before its heavy imports begin (``sqew.cli.interrupts``), so this module imports nothing.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "EnqueueResult",
    "ItemResult",
    "LeasedMessage",
    "LocalClient",
    "Message",
    "Queue",
    "Reject",
    "Relay",
    "SqewError",
    "Stats",
    "Worker",
    "__version__",
    "errors",
    "verify_signature",
]

# Where each name of __all__ is defined (``errors`` is the module itself).
_HOMES = {
    "AsyncClient": "sqew.client.aio",
    "Client": "sqew.client.base",
    "EnqueueResult": "sqew.models",
    "ItemResult": "sqew.models",
    "LeasedMessage": "sqew.models",
    "LocalClient": "sqew.client.local",
    "Message": "sqew.models",
    "Queue": "sqew.models",
    "Reject": "sqew.worker",
    "Relay": "sqew.relay",
    "SqewError": "sqew.errors",
    "Stats": "sqew.models",
    "errors": "sqew",
    "verify_signature": "sqew.core.signing",
    "Worker": "sqew.worker",
}

TYPE_CHECKING = False  # what type checkers read (typing.TYPE_CHECKING, without importing typing)
if TYPE_CHECKING:
    from sqew import errors
    from sqew.client.aio import AsyncClient
    from sqew.client.base import Client
    from sqew.client.local import LocalClient
    from sqew.core.signing import verify_signature
    from sqew.errors import SqewError
    from sqew.models import EnqueueResult, ItemResult, LeasedMessage, Message, Queue, Stats
    from sqew.relay import Relay
    from sqew.worker import Reject, Worker
else:
    # Type checkers see the imports above instead: a module __getattr__ would make every
    # misspelt name of the package an attribute of type object to them.

    def __getattr__(name: str) -> object:
        """Load a public name on first use (then it is a plain attribute of the package)."""
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module 'sqew' has no attribute {name!r}")
        import importlib

        module = importlib.import_module(f"sqew.{name}" if home == "sqew" else home)
        value = module if home == "sqew" else getattr(module, name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
del TYPE_CHECKING
