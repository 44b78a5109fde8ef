"""AWS's SQS service model, read from botocore at run time, and input checked against it.

botocore ships the model every AWS SDK is generated from (the same JSON): its operations,
their input shapes (members, required members, types, enums) and the modelled exceptions. The
endpoint reads it here rather than copying tables out of it, so an action's input is checked
against exactly what boto3 sends, and the error names are the ones boto3 knows.
"""

from __future__ import annotations

import base64
import binascii
import functools
from typing import TYPE_CHECKING, Any

from botocore.loaders import Loader
from botocore.model import ServiceModel

if TYPE_CHECKING:  # the errors module reads the model too: imported inside the checks
    from sqew.sqs.errors import SqsError

TARGET_PREFIX = "AmazonSQS."
"""``X-Amz-Target`` of an SQS request: this prefix, then the action's name."""

OWN_ENUM_CHECK = frozenset({("ReceiveMessage", "AttributeNames")})
"""Members whose enum an action checks itself: ReceiveMessage's ``AttributeNames`` is modelled
as queue attribute names, but SQS takes (and SDKs send) message system attribute names there."""


@functools.cache
def model() -> ServiceModel:
    """The SQS service model of the installed botocore (read once per process; read-only)."""
    return ServiceModel(Loader().load_service_model("sqs", "service-2"), "sqs")


@functools.cache
def exceptions() -> frozenset[str]:
    """The names of the model's modelled exceptions (``QueueDoesNotExist``, …)."""
    return frozenset(s.name for s in model().error_shapes)


def operations() -> list[str]:
    """Every action of the model, by name."""
    return list(model().operation_names)


def enum(shape_name: str) -> list[str]:
    """The values of one of the model's enum shapes (``QueueAttributeName``, …)."""
    return list(model().shape_for(shape_name).enum)


def check_input(action: str, params: Any) -> dict[str, Any]:
    """``params`` checked against ``action``'s input shape, blobs decoded from base64.

    Members the model does not know are left out (an AWS service ignores them too, so a
    newer SDK's additions do no harm).

    Raises:
        SqsError: ``MissingParameter`` (a required member absent), ``InvalidAttributeName``
            (an attribute name outside the model's enum) or ``InvalidParameterValue`` (a
            value of the wrong type, or outside its enum).
    """
    shape = model().operation_model(action).input_shape
    if shape is None:
        return {}
    return _structure(shape, params, action, "")


def _error(code: str, message: str) -> SqsError:
    from sqew.sqs.errors import SqsError

    return SqsError(code, message)


def _structure(shape: Any, value: Any, action: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _error("InvalidParameterValue",
                     f"Value for parameter {path or 'the request body'} must be an object.")
    out: dict[str, Any] = {}
    for name in shape.required_members:
        if value.get(name) is None:
            raise _error("MissingParameter",
                         f"The request must contain the parameter {path + name}.")
    for name, member in shape.members.items():
        got = value.get(name)
        if got is None:  # JSON null is how some SDKs leave a member out
            continue
        check_enum = bool(path) or (action, name) not in OWN_ENUM_CHECK
        out[name] = _value(member, got, action, f"{path}{name}", check_enum)
    return out


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
                raise _error("InvalidAttributeName", f"Unknown Attribute {value}.")
            raise _error("InvalidParameterValue",
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
    return _error("InvalidParameterValue", f"Value for parameter {path} must be {what}.")
