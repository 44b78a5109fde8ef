"""The server settings from their sources: defaults ← TOML file ← ``SQEW_*`` variables ← flags.

``resolve`` layers them once, at the edge, and remembers where each value came from (for
``sqew serve --print-config``). Every problem of every source is collected before anything is
refused, so one run shows them all: an unknown key (with the nearest setting's name), a key
given twice (TOML's own rule, and ``a_b`` beside ``a-b``), a value of the wrong type, a value
out of range; each named by where it was given (``sqew.toml:port``, ``SQEW_PORT``, ``--port``).

How values are read: a TOML file's values have TOML's types (``port = "8888"`` is a string,
hence wrong); a variable's are text (``8888``, ``true``/``false``/``yes``/``no``/``on``/``off``/
``1``/``0``; an empty one unsets a setting that may be unset); flags arrive typed from the
option parser. Numbers must be finite.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

import msgspec

from sqew import errors
from sqew.config import CONFIG_ENV, Settings
from sqew.config_fields import BY_NAME, FIELDS, Field

Kind = Literal["default", "file", "env", "flag"]
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}
_KEY_LINE = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*=""")


class Source(NamedTuple):
    """Where a setting's value came from."""

    kind: Kind
    where: str | None = None
    """``sqew.toml:port``, ``SQEW_PORT``, ``--port``; None for a default."""

    def __str__(self) -> str:
        return self.where or "default"


class Problem(NamedTuple):
    """One thing wrong with the settings, and where it was given."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class SettingsError(errors.ValidationError):
    """The settings have problems (``problems``, in the order of their sources); the message
    holds them all, one per line after the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        count = len(problems)
        head = f"{count} problem{'s' if count > 1 else ''} in the server settings:"
        super().__init__("\n".join([head, *(f"  {p}" for p in problems)]),
                         details=[{"field": p.where, "message": p.message} for p in problems])


class Resolved(NamedTuple):
    """The effective settings, where each came from, and the config file read (if any)."""

    settings: Settings
    sources: dict[str, Source]
    config_file: str | None
    config_from: str | None
    """``--config`` or ``SQEW_CONFIG``: what named the file."""


def resolve(
    config: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Resolved:
    """Layer defaults, a TOML file, ``SQEW_*`` variables and flags (``None`` = not given).

    Args:
        config: the TOML file (given as ``--config``); else ``$SQEW_CONFIG`` if set.
        env: the environment (default ``os.environ``).
        flags: values from the command line by setting name.

    Raises:
        SettingsError: every problem found, in all sources.
    """
    env = os.environ if env is None else env
    given_by = "--config" if config is not None else CONFIG_ENV
    path = os.fspath(config) if config is not None else env.get(CONFIG_ENV) or None
    problems: list[Problem] = []
    values: dict[str, tuple[Any, Source]] = {}
    if path is not None:
        for item in _read_file(Path(path)):
            if isinstance(item, Problem):
                problems.append(item)
            else:
                key, name, value = item
                _take(values, problems, BY_NAME[name], value, Source("file", f"{path}:{key}"))
    for f in FIELDS:
        if f.env in env:
            _take(values, problems, f, env[f.env], Source("env", f.env))
    for name, value in (flags or {}).items():
        if value is not None:
            _take(values, problems, BY_NAME[name], value, Source("flag", BY_NAME[name].flag))
    if problems:
        raise SettingsError(problems)
    try:
        settings = msgspec.convert({k: v for k, (v, _) in values.items()}, Settings)
    except msgspec.ValidationError as exc:  # a rule across fields a future Settings may add
        raise SettingsError([Problem("settings", str(exc))]) from None
    sources = {f.name: values[f.name][1] if f.name in values else Source("default")
               for f in FIELDS}
    return Resolved(settings, sources, path, given_by if path is not None else None)


def _take(values: dict[str, tuple[Any, Source]], problems: list[Problem], field: Field,
          value: Any, source: Source) -> None:
    """Check ``value`` for ``field`` and keep it, or note the problem."""
    try:
        values[field.name] = (check(field, value, text=source.kind == "env"), source)
    except ValueError as exc:
        problems.append(Problem(str(source), str(exc)))


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


# --- the file ------------------------------------------------------------------------------------
def _read_file(path: Path) -> list[Problem | tuple[str, str, Any]]:
    """The file's ``(key, setting name, value)`` in its order, and its problems where they
    are (unreadable, not TOML, a key given twice, an unknown key)."""
    try:
        document = path.read_bytes().decode("utf-8")
    except OSError as exc:
        return [Problem(str(path), f"cannot read the config file: {exc.strerror or exc}")]
    except UnicodeDecodeError:
        return [Problem(str(path), "the config file is not UTF-8 text")]
    try:
        data = tomllib.loads(document)
    except tomllib.TOMLDecodeError as exc:
        return list(_toml_problems(path, document, exc))
    out: list[Problem | tuple[str, str, Any]] = []
    written: dict[str, str] = {}  # setting name -> the key that gave it
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in BY_NAME:
            out.append(Problem(f"{path}:{key}", _unknown(key, value)))
        elif name in written:
            out.append(Problem(f"{path}:{key}", f"the setting {name} is given twice, as "
                               f"{written[name]} and as {key}"))
        else:
            written[name] = key
            out.append((key, name, value))
    return out


def _unknown(key: str, value: Any) -> str:
    if isinstance(value, dict):
        return "unknown setting (the file holds settings at its top level, with no tables)"
    near = difflib.get_close_matches(key.replace("-", "_"), list(BY_NAME), n=1)
    return "unknown setting" + (f" (did you mean {near[0]}?)" if near else "")


def _toml_problems(path: Path, document: str, exc: tomllib.TOMLDecodeError) -> list[Problem]:
    """What TOML refused, named by key where it is a key given twice."""
    if str(exc).startswith("Cannot overwrite a value"):
        twice = _keys_given_twice(document)
        if twice:
            return [Problem(f"{path}:{key}", f"given twice (lines {', '.join(map(str, lines))});"
                            " TOML allows a key once") for key, lines in twice.items()]
    return [Problem(str(path), f"not valid TOML: {exc}")]


def _keys_given_twice(document: str) -> dict[str, list[int]]:
    """Top-level ``key = …`` lines whose key comes more than once (1-based line numbers)."""
    seen: dict[str, list[int]] = {}
    for number, line in enumerate(document.splitlines(), 1):
        if line.lstrip().startswith("["):
            break  # a table: the settings are all above it
        match = _KEY_LINE.match(line)
        if match:
            seen.setdefault(match.group(1).strip("\"'"), []).append(number)
    return {key: lines for key, lines in seen.items() if len(lines) > 1}
