"""Parsers for the CLI's structured option values (``--ids``, ``--id``, ``--attr``, ``--payload``,
``--scope``, ``--db``).

Malformed *syntax* is a usage error (exit 2, raised as ``typer.BadParameter``): ``--ids 5``,
an empty item (``1:a,,2:b``, ``--scope admin,``), an id below 1, the same handle (or ``dlq
requeue`` id) twice, ``--attr novalue``, an in-memory ``--db``. *Values* the service rejects (a
priority of 5000, a bad payload, an id beyond 64 bits, an unknown scope) are SqewErrors (exit 1),
exactly as the REST API would answer them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import msgspec
import typer

from sqew import errors, jsonlimits, locations


def check_database(target: str) -> str:
    """Refuse a ``--db`` that names SQLite's in-memory database: it would vanish with the command
    (and SQLite would create a file of that name instead). Returns ``target``."""
    path = locations.sqlite_path(target)
    if path is not None and locations.in_memory(path):
        raise typer.BadParameter(
            f"'{target}' is an in-memory database, which would vanish when the command ends; "
            "give a file path", param_hint="'--db'")
    return target


def id_token(text: str, *, option: str = "--id") -> tuple[int, str]:
    """Parse ``<id>:<token>`` (the handle ``message get`` prints)."""
    msg_id, sep, token = text.strip().partition(":")
    if not sep or not token or _message_id(msg_id) is None:
        raise typer.BadParameter(
            f"expected <id>:<token> as `sqew message get` prints it (ids start at 1), "
            f"got '{text.strip()}'",
            param_hint=f"'{option}'",
        )
    return int(msg_id), token


def ids_tokens(text: str) -> list[tuple[int, str]]:
    """Parse ``--ids <id>:<token>,<id>:<token>,…``: at least one pair, each pair once.

    One id with two tokens is allowed (at most one is current: the others get ``lease_lost``).
    """
    pairs = [id_token(item, option="--ids") for item in _items(text, "<id>:<token>")]
    _once(pairs, [f"{msg_id}:{token}" for msg_id, token in pairs])
    return pairs


def id_list(text: str) -> list[int]:
    """Parse ``--ids 1,2,3``: at least one message id, each once."""
    ids: list[int] = []
    for item in _items(text, "<id>"):
        msg_id = _message_id(item)
        if msg_id is None:
            raise typer.BadParameter(f"expected message ids (from 1) like 4,7,9, got '{item}'",
                                     param_hint="'--ids'")
        ids.append(msg_id)
    _once(ids, [f"message {msg_id}" for msg_id in ids])
    return ids


def scopes(values: Sequence[str]) -> list[str]:
    """Parse ``--scope produce,consume`` and/or repeated ``--scope``: the scopes in order.

    Their names, and a scope given twice, are the Client's to check (a ValidationError, as the
    REST API answers); only an empty item is malformed here.
    """
    return [item for value in values for item in _items(value, "<scope>", option="--scope")]


def _items(text: str, shape: str, *, option: str = "--ids") -> list[str]:
    """The comma-separated items of ``--ids``; an empty one (``1,,2``, ``1,``) is an error."""
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise typer.BadParameter(f"expected {shape}[,{shape}…], got nothing",
                                 param_hint=f"'{option}'")
    if not all(items):
        raise typer.BadParameter(
            f"item {items.index('') + 1} of '{text}' is empty (a stray comma?)",
            param_hint=f"'{option}'")
    return items


def _message_id(text: str) -> int | None:
    """``text`` as a message id if it is one in form (digits, at least 1), else None.

    Its size is the service's to check: an id beyond 64 bits is a ValidationError, as over HTTP.
    """
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        return None
    return int(text)


def _once(items: Sequence[Hashable], names: Sequence[str]) -> None:
    """Each item at most once: a repeat would be settled twice (and fail the second time)."""
    seen: set[Hashable] = set()
    for item, name in zip(items, names, strict=True):
        if item in seen:
            raise typer.BadParameter(f"{name} is given more than once", param_hint="'--ids'")
        seen.add(item)


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
    """Check ``--payload`` is one JSON value; keep its exact text (stored as sent).

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
