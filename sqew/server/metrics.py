"""Prometheus metrics of one app: a registry per app (no global state), rendered at /metrics.

Minimal for now: build information. The operations work adds request and queue metrics here.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Info, generate_latest

from sqew import __version__

# Litestar appends the charset to text types itself; giving it twice would repeat it.
CONTENT_TYPE = CONTENT_TYPE_LATEST.replace("; charset=utf-8", "")


class Metrics:
    """The metrics an app exposes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        Info("sqew_build", "sqew build information", registry=self.registry).info(
            {"version": __version__}
        )

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
