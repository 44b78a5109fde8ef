"""``python -m sqew.server.openapi``: see ``sqew.server.openapi.generate``."""

from __future__ import annotations

import sys

from sqew.server.openapi.generate import main

if __name__ == "__main__":
    sys.exit(main())
