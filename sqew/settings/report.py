"""The effective settings and where each came from, as ``sqew serve --print-config`` shows
them (text, or data for ``--json``); secrets hidden, passwords in URLs masked."""

from __future__ import annotations

from typing import Any

from sqew.settings.fields import FIELDS, hide_password
from sqew.settings.layering import Resolved


def as_data(resolved: Resolved) -> dict[str, Any]:
    """The effective settings as ``--print-config --json`` prints them."""
    settings: dict[str, Any] = {}
    for f in FIELDS:
        value = getattr(resolved.settings, f.name)
        if value is not None and f.secret:
            value = "***"
        elif isinstance(value, str):
            value = hide_password(value)
        source = resolved.sources[f.name]
        settings[f.name] = {"value": value, "source": source.kind, "where": source.where}
    return {"config_file": resolved.config_file, "config_from": resolved.config_from,
            "settings": settings}


def as_text(resolved: Resolved) -> str:
    """The effective settings as ``--print-config`` prints them: the config file read (if
    any), then one line per setting: its name, value (secrets hidden) and source."""
    rows = [("setting", "value", "source")]
    rows += [(f.name, f.shown(getattr(resolved.settings, f.name)), str(resolved.sources[f.name]))
             for f in FIELDS]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = []
    if resolved.config_file is not None:
        lines.append(f"config file: {resolved.config_file} (from {resolved.config_from})")
    lines += [f"{n:<{widths[0]}}  {v:<{widths[1]}}  {s}".rstrip() for n, v, s in rows]
    return "\n".join(lines)
