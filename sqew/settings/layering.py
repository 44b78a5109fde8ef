"""The server settings from their sources: defaults ← TOML file ← ``SQEW_*`` variables ← flags.

``resolve`` layers them once, at the edge, and remembers where each value came from (for
``sqew serve --print-config``). Every problem of every source is collected before anything is
refused, so one run shows them all: an unknown key (with the nearest setting's name), a key
given twice, a value of the wrong type, a value out of range; each named by where it was given
(``sqew.toml:port``, ``SQEW_PORT``, ``--port``). How each source's values are read:
``sqew.settings.values``; the file: ``sqew.settings.config_file``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

import msgspec

from sqew.settings import config_file
from sqew.settings.fields import BY_NAME, FIELDS, Field
from sqew.settings.model import CONFIG_ENV, Settings
from sqew.settings.problems import Problem, SettingsError
from sqew.settings.values import check

Kind = Literal["default", "file", "env", "flag"]


class Source(NamedTuple):
    """Where a setting's value came from."""

    kind: Kind
    where: str | None = None
    """``sqew.toml:port``, ``SQEW_PORT``, ``--port``; None for a default."""

    def __str__(self) -> str:
        return self.where or "default"


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
        for item in config_file.read(Path(path)):
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


def load(
    config: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None,
    **flags: Any,
) -> Settings:
    """The effective settings of ``resolve`` (``flags`` by setting name; ``None`` = not given).

    Raises:
        SettingsError: every problem found, in all sources (a ValidationError).
    """
    return resolve(config, env=env, flags=flags).settings


def _take(values: dict[str, tuple[Any, Source]], problems: list[Problem], field: Field,
          value: Any, source: Source) -> None:
    """Check ``value`` for ``field`` and keep it, or note the problem."""
    try:
        values[field.name] = (check(field, value, text=source.kind == "env"), source)
    except ValueError as exc:
        problems.append(Problem(str(source), str(exc)))
