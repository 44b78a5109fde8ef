"""One setting's value checked against its field, read from text where it was text.

A TOML file's values have TOML's types (``port = "8888"`` is a string, hence wrong); a
variable's are text (``8888``, ``true``/``false``/``yes``/``no``/``on``/``off``/``1``/``0``; an
empty one unsets a setting that may be unset); flags arrive typed from the option parser.
Numbers must be finite. ``from_mapping`` checks a whole mapping, ``to_env`` writes settings back
as variables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from sqew.settings import fields
from sqew.settings.fields import BY_NAME, Field
from sqew.settings.model import ENV_PREFIX, Settings
from sqew.settings.problems import Problem, SettingsError

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


def check(field: Field, value: Any, *, text: bool = False) -> Any:
    """``value`` as ``field``'s type, within its range.

    Args:
        field: the setting.
        value: its value (``text``: as written in a variable).
        text: read ``value`` from text (numbers, words for booleans, JSON for other types).

    Raises:
        ValueError: what the value must be, and what it is.
    """
    original = value
    try:
        if text:
            value = _from_text(field, str(value))
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError
        return msgspec.convert(value, field.hint)
    except (ValueError, msgspec.ValidationError, msgspec.DecodeError):
        got = "a hidden value" if field.secret else _shown(original)
        raise ValueError(f"must be {field.expects}, got {got}") from None


def _from_text(field: Field, value: str) -> Any:
    word = value.strip().lower()
    if value == "" and field.optional:
        return None
    if field.kind is bool:
        if word in _TRUE | _FALSE:
            return word in _TRUE
        raise ValueError
    if field.choices:
        return word
    if field.kind is int:
        return int(word)
    if field.kind is float:
        return float(word)
    if field.kind is str:
        return value
    return msgspec.json.decode(value)


def _shown(value: Any) -> str:
    """A value as the user wrote it: text quoted (``'8888'``), numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str | int | float) else (
        f"a {type(value).__name__} ({value!r})")


def from_mapping(values: Mapping[str, Any], *, source: str = "settings") -> Settings:
    """Validate settings given as a mapping (strings are read as variables are: ``"8888"``
    → 8888, ``"yes"`` → True).

    Raises:
        SettingsError: every bad or unknown value (a ValidationError).
    """
    problems: list[Problem] = []
    checked: dict[str, Any] = {}
    for name, value in values.items():
        where = f"{source}:{name}"
        if name not in BY_NAME:
            problems.append(Problem(where, "unknown setting"))
            continue
        try:
            checked[name] = check(BY_NAME[name], value, text=isinstance(value, str))
        except ValueError as exc:
            problems.append(Problem(where, str(exc)))
    if problems:
        raise SettingsError(problems)
    return msgspec.convert(checked, Settings)


def to_env(settings: Settings) -> dict[str, str]:
    """``settings`` as ``SQEW_*`` variables (how worker processes receive them)."""
    out: dict[str, str] = {}
    for name in settings.__struct_fields__:
        value = getattr(settings, name)
        if value is None:  # not set: no variable (an empty one would be a value)
            continue
        out[ENV_PREFIX + name.upper()] = fields.text(value)
    return out
