"""The uvicorn releases sqew serves with, and the check that refuses any other.

``sqew.server.protocols.HttpProtocol`` subclasses uvicorn's httptools protocol, which is not a
public API: it overrides and calls the methods in ``USED`` and reads the protocol's and the
request cycle's attributes (``pipeline``, ``cycle``, ``flow``, ``server_state``), all of which
may change in any release. ``VERSIONS`` is the range it is written for and tested with;
pyproject.toml pins the same (a test keeps the two equal, and fails on an installed release
outside it). A server on another release refuses to start, in one line, rather than serve
without its limits against slow and idle clients (docs/security.md, "Limits").
"""

from __future__ import annotations

import re

import uvicorn

from sqew import errors

LOWEST = (0, 45)
"""The first release with what ``HttpProtocol`` uses (``_start_asgi_task`` came in 0.45)."""
BEYOND = (0, 55)
"""The first release not checked against ``HttpProtocol``."""
VERSIONS = f">={LOWEST[0]}.{LOWEST[1]},<{BEYOND[0]}.{BEYOND[1]}"
"""The range as a requirement specifier (pyproject.toml's, too)."""
USED = (
    "connection_made", "data_received", "on_message_begin", "on_headers_complete",
    "on_message_complete", "on_response_complete", "send_400_response", "_start_asgi_task",
)
"""The methods of uvicorn's ``HttpToolsProtocol`` that ``HttpProtocol`` overrides or calls."""

_FINAL = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)*$")


def supported(version: str) -> bool:
    """Whether ``version`` (a uvicorn release such as ``0.54.0``) is a final release in
    ``VERSIONS`` (a pre-release or an unreadable version is not)."""
    found = _FINAL.match(version)
    if found is None:
        return False
    release = (int(found[1]), int(found[2]))
    return LOWEST <= release < BEYOND


def check(version: str | None = None) -> None:
    """Refuse a uvicorn release ``HttpProtocol`` is not written for.

    Args:
        version: the release to check; default the installed one.

    Raises:
        sqew.errors.Unavailable: outside ``VERSIONS``, with one line that says what to install.
    """
    version = uvicorn.__version__ if version is None else version
    if not supported(version):
        raise errors.Unavailable(
            f"uvicorn {version} is installed; sqew serves with uvicorn {VERSIONS} only (its "
            "HTTP protocol builds on uvicorn internals): install one of those, e.g. "
            f"pip install 'uvicorn[standard]{VERSIONS}'")
