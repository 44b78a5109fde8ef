"""Reading a database target (``--db``, ``Client(...)``): which SQLite file it names, if any.

One reading for every layer: the backends open what it names, the CLI refuses what it cannot
keep before opening anything.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SQLITE_URL = "sqlite:///"
POSTGRES_SCHEMES = ("postgresql+psycopg://", "postgresql://")


def is_postgres(target: str | os.PathLike[str]) -> bool:
    """Whether a target is a PostgreSQL URL (``postgresql+psycopg://…``, ``postgresql://…``)."""
    return os.fspath(target).startswith(POSTGRES_SCHEMES)


def sqlite_path(target: str | os.PathLike[str]) -> str | None:
    """The file path a target names if it is a SQLite file path or ``sqlite:///`` URL."""
    text = os.fspath(target)
    if text.startswith(SQLITE_URL):
        return text[len(SQLITE_URL):]
    if "://" in text:
        return None
    return text


def in_memory(path: str) -> bool:
    """Whether a SQLite path names an in-memory database (it would vanish with its
    connection: nothing would be kept)."""
    return path == ":memory:" or path.startswith("file::memory:")


def shown(target: str | os.PathLike[str]) -> str:
    """A target as shown to people: a URL's password, in its user part or as a ``password``
    query parameter (libpq's), replaced by ``***``; a path as it is."""
    text = os.fspath(target)
    if "://" not in text:
        return text
    try:
        parts = urlsplit(text)
        password = parts.password
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return text.split("://", 1)[0] + "://…"
    if password is None and not any(key == "password" for key, _ in query):
        return text  # nothing to hide (and urlunsplit would drop an empty authority's //)
    if password is not None:
        host = parts.netloc.rsplit("@", 1)[1]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    if any(key == "password" for key, _ in query):
        hidden = [(k, "***" if k == "password" else v) for k, v in query]
        parts = parts._replace(query=urlencode(hidden, safe="*"))
    return urlunsplit(parts)
