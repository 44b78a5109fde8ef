"""AWS's Query protocol for SQS: form-encoded input, XML answers (docs/sqs.md, "Protocols").

Older SDKs and tools send ``Action=<Action>&Version=2012-11-05&…`` (a form body, or a GET's
query string) and read XML: ``<XResponse><XResult>…</XResult><ResponseMetadata>…``, errors as
``<ErrorResponse><Error><Type/><Code/><Message/>``, with the legacy codes
(``AWS.SimpleQueueService.NonExistentQueue``…). The actions are the JSON protocol's own
(``sqew.sqs.actions``): this module only turns a form into the JSON-shaped input and an output
into XML, walking the current service model (``sqew.sqs.service``) for types and structure.

The Query names (``AttributeName.1``, ``MessageAttribute.1.Value.StringValue``,
``SendMessageBatchRequestEntry.1.Id``…) are not in the JSON model: they come from the Query
model that botocore shipped before SQS moved to JSON, kept in ``sqew/sqs/querymodel``
(``scripts/sqs_query_model.py`` writes it) and read at run time. A member newer than that model
goes by its own name, as botocore would serialize it.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from sqew.sqs import service
from sqew.sqs.errors import SqsError

MODEL_DIR = Path(__file__).parent / "querymodel"
"""A botocore data directory holding the Query model (``sqs/2012-11-05/service-2.json``)."""
XMLNS = "http://queue.amazonaws.com/doc/2012-11-05/"
CONTENT_TYPE = "text/xml"
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_ESCAPES = {"\r": "&#13;", '"': "&quot;"}  # (a bare CR would be read back as LF)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold, even escaped (an error message may quote a request's
control characters): each is answered as U+FFFD, so every answer parses."""

Form = dict[str, str]


@functools.cache
def _old() -> dict[str, Any]:
    """The Query model (read once per process)."""
    path = MODEL_DIR / "sqs" / "2012-11-05" / "service-2.json"
    model: dict[str, Any] = json.loads(path.read_text())
    return model


def _old_shape(name: str) -> dict[str, Any]:
    shape: dict[str, Any] = _old()["shapes"].get(name, {})
    return shape


def _old_member(parent: Any, name: str) -> dict[str, Any]:
    member: dict[str, Any] = _old_shape(parent.name).get("members", {}).get(name, {})
    return member


def _flat(parent: Any, name: str, shape: Any) -> bool:
    """Whether member ``name`` (a list or map) of ``parent`` is flattened."""
    old = _old_shape(shape.name)
    if _old_member(parent, name).get("flattened") or old.get("flattened"):
        return True
    return bool(not old and shape.serialization.get("flattened"))


def _key(parent: Any, name: str, shape: Any) -> str:
    """The Query name of member ``name`` of structure ``parent`` (``shape`` its shape)."""
    if shape.type_name == "list" and _flat(parent, name, shape):
        inner = _old_shape(shape.name).get("member", {}).get("locationName")
        if inner:
            return str(inner)
    member = _old_member(parent, name)
    return str(member.get("locationName") or _old_shape(shape.name).get("locationName", name))


def _list_member(shape: Any) -> str:
    return str(_old_shape(shape.name).get("member", {}).get("locationName", "member"))


def _map_names(shape: Any) -> tuple[str, str]:
    old = _old_shape(shape.name)
    return (str(old.get("key", {}).get("locationName", "key")),
            str(old.get("value", {}).get("locationName", "value")))


