"""An action's input checked against its shape in the service model (``sqew.sqs.service``)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from sqew.sqs import service
from sqew.sqs.errors import SqsError

OWN_ENUM_CHECK = frozenset({("ReceiveMessage", "AttributeNames")})
"""Members whose enum an action checks itself: ReceiveMessage's ``AttributeNames`` is modelled
as queue attribute names, but SQS takes (and SDKs send) message system attribute names there."""


def check_input(action: str, params: Any) -> dict[str, Any]:
    """``params`` checked against ``action``'s input shape, blobs decoded from base64.

    Members the model does not know are left out (an AWS service ignores them too, so a
    newer SDK's additions do no harm).

    Raises:
        SqsError: ``MissingParameter`` (a required member absent), ``InvalidAttributeName``
            (an attribute name outside the model's enum) or ``InvalidParameterValue`` (a
            value of the wrong type, or outside its enum).
    """
    shape = service.model().operation_model(action).input_shape
    if shape is None:
        return {}
    return _structure(shape, params, action, "")


def _structure(shape: Any, value: Any, action: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SqsError("InvalidParameterValue",
                     f"Value for parameter {path or 'the request body'} must be an object.")
    required, members = _plan(shape)
    out: dict[str, Any] = {}
    for name in required:
        if value.get(name) is None:
            raise SqsError("MissingParameter",
                         f"The request must contain the parameter {path + name}.")
    for name, member, plain in members:
        got = value.get(name)
        if got is None:  # JSON null is how some SDKs leave a member out
            continue
        if type(got) is plain:  # a string without an enum, an integer, a boolean: as it is
            out[name] = got
            continue
        check_enum = bool(path) or (action, name) not in OWN_ENUM_CHECK
        out[name] = _value(member, got, action, f"{path}{name}", check_enum)
    return out


Plan = tuple[list[str], list[tuple[str, Any, type | None]]]
_plans: dict[int, tuple[Any, Plan]] = {}


def _plan(shape: Any) -> Plan:
    """A structure shape's required members, and each member with the one Python type that
    it takes as it is, unchecked further (None: any value goes through ``_value``); worked
    out once per shape (the model's shapes live as long as the process)."""
    got = _plans.get(id(shape))
    if got is None:
        members = [(name, member, _PLAIN.get(member.type_name)
                    if not (member.type_name == "string" and member.enum) else None)
                   for name, member in shape.members.items()]
        got = _plans[id(shape)] = (shape, (list(shape.required_members), members))
    return got[1]


_PLAIN: dict[str, type] = {"string": str, "integer": int, "boolean": bool}
"""The model's types whose values a JSON decoder gives as exactly this Python type (an
integer's never a ``bool``: ``type(True) is bool``)."""


def _value(shape: Any, value: Any, action: str, path: str, check_enum: bool = True) -> Any:
    kind = shape.type_name
    if kind == "structure":
        return _structure(shape, value, action, f"{path}.")
    if kind == "list":
        if not isinstance(value, list):
            raise _wrong(path, "a list")
        return [_value(shape.member, v, action, f"{path}.{i + 1}", check_enum)
                for i, v in enumerate(value)]
    if kind == "map":
        if not isinstance(value, dict):
            raise _wrong(path, "a map")
        return {_value(shape.key, k, action, f"{path}.key", check_enum):
                _value(shape.value, v, action, f"{path}.{k}", check_enum)
                for k, v in value.items()}
    if kind == "string":
        if not isinstance(value, str):
            raise _wrong(path, "a string")
        if check_enum and shape.enum and value not in shape.enum:
            if shape.name.endswith("AttributeName"):
                raise SqsError("InvalidAttributeName", f"Unknown Attribute {value}.")
            raise SqsError("InvalidParameterValue",
                         f"Value {value} for parameter {path} is invalid.")
        return value
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            raise _wrong(path, "an integer")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _wrong(path, "a boolean")
        return value
    if kind == "blob":
        if not isinstance(value, str):
            raise _wrong(path, "base64 text")
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            raise _wrong(path, "base64 text") from None
    raise _wrong(path, kind)  # (no other kind appears in SQS's inputs)


def _wrong(path: str, what: str) -> SqsError:
    return SqsError("InvalidParameterValue", f"Value for parameter {path} must be {what}.")


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` decoded, if it is a JSON object (a policy attribute's value); else None."""
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None
