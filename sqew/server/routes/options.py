"""``OPTIONS`` on every path: 204 with an ``Allow`` that lists every method the path serves.

Litestar answers ``OPTIONS`` by itself, but it fixes that answer's ``Allow`` when the first
handler of a path is registered: on a path whose methods are served by several handlers (here,
every method is a handler of its own) it lists only the first one's, and disagrees with the
405 answers and the OpenAPI document. One handler per path, made from all of them, lists all.
"""

from __future__ import annotations

from collections.abc import Iterable

from litestar import Response, route
from litestar.enums import HttpMethod
from litestar.handlers import HTTPRouteHandler


def handlers(routes: Iterable[HTTPRouteHandler]) -> list[HTTPRouteHandler]:
    """An ``OPTIONS`` handler for each path of ``routes`` (register them first: a path that
    already has an ``OPTIONS`` handler gets no other from Litestar)."""
    methods: dict[str, set[str]] = {}
    for handler in routes:
        for path in handler.paths:
            methods.setdefault(path, {"OPTIONS"}).update(handler.http_methods)
    return [_options(path, ", ".join(sorted(allowed))) for path, allowed in methods.items()]


def _options(path: str, allow: str) -> HTTPRouteHandler:
    @route(path, http_method=HttpMethod.OPTIONS, status_code=204, include_in_schema=False,
           sync_to_thread=False, opt={"access": "open"})
    def options() -> Response[None]:
        """The methods this path serves."""
        return Response(content=None, status_code=204, headers={"Allow": allow})

    return options
