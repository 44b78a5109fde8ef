"""The server's settings: one declaration, read from defaults ← a TOML file ← ``SQEW_*``
variables ← ``sqew serve`` options (the later winning).

Each module has one job:

- ``model``: ``Settings``, every setting declared once (type, default, range, meaning);
- ``fields``: the settings as data (``FIELDS``): variable, option, range and description of each;
- ``values``: one value checked against its field, read from text (variables); a mapping of
  values checked at once (``from_mapping``); settings written back as variables (``to_env``);
- ``config_file``: the TOML file read, its problems named by key;
- ``layering``: the sources layered (``resolve``, ``load``), with where each value came from;
- ``problems``: ``Problem`` and ``SettingsError`` (every problem at once);
- ``serve_options``: ``sqew serve``'s options, one per setting;
- ``report``: ``--print-config``'s text and data;
- ``docs_table``: the settings table of docs/cli.md.

``Settings``, ``load``, ``from_mapping``, ``to_env`` and ``SettingsError`` are importable from
the package itself.
"""

from __future__ import annotations

from sqew.settings.layering import load
from sqew.settings.model import CONFIG_ENV, ENV_PREFIX, Settings
from sqew.settings.problems import SettingsError
from sqew.settings.values import from_mapping, to_env

__all__ = ["CONFIG_ENV", "ENV_PREFIX", "Settings", "SettingsError", "from_mapping", "load",
           "to_env"]
