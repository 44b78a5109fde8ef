"""``python -m sqew.server.openapi [--check] [PATH]``: write the app's OpenAPI document to
PATH (default ``docs/openapi.yaml``), or with ``--check`` exit 1 if the file differs from it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sqew.server.app import create_app
from sqew.server.openapi import DEFAULT_PATH, render


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check``, compare) the OpenAPI document; returns an exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m sqew.server.openapi",
        description="Write the REST API's OpenAPI document (docs/openapi.yaml by default).")
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH,
                        help="where to write it (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="compare instead of writing: exit 1 when the file differs")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    path: Path = args.path
    check: bool = args.check
    text = render(create_app())
    if check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            sys.stderr.write(f"{path} is out of date: run `python -m sqew.server.openapi`\n")
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return 0
