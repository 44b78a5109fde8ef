"""How the HTTP clients send a request and read its answer, the same for both.

A ``Call`` (``sqew.client.http_calls`` makes one per endpoint) is a request and how its
answer is read; ``Wire`` holds what every request of one client carries (the key, HMAC
signing, the trace context) and maps a failed request or an error answer to its
``SqewError``. ``HttpClient`` and ``AsyncHttpClient`` only send what it prepares.
"""

from __future__ import annotations

import math
import os
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
import msgspec

from sqew import __version__, errors, telemetry
from sqew.client import tls
from sqew.core import signing

T = TypeVar("T")
_encode = msgspec.json.Encoder().encode
_ENVELOPE = msgspec.json.Decoder(dict[str, Any])

Reader = Callable[[httpx.Response, str], T]
"""Reads a successful answer (and the base URL, for errors) into the call's result."""


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request of an endpoint and how its answer is read.

    Attributes:
        method, path: the request line (``path`` with the queue's name quoted).
        read: the answer into the result.
        body: encoded as JSON when not None.
        params: the query (None values left out).
        headers: added to the usual ones.
        waits_s: how long the server may hold the request on purpose (a long poll): added to
            the client's timeout.
        signed: sign the body with the client's HMAC secret (an enqueue).
    """

    method: str
    path: str
    read: Reader[T]
    body: Any = None
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    waits_s: float = 0.0
    signed: bool = False


@dataclass(frozen=True, slots=True)
class Prepared:
    """A call as httpx takes it."""

    method: str
    url: httpx.URL
    content: bytes | None
    headers: dict[str, str]
    timeout: float


class Wire:
    """What every request of one client carries, and the errors of the transport.

    Args:
        base_url: the server's base URL (errors name it).
        api_key: sent as ``Authorization: Bearer <key>``.
        hmac_secret: signs every enqueue (``X-Sqew-Signature`` over the exact body sent).
        timeout: seconds to wait for an answer (a long poll adds its wait).

    Raises:
        sqew.errors.ValidationError: ``api_key`` holds a character no header can carry.
    """

    def __init__(
        self, base_url: str, *, api_key: str | None, hmac_secret: str | Sequence[str] | None,
        timeout: float,
    ) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self._hmac_secret = hmac_secret or None
        self._headers = {"user-agent": f"sqew/{__version__}", "accept": "application/json"}
        if api_key and api_key.strip():
            self._headers["authorization"] = f"Bearer {_header_safe(api_key)}"

    def prepare(self, call: Call[Any], http: httpx.Client | httpx.AsyncClient) -> Prepared:
        """The request of ``call`` as ``http`` sends it: encoded, signed, with the trace
        context. Its URL, query included, is parsed once here: absolute, or the path alone
        when ``http`` has a base URL of its own (an injected client: Litestar's TestClient).
        (httpx parses a URL and a query given apart again, a third of a request's CPU.)"""
        path = call.path if str(http.base_url) else self.base_url + call.path
        query = {k: v for k, v in (call.params or {}).items() if v is not None}
        url = httpx.URL(path, params=query) if query else httpx.URL(path)
        content = None if call.body is None else _encode(call.body)
        headers = dict(self._headers)
        if content is not None:
            headers["content-type"] = "application/json"
            if call.signed and self._hmac_secret is not None:  # over the very bytes sent
                headers[signing.HEADER] = signing.header(self._hmac_secret, content)
        headers.update(call.headers or {})
        telemetry.inject_headers(headers)  # the server's span continues the caller's trace
        return Prepared(call.method, url, content, headers, self.timeout + call.waits_s)

    def answer(self, call: Call[T], response: httpx.Response) -> T:
        """The result of ``call`` from its answer; an error answer raises its SqewError."""
        if response.status_code >= 400:
            raise _error(response)
        return call.read(response, self.base_url)

    def failed(self, exc: httpx.HTTPError) -> errors.SqewError:
        """The SqewError of a request that got no answer (``raise … from exc``; a
        ``ValidationError`` is raised ``from None``: its cause may quote a header)."""
        if isinstance(exc, httpx.TimeoutException):
            return errors.Unavailable(
                f"the server at {self.base_url} did not answer in time ({type(exc).__name__})")
        if isinstance(exc, httpx.LocalProtocolError):  # its text quotes the offending
            # header, which may hold a key: it is not passed on
            return errors.ValidationError(
                "the request cannot be sent: it is not valid HTTP (a header value with a "
                "control character or surrounding whitespace, say)")
        if isinstance(exc, httpx.TransportError) and tls.certificate_error(exc):
            return errors.Unavailable(
                f"cannot verify the TLS certificate of {self.base_url}: {exc} (for a "
                "server with a private CA, give its CA certificate: ca_cert, --ca-cert)")
        return errors.Unavailable(f"cannot reach server at {self.base_url}: {exc}")


def verify(base_url: str, ca_cert: str | os.PathLike[str] | None) -> Any:
    """The TLS verification of a client of ``base_url``: a private CA's PEM file when one is
    given, else the system's CAs, which a plain ``http://`` server never needs (``no_tls``)."""
    if ca_cert is not None:
        return tls.private_ca(os.fspath(ca_cert))
    if urllib.parse.urlsplit(base_url).scheme == "http":
        return tls.no_tls()
    return tls.default_context()


def _header_safe(api_key: str) -> str:
    """``api_key`` without surrounding whitespace, checked to be visible ASCII (what a header
    carries as is); the error never quotes it."""
    key = api_key.strip()
    if not all("!" <= c <= "~" for c in key):
        raise errors.ValidationError(
            "the API key holds a character an HTTP header cannot carry (a space, a control "
            "character or a non-ASCII one); a key is sqew_<id>_<secret>"
        )
    return key


def _error(response: httpx.Response) -> errors.SqewError:
    """The SqewError an error response stands for (its envelope, or its status)."""
    retry_after = _retry_after(response.headers.get("retry-after"))
    try:
        body = _ENVELOPE.decode(response.content)["error"]
        code, message = str(body["code"]), str(body["message"])
        details = body.get("details")
    except (msgspec.MsgspecError, KeyError, TypeError):
        cls = errors.by_status(response.status_code)
        text = response.text.strip()[:200] or response.reason_phrase
        return cls(f"HTTP {response.status_code} from the server: {text}",
                   retry_after=retry_after)
    return errors.by_code(code)(
        message, details=details if isinstance(details, list) else None, retry_after=retry_after
    )


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
