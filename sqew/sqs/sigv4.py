"""AWS Signature Version 4, checked (docs/sqs.md, "Authentication"): the ``Authorization``
header of a signed request, or the ``X-Amz-*`` parameters of a presigned URL.

``signed_request`` reads what a request claims (the access key id, the credential scope, the
signed headers, the signature, its time) and refuses a malformed or stale one; ``check`` then
recomputes the signature with the key's secret, exactly as AWS defines the canonical request,
and compares in constant time. Nothing here knows where keys are kept: the caller looks the
access key id up between the two calls (``sqew.server.sqs_auth``).
"""

from __future__ import annotations

import hashlib
import hmac
import posixpath
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, unquote

from sqew.sqs.errors import SqsError

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sqs"
MAX_SKEW = timedelta(minutes=15)
"""How far a signed request's time may be from the server's clock (AWS's limit)."""
MAX_EXPIRES_S = 604800
"""The longest a presigned URL may be valid (7 days, AWS's limit)."""
_DATE = "%Y%m%dT%H%M%SZ"
_QUERY = "X-Amz-Algorithm"
_SIGNATURE_PARAM = "X-Amz-Signature"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_UNRESERVED = "-_.~"

Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Request:
    """A request as it reached the server: method, path and query as sent (still
    percent-encoded), headers, body."""

    method: str
    raw_path: str
    query: str
    headers: Headers
    body: bytes


@dataclass(frozen=True)
class Signed:
    """What a request claims: who signed it, for what scope, when, over which headers."""

    access_key_id: str
    date: str  # the scope's day, YYYYMMDD
    region: str
    amz_date: str  # the request's time, YYYYMMDDTHHMMSSZ
    signed_headers: list[str]
    signature: str
    presigned: bool

    @property
    def scope(self) -> str:
        """The credential scope: day/region/service/aws4_request."""
        return f"{self.date}/{self.region}/{SERVICE}/aws4_request"


def incomplete(message: str) -> SqsError:
    """``IncompleteSignature`` with ``message``."""
    return SqsError("IncompleteSignature", message)


def mismatch(message: str | None = None) -> SqsError:
    """``SignatureDoesNotMatch`` (AWS's wording unless ``message``)."""
    return SqsError("SignatureDoesNotMatch", message or (
        "The request signature we calculated does not match the signature you provided. "
        "Check your AWS Secret Access Key and signing method."), status=403)


def signed_request(req: Request, region: str, now: datetime) -> Signed:
    """What ``req`` claims, checked for form, scope (``region``, ``sqs``) and time.

    Raises:
        SqsError: ``MissingAuthenticationToken`` (no signature), ``IncompleteSignature``
            (malformed, or ``host`` not signed), ``SignatureDoesNotMatch`` (another region or
            service), ``RequestExpired`` (more than 15 minutes off, or a presigned URL past
            its ``X-Amz-Expires``).
    """
    params = dict(_params(req.query))
    if _QUERY in params:
        signed, expires = _from_query(params), params.get("X-Amz-Expires", "")
        if not expires.isdigit() or not 0 < int(expires) <= MAX_EXPIRES_S:
            raise incomplete(f"X-Amz-Expires must be a whole number of seconds from 1 to "
                             f"{MAX_EXPIRES_S}.")
    else:
        signed, expires = _from_header(req.headers), ""
    if "host" not in signed.signed_headers:
        raise incomplete("'Host' must be a 'SignedHeader' in the AWS Authorization.")
    if signed.region != region or not signed.date:
        raise mismatch(f"Credential should be scoped to a valid region, not "
                       f"'{signed.region[:64]}'. ")
    try:
        at = datetime.strptime(signed.amz_date, _DATE).replace(tzinfo=UTC)
    except ValueError:
        raise incomplete("The request's X-Amz-Date is not a date of the form "
                         "YYYYMMDDTHHMMSSZ.") from None
    if signed.amz_date[:8] != signed.date:
        raise mismatch("Date in Credential scope does not match YYYYMMDD from ISO-8601 "
                       "version of date from HTTP.")
    late = now - at > (timedelta(seconds=int(expires)) if expires else MAX_SKEW)
    if late or at - now > MAX_SKEW:
        raise SqsError("RequestExpired", f"Request has expired: signed at {signed.amz_date}, "
                       f"the server's time is {now.strftime(_DATE)}.")
    return signed


def check(req: Request, signed: Signed, secret: str) -> None:
    """Refuse ``req`` unless ``signed.signature`` is its signature with ``secret``.

    Raises:
        SqsError: ``SignatureDoesNotMatch``.
    """
    expected = signature(secret, signed, canonical_request(req, signed))
    if not hmac.compare_digest(expected.encode(), signed.signature.encode()):
        raise mismatch()


