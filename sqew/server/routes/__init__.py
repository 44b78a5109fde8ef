"""Route handlers, one module per resource; each exports ``HANDLERS``."""

from __future__ import annotations

MAX_ID = 2**63 - 1
"""The largest message id a database can hold (a signed 64-bit integer): larger ids in a path
or query are a ValidationError, not a failed conversion inside the database driver."""
