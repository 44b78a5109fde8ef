"""Reading a database target (``--db``, ``Client(...)``): which SQLite file it names, if any.

One reading for every layer: the backends open what it names, the CLI refuses what it cannot
keep before opening anything.
"""

from __future__ import annotations

import functools
import os
import re
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
    """A target as shown to people: a URL's password (in its user part) and every query
    parameter that libpq treats as secret (``secret_parameters``) replaced by ``***``; a path
    as it is."""
    text = os.fspath(target)
    if "://" not in text:
        return text
    try:
        parts = urlsplit(text)
        password = parts.password
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return text.split("://", 1)[0] + "://…"
    secret = [is_secret_parameter(key) for key, _ in query]
    if password is None and not any(secret):
        return text  # nothing to hide (and urlunsplit would drop an empty authority's //)
    if password is not None:
        host = parts.netloc.rsplit("@", 1)[1]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    if any(secret):
        hidden = [(k, "***" if hide else v) for (k, v), hide in zip(query, secret, strict=True)]
        parts = parts._replace(query=urlencode(hidden, safe="*"))
    return urlunsplit(parts)


KNOWN_SECRET_PARAMETERS = frozenset({
    "password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"})
"""libpq's parameters that hold secrets, known without asking libpq: those its option table
marks secret (``password``, ``sslpassword``, ``oauth_client_secret``) and the SCRAM keys it
lists among its debug options (each as good as a password)."""
_SECRET_WORD = re.compile(r"password|secret", re.IGNORECASE)


def is_secret_parameter(keyword: str) -> bool:
    """Whether a connection parameter's value is a secret (``secret_parameters``), or its
    name says so (a parameter a later libpq may add)."""
    return keyword.lower() in secret_parameters() or _SECRET_WORD.search(keyword) is not None


@functools.cache
def secret_parameters() -> frozenset[str]:
    """The connection parameters whose values are never shown: ``KNOWN_SECRET_PARAMETERS``
    and every parameter the libpq that psycopg loads marks secret in its option table
    (``PQconndefaults``' display character ``*``: "a password field, hide the value"). libpq
    is asked once per process, offline; without psycopg the known ones are used."""
    try:
        from psycopg import pq
    except ImportError:  # no PostgreSQL support installed: the known ones
        return KNOWN_SECRET_PARAMETERS
    try:
        options = pq.Conninfo.get_defaults()
    except Exception:  # a libpq that cannot list its options (out of memory): the known ones
        return KNOWN_SECRET_PARAMETERS
    marked = {o.keyword.decode() for o in options if o.dispchar == b"*"}
    return KNOWN_SECRET_PARAMETERS | marked