def signature(secret: str, signed: Signed, canonical: str) -> str:
    """The hex signature of a canonical request under ``signed``'s scope and time."""
    to_sign = "\n".join([ALGORITHM, signed.amz_date, signed.scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (signed.date, signed.region, SERVICE, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def canonical_request(req: Request, signed: Signed) -> str:
    """The canonical request of AWS's definition: method, path, query, signed headers and
    the body's hash.

    Raises:
        SqsError: ``SignatureDoesNotMatch``: a signed header is absent, or the body is not the
            one ``x-amz-content-sha256`` names.
    """
    path = posixpath.normpath(req.raw_path or "/")
    if req.raw_path.endswith("/") and path != "/":
        path += "/"
    query = sorted((quote(k, safe=_UNRESERVED), quote(v, safe=_UNRESERVED))
                   for k, v in _params(req.query)
                   if not (signed.presigned and k == _SIGNATURE_PARAM))
    lines = [req.method.upper(), quote(path, safe="/~"), "&".join(f"{k}={v}" for k, v in query)]
    for name in signed.signed_headers:
        values = [" ".join(v.decode("latin-1").split()) for k, v in req.headers
                  if k.decode("latin-1").lower() == name]
        if not values:
            raise mismatch(f"The header '{name[:64]}' is signed but the request has none.")
        lines.append(f"{name}:{','.join(values)}")
    lines += ["", ";".join(signed.signed_headers), _payload_hash(req, signed)]
    return "\n".join(lines)


def _payload_hash(req: Request, signed: Signed) -> str:
    """``x-amz-content-sha256`` when sent, which must then be the body's; else the body's."""
    body = hashlib.sha256(req.body).hexdigest()
    claimed = [v.decode("latin-1").strip() for k, v in req.headers
               if k == b"x-amz-content-sha256"]
    if not claimed:
        return body
    # Only a hash of the body itself is taken: an unsigned payload would let anyone who saw
    # a signed request send another body with it.
    if len(claimed) != 1 or not _HEX64.fullmatch(claimed[0]) or claimed[0] != body:
        raise mismatch("The x-amz-content-sha256 header is not the SHA-256 of the body "
                       "(sqew takes signed payloads only).")
    return body


def _from_header(headers: Headers) -> Signed:
    values = [v for k, v in headers if k == b"authorization"]
    if not values:
        raise SqsError("MissingAuthenticationToken", "Request is missing Authentication "
                       "Token: this server requires requests signed with AWS Signature "
                       "Version 4.", status=403)
    if len(values) != 1:
        raise incomplete("The request has more than one Authorization header.")
    text = values[0].decode("latin-1").strip()
    algorithm, _, rest = text.partition(" ")
    if algorithm != ALGORITHM:
        raise incomplete(f"Unsupported AWS 'algorithm': the Authorization header must start "
                         f"with '{ALGORITHM}'.")
    fields = dict(part.strip().partition("=")[::2] for part in rest.split(","))
    for need in ("Credential", "SignedHeaders", "Signature"):
        if not fields.get(need):
            raise incomplete(f"Authorization header requires '{need}' parameter.")
    dates = [v.decode("latin-1").strip() for k, v in headers if k == b"x-amz-date"]
    if len(dates) != 1:
        raise incomplete("Authorization header requires existence of the 'X-Amz-Date' "
                         "header (once).")
    return _signed(fields["Credential"], fields["SignedHeaders"], fields["Signature"],
                   dates[0], presigned=False)


def _from_query(params: dict[str, str]) -> Signed:
    if params[_QUERY] != ALGORITHM:
        raise incomplete(f"X-Amz-Algorithm must be {ALGORITHM}.")
    for need in ("X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", _SIGNATURE_PARAM):
        if not params.get(need):
            raise incomplete(f"AWS query-string parameters must include '{need}'.")
    return _signed(params["X-Amz-Credential"], params["X-Amz-SignedHeaders"],
                   params[_SIGNATURE_PARAM], params["X-Amz-Date"], presigned=True)


def _signed(credential: str, headers: str, signature: str, amz_date: str, *,
            presigned: bool) -> Signed:
    parts = credential.split("/")
    if len(parts) != 5 or not parts[0] or parts[3] != SERVICE or parts[4] != "aws4_request":
        raise incomplete("The credential must be <access key id>/<YYYYMMDD>/<region>/sqs/"
                         "aws4_request.")
    names = headers.split(";")
    if names != sorted({n.lower() for n in names}) or not all(names):
        raise incomplete("SignedHeaders must be lower-case header names, sorted, separated "
                         "by ';'.")
    return Signed(parts[0], parts[1], parts[2], amz_date, names, signature.lower(), presigned)


def _params(query: str) -> list[tuple[str, str]]:
    """The query's pairs, percent-decoded (``+`` is kept: SigV4 encodes a space as ``%20``)."""
    pairs = []
    for pair in query.split("&") if query else []:
        key, _, value = pair.partition("=")
        pairs.append((unquote(key), unquote(value)))
    return pairs
