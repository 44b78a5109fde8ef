"""What ``sqew serve`` checks and sets up before it binds: whether it may serve where it was told
(``check_exposure``), whether its TLS files can be used (``check_tls``), and how many
connections fit under the process's file-descriptor limit (``raise_fd_limit``,
``connections_that_fit``). Each turns a problem into one clear error before anything listens.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import ssl

from sqew import errors, locations
from sqew.backends import sqlite_path
from sqew.settings import Settings

LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback interface (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # another name: it may resolve anywhere
        return False


def check_exposure(settings: Settings, keyed: bool) -> bool:
    """Refuse to serve beyond loopback with nothing to authenticate callers (docs/rest.md, "Auth").

    Args:
        settings: what is to be served (``host``, ``require_auth``, ``insecure``).
        keyed: whether the database holds an API key (then keys are enforced).

    Returns:
        True when the server will be open to anyone who can reach it (``--insecure``).

    Raises:
        sqew.errors.Forbidden: a non-loopback host, no key, ``require_auth`` and ``insecure``
            off.
    """
    if keyed or settings.require_auth or is_loopback(settings.host):
        return False
    if settings.insecure:
        return True
    raise errors.Forbidden(
        f"refusing to serve on {settings.host} with no API key (anyone who can reach it could "
        f"use every queue): mint one first with `sqew --db {describe_db(settings.db)} keys "
        "create --scope admin`, or pass --insecure to serve it open"
    )


FD_RESERVE = 64
"""File descriptors kept for other things than connections (listening sockets, pipes, logs),
besides ``FD_PER_THREAD`` for each database thread."""
FD_PER_THREAD = 4
"""A database connection's files (SQLite: the database, its WAL, its shared memory)."""


def raise_fd_limit() -> None:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (where there is one to raise):
    each connection holds a file descriptor, and the default soft limit is often 1024."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return  # (an infinite hard limit is not a value every system accepts as a soft one)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def fd_limit() -> int | None:
    """This process's soft RLIMIT_NOFILE (None: none known, or infinite)."""
    try:
        import resource
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def connections_that_fit(threads: int) -> int | None:
    """How many connections fit under the file-descriptor limit beside ``threads`` database
    threads (None: no limit known)."""
    limit = fd_limit()
    if limit is None:
        return None
    return max(1, limit - FD_RESERVE - FD_PER_THREAD * threads)


def _no_passphrase() -> bytes:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key's passphrase.
    raise errors.ValidationError("the TLS key is encrypted: serve needs it unencrypted")


def check_tls(settings: Settings) -> None:
    """Check the TLS certificate and key can be used, before serving with them.

    Raises:
        sqew.errors.ValidationError: only one of ``tls_cert``/``tls_key`` is set, a file
            cannot be read, or they are not a PEM certificate and its private key.
    """
    cert, key = settings.tls_cert, settings.tls_key
    if cert is None and key is None:
        return
    if cert is None or key is None:
        raise errors.ValidationError("tls_cert and tls_key go together: give both or neither")
    for what, path in (("certificate", cert), ("key", key)):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise errors.ValidationError(
                f"cannot read the TLS {what} '{path}': {exc.strerror or exc}"
            ) from None
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            cert, key, password=_no_passphrase)
    except ssl.SSLError as exc:
        raise errors.ValidationError(
            f"cannot serve TLS with certificate '{cert}' and key '{key}': "
            f"{exc.reason or exc} (expected PEM files, the key matching the certificate)"
        ) from None


def describe_db(target: str) -> str:
    """The database as shown to the user: an absolute file path, or the URL (no password)."""
    path = sqlite_path(target)
    if path is not None:
        return os.path.abspath(path)
    return locations.shown(target)
