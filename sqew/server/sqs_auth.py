"""Who sent an SQS request, and whether that key may do what it asks (docs/sqs.md,
"Authentication"), while API keys are enforced.

A request must carry an AWS Signature Version 4 (``sqew.sqs.sigv4``) made with an SQS key's
secret (``sqew keys create --sqs``). The key is found through the server's ``Authenticator``,
which caches it and re-reads it as it does bearer keys (a revoked key stops working within a
second), and failed attempts count against the client, and against a real key's id, in the same
buckets as failed bearer keys: beyond the allowance, ``RequestThrottled`` before any key work.
A signed request is then held to the key's scopes and queue binding action by action
(``sqew.sqs.access``), exactly as the REST API holds a bearer key to them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from litestar import Request

from sqew import errors
from sqew.core import keys
from sqew.server.attempts import client_of
from sqew.server.auth import authorize
from sqew.server.authenticator import Authenticator
from sqew.sqs import access, sigv4
from sqew.sqs.errors import SqsError, from_sqew

UNKNOWN_KEY = "The security token included in the request is invalid."


async def principal_of(auth: Authenticator, http: Request[Any, Any, Any], body: bytes,
                       region: str) -> keys.Principal:
    """The key that signed the request (``http``, its ``body``) for ``region``.

    Raises:
        SqsError: ``MissingAuthenticationToken``, ``IncompleteSignature``,
            ``RequestExpired``, ``InvalidClientTokenId`` (no such SQS key: unknown, revoked),
            ``SignatureDoesNotMatch``, or ``RequestThrottled`` (too many failed attempts).
    """
    scope = http.scope
    client = scope.get("client")
    address = client_of(client[0]) if client else ""
    request = sigv4.Request(
        method=http.method, raw_path=scope.get("raw_path", b"").decode("latin-1")
        or scope["path"], query=scope.get("query_string", b"").decode("latin-1"),
        headers=list(scope["headers"]), body=body)
    key_id = None
    try:
        auth.check_client(address)
        try:
            signed = sigv4.signed_request(request, region, datetime.now(UTC))
        except SqsError:
            auth.failed(address)
            raise
        auth.check_client(address, signed.access_key_id)
        found = (await auth.sqs_key(signed.access_key_id)
                 if keys.is_sqs_key_id(signed.access_key_id) else None)
        if found is None:
            auth.failed(address)
            raise SqsError("InvalidClientTokenId", UNKNOWN_KEY)
        principal, secret = found
        key_id = principal.key_id
        sigv4.check(request, signed, secret)
    except errors.SqewError as exc:  # too many failures
        raise from_sqew(exc) from None
    except SqsError as exc:
        if key_id is not None and exc.code == "SignatureDoesNotMatch":
            auth.failed(address, key_id)
        raise
    return principal


def authorizer(principal: keys.Principal) -> Callable[[str, Any], None]:
    """The check an action runs before it acts (``Context.authorize``): ``principal`` must have
    the scope the action needs, on the queue it names."""

    def allow(action: str, params: Any) -> None:
        try:
            authorize(principal, access.need_of(action), access.queue_of(params))
        except errors.Forbidden as exc:
            raise SqsError("AccessDenied", exc.message) from None

    return allow
