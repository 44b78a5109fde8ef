"""The OpenAPI document of the app (``python -m sqew.server.openapi`` writes it: ``generate``).

Litestar describes paths and success responses from the handlers. What it cannot see, or says
loosely, is written here from the same app: request bodies (handlers decode the raw body
themselves, to keep payloads byte-exact; each declares its body model in ``opt["body"]``), with
the rules a model checks across its fields (``json_schema_rules``); the success bodies of the
hot endpoints (which send pre-encoded responses; each declares its model in
``opt["returns"]``); every parameter's schema, from its handler's declaration (exact integer
bounds); the error envelope every operation may answer with; and the refusals the schema cannot
express (a rule between fields, with a header, or against the queue's stored settings), which a
handler names in ``opt["refusals"]``, by status. The document says every rule the server checks:
a request it calls valid is refused only for one of those.
``docs/openapi.yaml`` is this document; a test fails when the two drift.

This package knows the app only as the Litestar object it is given: ``generate``, the command,
builds the app and writes its document.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import msgspec
from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.exceptions import NotFoundException
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler
from litestar.openapi import OpenAPIConfig
from litestar.router import Router
from litestar.types import Empty
from litestar.typing import FieldDefinition

from sqew import __version__, errors, models

DEFAULT_PATH = Path(__file__).resolve().parents[3] / "docs" / "openapi.yaml"
REF = "#/components/schemas/{name}"

DESCRIPTION = """\
sqew's REST API (docs/rest.md): queues, at-least-once delivery with leases, dead-letter queues.
Every error answers with `{"error": {"code", "message", "details"?}}`; 429 answers, and 503
`Overloaded` ones, carry `Retry-After`. Times are epoch milliseconds.

Auth: once the database holds an API key (or with the server setting `require_auth`), every
operation but `healthz` and `readyz` (and `metrics`, unless `metrics_auth` is set) needs
`Authorization: Bearer <key>` with a scope that allows it: missing, malformed, wrong or revoked
keys answer 401 `Unauthorized`, a key without the scope or bound to another queue 403
`Forbidden`, and an address with too many failed attempts 429 `RateLimited`.
"""
SCHEME = "bearer"
SCOPES = {
    "read": "a key with any scope",
    "produce": "a key with the produce (or admin) scope",
    "consume": "a key with the consume (or admin) scope",
    "admin": "a key with the admin scope",
}


def _hidden(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """The app serves no schema pages: every path under them is an unknown path."""
    raise NotFoundException()


def config() -> OpenAPIConfig:
    """The app's OpenAPI configuration (schema built on demand, never served)."""
    return OpenAPIConfig(
        title="sqew",
        version=__version__,
        description=DESCRIPTION,
        openapi_router=Router("/schema", route_handlers=[], include_in_schema=False,
                              guards=[_hidden]),
    )


