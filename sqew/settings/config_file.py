"""The TOML file of server settings (``--config FILE`` or ``SQEW_CONFIG``), read with its
problems named where they are: unreadable, not TOML, a key given twice (TOML's own rule, and
``a_b`` beside ``a-b``), an unknown key (with the nearest setting's name)."""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Any

from sqew.settings.fields import BY_NAME
from sqew.settings.problems import Problem

_KEY_LINE = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*=""")


def read(path: Path) -> list[Problem | tuple[str, str, Any]]:
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
