"""docs/openapi.yaml is the app's own document, and the live server keeps its promises.

The drift test regenerates the document from the app. The schemathesis run sends generated
requests (valid and invalid) for every operation to a live server on 127.0.0.1: no answer may
be a 5xx, and every answer must match the document (status, content type, body schema).
"""

from __future__ import annotations

from typing import Any

import schemathesis
import yaml
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sqew.server import openapi
from sqew.server.app import create_app

schema = schemathesis.openapi.from_path(openapi.DEFAULT_PATH)


def test_the_document_is_up_to_date() -> None:
    assert openapi.main(["--check"]) == 0, "run `python -m sqew.server.openapi`"


def test_every_route_is_documented_with_an_explicit_operation_id() -> None:
    app = create_app()
    doc = yaml.safe_load(openapi.DEFAULT_PATH.read_text())
    documented = {
        (path, method.upper()): op["operationId"]
        for path, item in doc["paths"].items() for method, op in item.items()
    }
    for route in app.routes:
        for handler in getattr(route, "route_handlers", []):
            if not handler.resolve_include_in_schema():
                continue
            assert isinstance(handler.operation_id, str), handler  # explicit, not generated
            for method in handler.http_methods:
                path = route.path_format
                assert documented.get((path, method)) == handler.operation_id, (path, method)
    assert len(documented) == 22  # SPEC §2 without /keys


@schema.parametrize()
@settings(max_examples=8, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_the_live_server_keeps_the_document(case: Any, module_server: Any) -> None:
    case.call_and_validate(
        base_url=module_server.url,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                response_schema_conformance],
    )