def document(app: Litestar) -> dict[str, Any]:
    """The complete OpenAPI document of ``app`` as plain JSON data."""
    doc: dict[str, Any] = json.loads(json.dumps(app.openapi_schema.to_schema()))
    schemas: dict[str, Any] = doc.setdefault("components", {}).setdefault("schemas", {})
    operations = {
        op["operationId"]: op
        for item in doc.get("paths", {}).values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    for handler in _handlers(app):
        op = operations[str(handler.operation_id)]
        _parameters(op, handler)
        if "body" in handler.opt:
            op["requestBody"] = _request_body(handler.opt["body"], schemas,
                                              required=not handler.opt.get("body_optional"))
        if "events" in handler.opt:  # server-sent events, each described in words
            success = op["responses"][str(handler.status_code)]
            success["content"] = {"text/event-stream": {"schema": {
                "type": "string", "description": handler.opt["events"]}}}
        if "returns" in handler.opt:
            success = op["responses"][str(handler.status_code)]
            success["content"] = {"application/json": {"schema": _schema(handler.opt["returns"],
                                                                         schemas)}}
        access = handler.opt.get("access", "admin")
        declared = handler.opt.get("errors", ())
        _error_responses(op, quota="429" in declared,
                         overload=op.get("operationId") if "503" in declared else None,
                         keyed=access not in ("open", "metrics"))
        _refusals(op, handler.opt.get("refusals", {}))
        _security(op, access)
    schemas["Error"] = _error_schema()
    doc["components"]["responses"] = key_responses()
    doc["components"]["securitySchemes"] = {SCHEME: {
        "type": "http", "scheme": "bearer",
        "description": "An API key (`sqew_<id>_<secret>`): `sqew keys create`, `POST /keys`.",
    }}
    return doc


def _security(op: dict[str, Any], access: str) -> None:
    """What an operation needs of a key (``opt["access"]``, see ``sqew.server.auth``)."""
    if access == "open":
        op["security"] = []
    elif access == "metrics":  # open unless the server's metrics_auth is on (then admin)
        op["security"] = [{}, {SCHEME: []}]
        op["description"] = (op.get("description", "") + "\n\nOpen, or with the server "
                             "setting `metrics_auth` a key with the admin scope.").strip()
    else:
        op["security"] = [{SCHEME: []}]
        op["description"] = (op.get("description", "") + f"\n\nNeeds {SCOPES[access]} "
                             "once keys are enforced.").strip()


def _refusals(op: dict[str, Any], refusals: dict[str, str]) -> None:
    """The answers to requests the schema calls valid (``opt["refusals"]``: status -> why)."""
    for status, why in refusals.items():
        op["responses"][status] = {"description": "What the schema refuses; and beyond what it "
                                   f"says: {why}", "content": _error_content()}
    if refusals:
        op["description"] = (op.get("description", "") + "\n\nBeyond what the schema says, "
                             "refused with " + ", ".join(sorted(refusals)) + ": see those "
                             "answers.").strip()


def _parameters(op: dict[str, Any], handler: HTTPRouteHandler) -> None:
    """Each parameter's schema from its handler's declaration: Litestar's loses bounds of 0,
    writes others as floats and puts an optional's bounds beside its ``oneOf``."""
    fields = handler.parsed_fn_signature.parameters
    for parameter in op.get("parameters", []):
        field = fields[parameter["name"].lower().replace("-", "_")]
        parameter["schema"] = _parameter_schema(field, parameter["in"])


_BOUNDS = (("minimum", "ge"), ("maximum", "le"), ("minLength", "min_length"),
           ("maxLength", "max_length"), ("pattern", "pattern"))


def _parameter_schema(field: FieldDefinition, where: str) -> dict[str, Any]:
    """The JSON Schema of a path, query or header parameter."""
    kwarg = field.kwarg_definition
    inner = next(a for a in (typing.get_args(field.annotation) or (field.annotation,))
                 if a is not type(None))
    schema: dict[str, Any] = {"type": "integer" if inner is int else "string"}
    extra = {_camel(k): v for k, v in (getattr(kwarg, "schema_extra", None) or {}).items()}
    for ours, theirs in _BOUNDS:
        value = extra.pop(ours, getattr(kwarg, theirs, None))
        if value is not None:
            schema[ours] = int(value) if inner is int else value
    schema.update(extra)
    if field.is_optional and where == "query":
        # Litestar reads a query parameter given as the word null as not given.
        schema = {"anyOf": [schema, {"type": "null"}]}
    if field.default is not None and field.default is not Empty:
        schema["default"] = field.default
    description = getattr(kwarg, "description", None)
    return {**schema, "description": description} if description else schema


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.title() for word in rest)


def _handlers(app: Litestar) -> list[HTTPRouteHandler]:
    out: list[HTTPRouteHandler] = []
    for route in app.routes:
        for handler in getattr(route, "route_handlers", []):
            if isinstance(handler, HTTPRouteHandler) and handler.resolve_include_in_schema():
                out.append(handler)
    return out


def _request_body(body_type: Any, schemas: dict[str, Any], *, required: bool) -> dict[str, Any]:
    """A JSON request body of a model (or a union of models, as ``oneOf``)."""
    schema = _schema(body_type, schemas)
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _schema(model: Any, schemas: dict[str, Any]) -> dict[str, Any]:
    """The schema of a model (or a union of models, as ``oneOf``); components go to ``schemas``."""
    members = typing.get_args(model) if isinstance(model, types.UnionType) else ()
    refs, components = msgspec.json.schema_components(members or (model,), ref_template=REF)
    for name, schema in components.items():
        schema.update(_RULES.get(name, {}))
        known = schemas.setdefault(name, schema)  # Litestar's own, if it described the model
        if _content(known) != _content(schema):
            raise RuntimeError(f"two different schemas named {name}")
    return {"oneOf": list(refs)} if members else refs[0]


