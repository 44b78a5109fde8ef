"""``sqew serve``'s settings options, generated from ``sqew.settings.model.Settings``.

Every server setting is an option of ``serve`` (``--kebab-case``; ``--x/--no-x`` for a
boolean), made from ``sqew.settings.fields.FIELDS`` as ``queue add``'s are from the queue
settings: the help is the setting's description, its variable, default and range. The option
parser checks only that a value is of the option's type (an integer, one of the choices:
else a usage error, exit 2, as for every sqew command); ranges are checked with the file's and
the environment's values, so every problem is reported at once (``sqew.settings.layering``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from enum import Enum, StrEnum
from typing import Annotated, Any

import typer
from rich.markup import escape

from sqew.settings.fields import FIELDS, Field

PANEL = "Settings (also from --config FILE and SQEW_* variables)"
# Metavars of the options docs/cli.md shows; the others are named after their type.
_METAVARS = {"db": "PATH", "host": "HOST", "port": "PORT", "workers": "N", "tls_cert": "FILE",
             "tls_key": "FILE", "log_level": "LEVEL"}
_TYPE_METAVARS: dict[type[Any], str] = {int: "INTEGER", float: "NUMBER", str: "TEXT",
                                        object: "JSON"}


def help_text(field: Field) -> str:
    """An option's help: the description, then its variable, default and range."""
    description = field.description.replace("``", "`")
    words = [description[:1].upper() + description[1:]] if description else []
    if field.choices:
        words.append(f"One of: {', '.join(field.choices)}.")
    elif field.range:
        words.append(f"Range: {field.range}.")
    words.append(f"Env: {field.env}. Default: {field.default_text}.")
    return escape(" ".join(words))


def _option(field: Field) -> inspect.Parameter:
    """The option of one setting (None = not given)."""
    extra: dict[str, Any] = {}
    annotation: Any = field.kind if field.kind is not object else str
    if field.kind is bool:
        names = f"{field.flag}/--no-{field.flag[2:]}"
        extra["show_default"] = False
    else:
        names = field.flag
        extra["metavar"] = _METAVARS.get(field.name) or (
            "|".join(field.choices) if field.choices else _TYPE_METAVARS[field.kind])
    if field.choices:  # an Enum: the parser refuses other values (a usage error)
        annotation = _choices(field)
        extra["case_sensitive"] = False
    option = typer.Option(names, help=help_text(field), rich_help_panel=PANEL, **extra)
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[annotation | None, option])


def _choices(field: Field) -> type[StrEnum]:
    """An Enum of the setting's choices, for the option parser."""
    choices: type[StrEnum] = StrEnum(  # type: ignore[misc]
        f"{field.name}_choices", {c: c for c in field.choices})
    return choices


def with_setting_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command(ctx, ..., **settings)`` one option per server setting.

    Typer reads a command's options from its signature: the generated one lists the
    command's own parameters, then every field of ``Settings``.
    """
    own = list(inspect.signature(command, eval_str=True).parameters.values())[:-1]  # **settings
    command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*own, *(_option(f) for f in FIELDS)])
    return command


def given(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings given as options, as plain values (None = not given)."""
    return {k: v.value if isinstance(v, Enum) else v for k, v in settings.items()
            if v is not None}
