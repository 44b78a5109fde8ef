"""msgspec's validation failures as SPEC's ValidationError, worded for people.

msgspec says ``Expected `int` <= 1000 - at `$.priority```; sqew says ``priority must be an
integer between -1000 and 1000``, the wording of the service's own range checks
(``rules.range_error``), so an error reads the same from the CLI, a Client and the REST API.
What each field must be is read from the request models' declarations (``sqew.models``), so
the words follow the model's ranges: the model that failed when it is known (a field name may mean
different things in two models: a key's ``name`` is not a queue's), else every request model.
``details`` keeps the offending path as ``field``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import msgspec
import msgspec.inspect as mi

from sqew import errors, models

# The request bodies whose fields are described (each name means one thing across them).
_REQUEST_MODELS: tuple[type[Any], ...] = (
    models.QueueCreate, models.MessageBatchIn, models.AckBatchIn, models.NackBatchIn,
    models.ExtendLeaseBatchIn, models.RequeueIn,
)
_AT = re.compile(r" - at (?P<key>`key` in )?`\$(?P<path>[^`]*)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]*)`$")
_WRONG_TYPE = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`$")
_CONSTRAINT = re.compile(r"^(Expected `(?P<want>[^`]+)` (?P<rule>.+)|Invalid enum value .*|"
                         r"Number out of range)$")
_OWN_CHECK = re.compile(r"^(?P<name>[a-z_]+) must ")
_INDEX = re.compile(r"\[\d+\]")
_TYPE_WORDS = {
    "int": "an integer", "float": "a number", "str": "a string", "bool": "a boolean",
    "object": "an object", "array": "an array", "null": "null",
}


def validation_error(
    exc: msgspec.ValidationError, *, source: Any = None, model: type[Any] | None = None
) -> errors.ValidationError:
    """A msgspec validation failure as SPEC's ValidationError with ``details``.

    ``details[0]["field"]`` is where the failure is: the field's path (``priority``,
    ``messages[1].priority``, ``ids[0]``), or for an unknown or missing field the object
    holding it (``$`` for the body itself). ``source`` (what failed: the decoded value or its
    JSON text) lets a bad mapping key be named in the message; ``model`` (the type that was
    being decoded) says whose declarations word the message.
    """
    text = str(exc)
    at = _AT.search(text)
    reason = text[: at.start()] if at else text
    path = at["path"].removeprefix(".") if at else ""
    is_key = bool(at and at["key"])
    field = path or "$"
    if found := _UNKNOWN.match(reason):
        detail = f"unknown field '{found['name']}'"
        message = f"{path}: {detail}" if path else detail
    elif found := _MISSING.match(reason):
        name = f"{path}.{found['name']}" if path else found["name"]
        detail = f"{found['name']} is required"
        message = f"{name} is required"
    elif found := _OWN_CHECK.match(reason):  # a model's own check words its field first
        field = f"{path}.{found['name']}" if path else found["name"]
        detail = reason.removeprefix(found["name"] + " ")
        message = f"{path}: {reason}" if path else reason
    else:
        label, detail = _label(path, is_key), _must_be(reason, path, is_key, model)
        key = _bad_key(reason, path, source) if is_key else None
        if key is not None:
            label = f"key {_shorten(key)!r} of {path or 'the object'}"
        message = f"{label} {detail}"
    return errors.ValidationError(message, details=[{"field": field, "message": detail}])


_PATH_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_KEY_LENGTH = re.compile(r"of length ([<>]=) (\d+)")


def _bad_key(reason: str, path: str, source: Any) -> str | None:
    """The first key of the mapping at ``path`` in ``source`` that breaks a length limit."""
    limit = _KEY_LENGTH.search(reason)
    if limit is None or source is None:
        return None
    if isinstance(source, bytes | bytearray | memoryview):
        try:
            source = msgspec.json.decode(source)  # the error path only; depth was checked
        except (msgspec.DecodeError, RecursionError):
            return None
    node = source
    for name, index in _PATH_STEP.findall("." + path if path else ""):
        try:
            node = node[int(index)] if index else node[name]
        except (KeyError, IndexError, TypeError):
            return None
    if not isinstance(node, Mapping):
        return None
    op, bound = limit.group(1), int(limit.group(2))
    for key in node:
        if isinstance(key, str) and (len(key) > bound if op == "<=" else len(key) < bound):
            return key
    return None


def _shorten(text: str, most: int = 20) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _label(path: str, is_key: bool) -> str:
    """How a path is named in a sentence: ``priority``, ``keys of attributes``."""
    if is_key:
        return f"keys of {path or 'the object'}"
    if path.endswith("[...]"):
        return f"values of {path.removesuffix('[...]')}"
    return path or "the body"


def _must_be(reason: str, path: str, is_key: bool, model: type[Any] | None) -> str:
    """``must be <what the model declares>``, from the model or else from msgspec's words."""
    wanted = _described((model,) if model else _REQUEST_MODELS).get(_key(path, is_key))
    wrong = _WRONG_TYPE.match(reason)
    if wanted is not None and (wrong or _CONSTRAINT.match(reason)):
        got = f" (got {_TYPE_WORDS.get(wrong['got'], wrong['got'])})" if wrong else ""
        return f"must be {wanted}{got}"
    if wrong:
        return (f"must be {_type_words(wrong['want'])}, "
                f"not {_TYPE_WORDS.get(wrong['got'], wrong['got'])}")
    found = _CONSTRAINT.match(reason)
    if found and found["want"]:
        return f"must be {_type_words(found['want'])} {found['rule']}"
    return f"is not valid: {reason}"


