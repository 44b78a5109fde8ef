"""How an ``HttpClient`` verifies a server's certificate: the system's CAs (one context shared by
every client) or a private CA's, and telling a failed verification from other transport errors.
Certificates are always verified: a client of an ``http://`` server, which never makes a TLS
handshake, gets a context that trusts no certificate at all (``no_tls``)."""

from __future__ import annotations

import functools
import ssl

import httpx

from sqew import errors


@functools.cache
def default_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi, or SSL_CERT_FILE/SSL_CERT_DIR), built once.

    httpx builds this context for every new client, loading the CA bundle each time: ~25 ms,
    which dominated creating a client (a CLI call, a test, a worker thread). The context is
    only read after it is built, and sharing one across clients and threads is safe.
    """
    return httpx.create_ssl_context()


@functools.cache
def no_tls() -> ssl.SSLContext:
    """The TLS context of a client whose server is reached over plain ``http://``.

    Such a client sends every request to its base URL and follows no redirect, so it never
    makes a handshake; loading the system's CA bundle for it anyway (``default_context``) was
    most of the CPU a ``sqew --url http://...`` command took after its imports. Should a
    handshake ever happen, it fails: the context verifies certificates and hostnames and
    trusts no CA.
    """
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def private_ca(path: str) -> ssl.SSLContext:
    """A TLS context verifying servers against the CA certificates in ``path`` only."""
    try:
        return ssl.create_default_context(cafile=path)
    except ssl.SSLError as exc:  # (an OSError too: first)
        raise errors.ValidationError(
            f"'{path}' is not a PEM CA certificate: {exc.reason or exc}"
        ) from None
    except OSError as exc:
        raise errors.ValidationError(
            f"cannot read the CA certificate '{path}': {exc.strerror or exc}"
        ) from None


def certificate_error(exc: BaseException) -> bool:
    """Whether a transport error was a failed certificate verification (somewhere in its
    causes: httpx wraps httpcore's error, which wraps ssl's)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
