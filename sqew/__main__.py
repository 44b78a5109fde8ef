"""``python -m sqew``: the same as the ``sqew`` command."""

from __future__ import annotations

from sqew.cli import main

if __name__ == "__main__":
    main()
