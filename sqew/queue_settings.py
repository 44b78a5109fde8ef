"""The queue settings as data, read from their one declaration (``models.QueueSettings``).

Each setting's type, default, range and meaning is declared once, on its field's ``Meta``;
this module turns that into ``SETTINGS`` for whoever lists them: the service's defaults
(``rules.DEFAULTS``), the queue object (``views.queue``), the CLI's ``queue add/update``
options and its help, the documentation test.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from sqew.models import MAX_FLOAT, MAX_INT64, QueueSettings


class Setting(NamedTuple):
    """One queue setting as ``QueueSettings`` declares it (see "queue settings" above)."""

    name: str
    type: type[Any]
    """The Python type of its value: ``int``, ``float``, ``bool`` or ``str``."""
    default: Any
    description: str
    low: int | float | None
    """Smallest value (``Meta.ge``), None when not a number."""
    high: int | float | None
    """Largest value (``Meta.le``), None when not a number."""
    choices: tuple[str, ...]
    """The values of a ``Literal`` (``order``), else empty."""
    range: str
    """The range in words, as the README's settings table and the CLI's help show it."""

    @property
    def default_text(self) -> str:
        """The default in words: ``30000``, ``fifo``, ``no``, ``none``."""
        if self.default is None:
            return "none"
        if isinstance(self.default, bool):
            return "yes" if self.default else "no"
        return _number(self.default) if isinstance(self.default, float) else str(self.default)


def _number(value: float) -> str:
    """``30000``, ``0.5``: integers in full, other floats in their shortest form."""
    return str(int(value)) if value == int(value) else f"{value:g}"


def _setting(field: msgspec.inspect.Field) -> Setting:
    """A ``Setting`` from one field of ``QueueSettings`` (``X | UnsetType [| None]``)."""
    info: Any = field.type
    if isinstance(info, msgspec.inspect.UnionType):  # `| None`: the setting's own type
        (info,) = (t for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
    assert isinstance(info, msgspec.inspect.Metadata), f"{field.name} declares no Meta"
    extra, inner = info.extra or {}, info.type
    description = (info.extra_json_schema or {})["description"]
    kinds: dict[type[Any], type[Any]] = {
        msgspec.inspect.IntType: int, msgspec.inspect.FloatType: float,
        msgspec.inspect.BoolType: bool, msgspec.inspect.StrType: str,
        msgspec.inspect.LiteralType: str,
    }
    low = getattr(inner, "ge", None)
    high = getattr(inner, "le", None)
    choices = tuple(getattr(inner, "values", ()))
    words = extra.get("range")
    if words is None:
        if low is None:
            words = ""
        elif high in (None, MAX_INT64, MAX_FLOAT):  # caps of the storage, not of the setting
            words = f"≥ {_number(low)}"
        else:
            words = f"{_number(low)} \u2013 {_number(high)}"  # an en dash, as in the README
    return Setting(field.name, kinds[type(inner)], extra["default"], description, low, high,
                   choices, words)


SETTINGS: tuple[Setting, ...] = tuple(
    _setting(f) for f in msgspec.inspect.type_info(QueueSettings).fields  # type: ignore[attr-defined]
)
"""Every queue setting, in the order of docs/rest.md's table."""
SETTING_NAMES: tuple[str, ...] = tuple(s.name for s in SETTINGS)
SETTING_DEFAULTS: dict[str, Any] = {s.name: s.default for s in SETTINGS}
