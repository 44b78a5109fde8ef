"""Route handlers, one module per resource; each exports ``HANDLERS``."""

from __future__ import annotations

from sqew import models

MAX_ID = models.MAX_ID
"""The largest message id a database can hold (a signed 64-bit integer): larger ids in a path
or query are a ValidationError, not a failed conversion inside the database driver."""
