"""msgspec's type information for Structs, built at import rather than on first use.

msgspec builds a Struct's type information the first time the Struct is decoded or converted
to, and caches it on the class. Two threads doing that first use at once can crash the process
with a segmentation fault (msgspec 0.22: eight threads sharing one fresh HTTP ``Client`` crash
the process now and then, often on a busy machine). A module that defines Structs calls
``build_now`` on them at import, which Python runs once, under the import lock; every later use,
from any thread, finds the information built.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec


def build_now(types: Iterable[Any]) -> None:
    """Build the type information of ``types`` (and of every type they contain) now."""
    for type_ in types:
        msgspec.json.Decoder(type_)


def structs_in(namespace: dict[str, Any]) -> list[type[msgspec.Struct]]:
    """The Struct classes among a module's names (``globals()``)."""
    return [v for v in namespace.values()
            if isinstance(v, type) and issubclass(v, msgspec.Struct) and v is not msgspec.Struct]