def _type_words(names: str) -> str:
    """``int | null`` as ``an integer or null``."""
    return " or ".join(_TYPE_WORDS.get(n, n) for n in names.split(" | "))


def _key(path: str, is_key: bool) -> str:
    """The registry key of a path: its last field, ``[]`` for a list item, ``{}`` for a value."""
    last = _INDEX.sub("[]", path).replace("[...]", "{}").rsplit(".", 1)[-1]
    return last + "{key}" if is_key else last


@functools.cache
def _described(request_models: tuple[type[Any], ...]) -> dict[str, str]:
    """``{registry key: what its value must be}`` for every field of ``request_models``.

    A name declared differently in two places is left out (then msgspec's own words are used).
    """
    found: dict[str, str | None] = {}

    def add(key: str, info: Any) -> None:
        words = _describe(info)
        found[key] = words if found.get(key, words) == words else None

    def walk(info: Any, name: str) -> None:
        info = info.type if isinstance(info, mi.Metadata) else info
        if isinstance(info, mi.UnionType):
            for member in info.types:
                walk(member, name)
        elif isinstance(info, mi.StructType):
            for f in info.fields:
                add(f.name, f.type)
                walk(f.type, f.name)
        elif isinstance(info, mi.ListType):
            add(f"{name}[]", info.item_type)
            walk(info.item_type, f"{name}[]")
        elif isinstance(info, mi.DictType):
            add(f"{name}{{}}", info.value_type)
            add(f"{name}{{key}}", info.key_type)

    for model in request_models:
        walk(mi.type_info(model), "")
    return {k: v for k, v in found.items() if v is not None}


def _describe(info: Any) -> str | None:
    """What a value of a msgspec type must be, in words (None when there is nothing to say)."""
    if isinstance(info, mi.Metadata):
        return _describe(info.type)
    if isinstance(info, mi.UnionType):  # null stands for "not given": not worth a mention
        parts = [_describe(t) for t in info.types if not isinstance(t, mi.NoneType)]
        return None if None in parts else " or ".join(p for p in parts if p)
    if isinstance(info, mi.IntType | mi.FloatType):
        kind = "an integer" if isinstance(info, mi.IntType) else "a finite number"
        high = None if info.le == models.MAX_FLOAT else info.le
        return kind + _bounds(info.ge, high, " between {} and {}", " >= {}", " <= {}")
    if isinstance(info, mi.StrType):
        length = _bounds(info.min_length, info.max_length, "{} to {} characters",
                         "at least {} characters", "at most {} characters")
        hint = models.PATTERN_HINTS.get(info.pattern or "", "")
        return "a string" + (" of " if length or hint else "") + ", ".join(
            p for p in (length, hint) if p)
    if isinstance(info, mi.ListType):
        return "a list" + _bounds(info.min_length, info.max_length, " of {} to {} items",
                                  " of at least {} items", " of at most {} items")
    if isinstance(info, mi.DictType):
        return "an object" + _bounds(info.min_length, info.max_length, " of {} to {} entries",
                                     " of at least {} entries", " of at most {} entries")
    if isinstance(info, mi.LiteralType):
        return "one of " + ", ".join(str(v) for v in info.values)
    words = {mi.BoolType: "true or false", mi.NoneType: "null", mi.RawType: "any JSON value",
             mi.StructType: "an object"}
    return words.get(type(info))


def _bounds(low: Any, high: Any, both: str, at_least: str, at_most: str) -> str:
    """The bounds in words (``""`` when there are none), in one of three templates."""
    if low is not None and high is not None:
        return both.format(low, high)
    if low is not None:
        return at_least.format(low)
    return at_most.format(high) if high is not None else ""


_VALID_BASE: dict[type[Any], dict[str, Any]] = {models.QueueCreate: {"name": "q"}}
"""What a queue's settings are checked beside, one at a time (``every_problem``)."""
SETTINGS_MODELS = (models.QueueCreate, models.QueueSettings)
"""The request models whose every problem is reported at once: a queue's settings."""


def every_problem(
    obj: Any, type_: type[Any], first: msgspec.ValidationError
) -> errors.ValidationError:
    """One ValidationError naming every field of ``obj`` that ``type_`` refuses (a queue's
    settings: ``--max-attempts 0 --retention-ms 5`` gets both said at once), each checked on
    its own; ``first`` (the failure of the whole) when ``obj`` is no mapping or no single
    field fails alone (an unknown field, say)."""
    whole = validation_error(first, source=obj, model=type_)
    if not isinstance(obj, Mapping) or len(obj) < 2:
        return whole
    base = _VALID_BASE.get(type_, {})
    found: list[errors.ValidationError] = []
    for key, value in obj.items():
        try:
            msgspec.convert({**base, key: value}, type_)
        except msgspec.ValidationError as exc:
            found.append(validation_error(exc, source={key: value}, model=type_))
    if len(found) < 2:
        return whole
    return errors.ValidationError(
        "; ".join(e.message for e in found),
        details=[d for e in found for d in (e.details or [])],
    )
