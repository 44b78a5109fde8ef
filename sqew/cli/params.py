"""Parsers for the CLI's structured option values (``--ids``, ``--id``, ``--attr``, ``--payload``).

Malformed *syntax* (``--ids 5``, ``--attr novalue``) is a usage error (exit 2, raised as
``typer.BadParameter``); *values* the service rejects (a priority of 5000, a bad payload) are
SqewErrors (exit 1), exactly as the REST API would answer them.
"""

from __future__ import annotations

import msgspec
import typer

from sqew import errors, jsonlimits


def id_token(text: str, *, option: str = "--id") -> tuple[int, str]:
    """Parse ``<id>:<token>`` (the handle ``message get`` prints)."""
    msg_id, sep, token = text.strip().partition(":")
    if not sep or not token or not msg_id.isdigit():
        raise typer.BadParameter(
            f"expected <id>:<token> (as `sqew message get` prints), got '{text}'",
            param_hint=f"'{option}'",
        )
    return int(msg_id), token


def ids_tokens(text: str) -> list[tuple[int, str]]:
    """Parse ``--ids <id>:<token>,<id>:<token>,…`` (at least one pair)."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise typer.BadParameter("expected <id>:<token>[,<id>:<token>…]", param_hint="'--ids'")
    return [id_token(p, option="--ids") for p in parts]


def id_list(text: str) -> list[int]:
    """Parse ``1,2,3``."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise typer.BadParameter(f"expected message ids like 4,7,9, got '{text}'",
                                 param_hint="'--ids'")
    return [int(p) for p in parts]


def attributes(pairs: list[str] | None) -> dict[str, str] | None:
    """Parse repeated ``--attr key=value`` into a dict (None when none given)."""
    if not pairs:
        return None
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected key=value, got '{pair}'", param_hint="'--attr'")
        out[key] = value
    return out


def json_payload(text: str) -> msgspec.Raw:
    """Check ``--payload`` is one JSON value; keep its exact text (SPEC: stored as sent).

    Text nested deeper than any client accepts is not decoded (a decoder recurses per level)
    but passed on as it is: the client refuses it, naming its own ``max_json_depth``.
    """
    try:
        data = text.encode()
    except UnicodeEncodeError:  # undecodable bytes in argv arrive as lone surrogates
        raise errors.ValidationError("--payload is not valid UTF-8") from None
    if jsonlimits.depth(data) > jsonlimits.MAX_DEPTH:
        return msgspec.Raw(data)
    try:
        raw: msgspec.Raw = msgspec.json.decode(data, type=msgspec.Raw)
    except msgspec.DecodeError as exc:
        raise errors.ValidationError(
            f"--payload is not valid JSON: {exc}",
            details=[{"field": "payload", "message": str(exc)}],
        ) from None
    return raw
