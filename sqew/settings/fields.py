"""The server settings as data, read from their one declaration (``sqew.settings.model``).

Each setting's type, default and range is declared once, on its field; its meaning once, in the
``Attributes:`` section of the class docstring. This module turns both into ``FIELDS`` for
whoever lists or checks them: the layering of sources (``sqew.settings.layering``), the
``sqew serve`` options and their help (``sqew.settings.serve_options``), ``--print-config``
(``sqew.settings.report``), and the settings table of docs/cli.md
(``sqew.settings.docs_table``). A field added to ``Settings`` gets all of these with nothing
listed by hand.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any, NamedTuple

import msgspec

from sqew import locations
from sqew.settings.model import ENV_PREFIX, Settings

SCALARS: tuple[type[Any], ...] = (bool, int, float, str)
SECRET_NAME = re.compile(r"secret|password|passwd|token", re.IGNORECASE)


class Field(NamedTuple):
    """One setting of ``Settings``."""

    name: str
    kind: type[Any]
    """``bool``, ``int``, ``float`` or ``str`` (``str`` for a ``Literal``); ``object`` for any
    other type, whose values are written as JSON in the environment and on the command line."""
    optional: bool
    """``None`` is a value (not set)."""
    default: Any
    description: str
    """From the ``Attributes:`` section of the ``Settings`` docstring ('' if missing)."""
    choices: tuple[str, ...]
    """The values of a ``Literal``, in declared order; else empty."""
    low: float | None
    low_open: bool
    """``low`` itself is excluded (``gt``) rather than allowed (``ge``)."""
    high: float | None
    hint: Any
    """The annotation, for ``msgspec.convert``."""

    @property
    def env(self) -> str:
        """The environment variable: ``SQEW_<NAME>``."""
        return ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        """The ``sqew serve`` option: ``--kebab-case``."""
        return "--" + self.name.replace("_", "-")

    @property
    def secret(self) -> bool:
        """Whether the value is never shown (a name with secret, password or token)."""
        return bool(SECRET_NAME.search(self.name))

    @property
    def expects(self) -> str:
        """What a value must be, in words: ``an integer between 0 and 65535``."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        noun = {bool: "true or false", int: "an integer", float: "a number",
                str: "a string"}.get(self.kind, "a JSON value of the right shape")
        return noun + (f" {self.range}" if self.range else "")

    @property
    def range(self) -> str:
        """The range in words: ``between 1 and 256``, ``≥ 1``, ``> 0``; '' without one."""
        if self.low is not None and self.high is not None and not self.low_open:
            return f"between {number(self.low)} and {number(self.high)}"
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '≥'} {number(self.low)}")
        if self.high is not None:
            parts.append(f"≤ {number(self.high)}")
        return " and ".join(parts)

    @property
    def default_text(self) -> str:
        """The default in words: ``8888``, ``normal``, ``true``, ``none``."""
        return text(self.default)

    def shown(self, value: Any) -> str:
        """``value`` as ``--print-config`` and logs show it (secrets hidden)."""
        if value is None:
            return "none"
        if self.secret:
            return "***"
        return hide_password(text(value))


def number(value: float) -> str:
    """``30000``, ``0.5``: integers in full, other floats in their shortest form."""
    return str(int(value)) if value == int(value) else f"{value:g}"


def text(value: Any) -> str:
    """A setting's value in words, as a TOML file or a variable would give it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, str | int):
        return str(value)
    return msgspec.json.encode(value).decode()


def hide_password(value: str) -> str:
    """A URL's secrets replaced by ``***`` (``postgresql://u:***@h/db``, ``?password=***``,
    ``?sslpassword=***``: every parameter libpq treats as secret); anything else as is
    (``sqew.locations.shown``)."""
    return locations.shown(value)


def descriptions(doc: str) -> dict[str, str]:
    """``{name: text}`` from the ``Attributes:`` section of a Google-style docstring."""
    out: dict[str, str] = {}
    lines = inspect.cleandoc(doc).splitlines()
    try:
        start = lines.index("Attributes:") + 1
    except ValueError:
        return out
    current: str | None = None
    for line in lines[start:]:
        if line.strip() and not line.startswith(" "):
            break  # the next section
        entry = re.match(r"^    (\w+): (.*)$", line)
        if entry:
            current = entry.group(1)
            out[current] = entry.group(2).strip()
        elif current is not None and line.startswith("        "):
            out[current] += " " + line.strip()
    return out


def _field(info: msgspec.inspect.Field, hint: Any, doc: dict[str, str]) -> Field:
    inner: Any = info.type
    optional = False
    if isinstance(inner, msgspec.inspect.UnionType):
        rest = [t for t in inner.types if not isinstance(t, msgspec.inspect.NoneType)]
        optional = len(rest) < len(inner.types)
        inner = rest[0] if len(rest) == 1 else inner
    if isinstance(inner, msgspec.inspect.Metadata):
        inner = inner.type
    kinds: dict[type[Any], type[Any]] = {
        msgspec.inspect.BoolType: bool, msgspec.inspect.IntType: int,
        msgspec.inspect.FloatType: float, msgspec.inspect.StrType: str,
        msgspec.inspect.LiteralType: str,
    }
    choices: tuple[str, ...] = ()
    if isinstance(inner, msgspec.inspect.LiteralType):
        choices = tuple(_literal_values(hint))
    low, low_open = getattr(inner, "ge", None), False
    if low is None and getattr(inner, "gt", None) is not None:
        low, low_open = inner.gt, True
    high = getattr(inner, "le", None)
    default = None if info.default is msgspec.NODEFAULT else info.default
    return Field(info.name, kinds.get(type(inner), object), optional, default,
                 doc.get(info.name, ""), choices, low, low_open, high, hint)


def _literal_values(hint: Any) -> list[str]:
    """The values of the ``Literal`` inside ``hint`` (``Annotated``, ``| None``), in order."""
    if typing.get_origin(hint) is typing.Literal:
        return [str(v) for v in typing.get_args(hint)]
    for arg in typing.get_args(hint):
        found = _literal_values(arg)
        if found:
            return found
    return []


def _fields() -> tuple[Field, ...]:
    hints = typing.get_type_hints(Settings, include_extras=True)
    doc = descriptions(Settings.__doc__ or "")
    info: Any = msgspec.inspect.type_info(Settings)
    return tuple(_field(f, hints[f.name], doc) for f in info.fields)


FIELDS: tuple[Field, ...] = _fields()
"""Every server setting, in the order of ``Settings``."""
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