_RULES: dict[str, dict[str, Any]] = {
    cls.__name__: rules for cls in vars(models).values()
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct)
    and isinstance(rules := getattr(cls, "json_schema_rules", None), dict)
}
"""What a model checks across its fields, as JSON Schema, by component name."""


def _content(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema as compared: without its description (msgspec's carries the docstring,
    Litestar's none) and with ``required`` in any order (Litestar sorts it)."""
    out = {k: v for k, v in schema.items() if k != "description"}
    if isinstance(out.get("required"), list):
        out["required"] = sorted(out["required"])
    return out


def _error_responses(
    op: dict[str, Any], *, quota: bool, keyed: bool, overload: str | None = None
) -> None:
    """Every operation may answer with the error envelope (Litestar's own 400 shape is not ours);
    those that need a key, 401, 403 and 429 (``KEY_RESPONSES``) too."""
    responses: dict[str, Any] = op.setdefault("responses", {})
    for status in [s for s in responses if not s.startswith("2")]:
        del responses[status]
    if keyed:
        for status, name in (("401", "Unauthorized"), ("403", "Forbidden"),
                             ("429", "TooManyFailures")):
            responses[status] = {"$ref": f"#/components/responses/{name}"}
    if quota:
        responses["429"] = _too_many(
            "Over the queue's max_depth or rate limit (QueueFull, RateLimited)"
            + ("; or too many failed API key attempts from this address (RateLimited)"
               if keyed else "")
        )
    if overload:
        responses["503"] = _too_many(
            "Overloaded: as many long polls and streams wait in the server process as it "
            "allows (max_waiting_polls)" if overload in ("poll", "streamMessages") else
            "Overloaded: writes back up in the server process (backpressure: "
            "overload_pending_writes, overload_wal_bytes, overload_commit_ms); polls and "
            "acks go on"
        )
    responses["default"] = {"description": "An error (sqew's error envelope).",
                            "content": _error_content()}


def key_responses() -> dict[str, Any]:
    """The answers of an operation that needs a key (``components.responses``)."""
    return {
        "Unauthorized": {
            "description": "Unauthorized: no API key, or a malformed, wrong or revoked one.",
            "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
            "content": _error_content(),
        },
        "Forbidden": {
            "description": "Forbidden: the key lacks the scope, or is bound to another queue.",
            "content": _error_content(),
        },
        "TooManyFailures": _too_many(
            "Too many failed API key attempts from this address (RateLimited)"),
    }


def _too_many(why: str) -> dict[str, Any]:
    return {
        "description": f"{why}: retry after `Retry-After` s.",
        "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 0}}},
        "content": _error_content(),
    }


def _error_content() -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": REF.format(name="Error")}}}


def _error_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "additionalProperties": False,
                "properties": {
                    "code": {"type": "string", "enum": error_codes()},
                    "message": {"type": "string"},
                    "details": {"type": "array", "items": {}},
                },
            }
        },
    }


def error_codes() -> list[str]:
    """Every error code (the ``code`` of each SqewError class)."""
    classes = [v for v in vars(errors).values() if isinstance(v, type)]
    return sorted({c.code for c in classes if issubclass(c, errors.SqewError)})


def render(app: Litestar) -> str:
    """The document as YAML text."""
    import yaml  # type: ignore[import-untyped]  # (a Litestar dependency; no stubs here)

    header = "# Generated from the app by `python -m sqew.server.openapi`; do not edit.\n"
    class Dumper(yaml.SafeDumper):  # type: ignore[misc]
        def ignore_aliases(self, data: Any) -> bool:  # plain YAML: no &anchors, *aliases
            return True

    body = yaml.dump(document(app), Dumper=Dumper, sort_keys=False, allow_unicode=True, width=100)
    return header + str(body)
