"""Route handlers, one module per resource; each exports ``HANDLERS``."""

from __future__ import annotations