def decode(form: Form, path_queue_url: str | None = None) -> tuple[str, dict[str, Any]]:
    """The action and JSON-shaped input of a Query request's parameters ``form``. A request
    made to a queue's URL (``path_queue_url``) may leave ``QueueUrl`` out, as AWS allows.

    Raises:
        SqsError: ``InvalidAction``: no ``Action``, or not one of SQS's.
    """
    action = form.get("Action")
    if not action:
        raise SqsError("InvalidAction", "The request has no Action parameter (and no "
                       "X-Amz-Target header).")
    if action not in service.operations():
        raise SqsError("InvalidAction",
                       f"The action or operation requested is invalid: {action[:100]}")
    shape = service.model().operation_model(action).input_shape
    params = _structure(shape, form, "") if shape is not None else {}
    if (path_queue_url is not None and shape is not None and "QueueUrl" in shape.members
            and "QueueUrl" not in params):
        params["QueueUrl"] = path_queue_url
    return action, params


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _structure(shape: Any, form: Form, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, member in shape.members.items():
        value = _read(member, form, _join(prefix, _key(shape, name, member)),
                      _flat(shape, name, member))
        if value is not None:
            out[name] = value
    return out


def _read(shape: Any, form: Form, key: str, flat: bool) -> Any:
    kind = shape.type_name
    if kind == "structure":
        return _structure(shape, form, key) or None
    if kind == "list":
        base = key if flat else f"{key}.{_list_member(shape)}"
        items: list[Any] = []
        while (item := _read(shape.member, form, f"{base}.{len(items) + 1}", False)) is not None:
            items.append(item)
        return items or ([] if form.get(key) == "" else None)
    if kind == "map":
        base = key if flat else f"{key}.entry"
        key_name, value_name = _map_names(shape)
        out: dict[str, Any] = {}
        i = 1
        while (entry := form.get(f"{base}.{i}.{key_name}")) is not None:
            out[entry] = _read(shape.value, form, f"{base}.{i}.{value_name}", False)
            i += 1
        return out or None
    raw = form.get(key)
    if raw is None:
        return None
    if kind == "integer" and _INTEGER.fullmatch(raw):
        return int(raw)
    if kind == "boolean" and raw in ("true", "false"):
        return raw == "true"
    return raw  # (a wrong type is refused by sqew.sqs.inputs, as for JSON)


def waits(form: Form) -> bool:
    """Whether a Query request is a ReceiveMessage that asks to wait (a long poll)."""
    wait = form.get("WaitTimeSeconds", "")
    return (form.get("Action") == "ReceiveMessage" and _INTEGER.fullmatch(wait) is not None
            and int(wait) > 0)


def encode(action: str, output: dict[str, Any], request_id: str) -> bytes:
    """The XML answer of ``action`` with JSON-shaped ``output``."""
    op = service.model().operation_model(action)
    out = [f'<?xml version="1.0" encoding="UTF-8"?><{action}Response xmlns="{XMLNS}">']
    if op.output_shape is not None:
        wrapper = _old()["operations"].get(action, {}).get("output", {}).get(
            "resultWrapper", f"{action}Result")
        out.append(f"<{wrapper}>")
        _members(op.output_shape, output, out)
        out.append(f"</{wrapper}>")
    out.append(f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
               f"</{action}Response>")
    return "".join(out).encode()


def _members(shape: Any, value: dict[str, Any], out: list[str]) -> None:
    for name, member in shape.members.items():
        if name in value and value[name] is not None:
            _write(member, value[name], _key(shape, name, member),
                   _flat(shape, name, member), out)


def _write(shape: Any, value: Any, tag: str, flat: bool, out: list[str]) -> None:
    kind = shape.type_name
    if kind == "structure":
        out.append(f"<{tag}>")
        _members(shape, value, out)
        out.append(f"</{tag}>")
    elif kind == "list":
        if not flat:
            out.append(f"<{tag}>")
        for item in value:
            _write(shape.member, item, tag if flat else _list_member(shape), False, out)
        if not flat:
            out.append(f"</{tag}>")
    elif kind == "map":
        key_name, value_name = _map_names(shape)
        if not flat:
            out.append(f"<{tag}>")
        for k, v in value.items():
            out.append(f"<{tag if flat else 'entry'}><{key_name}>{_text(k)}</{key_name}>")
            _write(shape.value, v, value_name, False, out)
            out.append(f"</{tag if flat else 'entry'}>")
        if not flat:
            out.append(f"</{tag}>")
    else:
        out.append(f"<{tag}>{_text(value)}</{tag}>")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(_NOT_XML.sub("\ufffd", str(value)), _ESCAPES)


def error(exc: SqsError, request_id: str) -> bytes:
    """The XML body of error ``exc``: its legacy code, as the Query protocol names errors."""
    return (f'<?xml version="1.0" encoding="UTF-8"?><ErrorResponse xmlns="{XMLNS}"><Error>'
            f"<Type>{exc.fault}</Type><Code>{_text(exc.legacy_code)}</Code>"
            f"<Message>{_text(exc.message)}</Message><Detail/></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>").encode()
