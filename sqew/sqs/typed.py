"""Typed message attributes (String, Number, Binary, with custom ``.type`` suffixes) and the
checks SQS makes on them and on message bodies (docs/sqs.md).

AWS documents these rules (they are not in the service model, which types every value as a
string): up to 10 attributes; a name of 1-256 characters of ``A-Z a-z 0-9 _ - .``, not
starting with ``AWS.`` or ``Amazon.``, with no leading, trailing or doubled period; a data type
of ``String``, ``Number`` or ``Binary`` and an optional custom suffix; a non-empty value of the
type's kind, a Number being a decimal of at most 38 significant digits between -10^128 and
10^126; text of XML's allowed characters.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqew.sqs.errors import SqsError, invalid

MAX_ATTRIBUTES = 10
MAX_NAME = 256
BASE_TYPES = ("String", "Number", "Binary")
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,256}")
_RESERVED_PREFIXES = ("aws.", "amazon.")
_BAD_CHARACTER = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Attribute:
    """One typed attribute: its data type and its value (``text`` or ``binary``)."""

    data_type: str
    text: str = ""
    binary: bytes = b""

    @property
    def is_binary(self) -> bool:
        """Whether the value is binary (the base type is ``Binary``)."""
        return self.data_type.split(".", 1)[0] == "Binary"

    def size(self, name: str) -> int:
        """What the attribute counts toward a message's size (name, type and value)."""
        value = len(self.binary) if self.is_binary else len(self.text.encode())
        return len(name.encode()) + len(self.data_type.encode()) + value

    def to_wire(self) -> dict[str, str]:
        """The attribute as SQS's JSON answers it (binary values in base64)."""
        if self.is_binary:
            return {"DataType": self.data_type,
                    "BinaryValue": base64.b64encode(self.binary).decode()}
        return {"DataType": self.data_type, "StringValue": self.text}

    def to_stored(self) -> list[str]:
        """``[data type, value]`` (binary in base64): how the envelope keeps it."""
        if self.is_binary:
            return [self.data_type, base64.b64encode(self.binary).decode()]
        return [self.data_type, self.text]

    @classmethod
    def from_stored(cls, stored: Any) -> Attribute | None:
        """The attribute kept as ``to_stored`` made it; None for anything else."""
        if not (isinstance(stored, list) and len(stored) == 2
                and all(isinstance(s, str) for s in stored)):
            return None
        data_type, value = stored
        if data_type.split(".", 1)[0] == "Binary":
            try:
                return cls(data_type, binary=base64.b64decode(value, validate=True))
            except ValueError:
                return None
        return cls(data_type, text=value)


def check_text(text: str, what: str) -> None:
    """Refuse text with characters outside XML's allowed set, as SQS does.

    Raises:
        SqsError: ``InvalidMessageContents``.
    """
    if text.isprintable():  # (no control, surrogate or non-character: the usual text, fast)
        return
    bad = _BAD_CHARACTER.search(text)
    if bad is not None:
        raise SqsError("InvalidMessageContents",
                       f"Invalid characters found. Deleted message: {what} contains the "
                       f"character #x{ord(bad.group()):X}, which is not allowed.")


def user_attributes(given: dict[str, Any] | None) -> dict[str, Attribute]:
    """A message's ``MessageAttributes`` (already shaped by the service model), checked.

    Raises:
        SqsError: ``InvalidParameterValue`` for any rule above that they break.
    """
    if not given:
        return {}
    if len(given) > MAX_ATTRIBUTES:
        raise invalid(f"Number of message attributes [{len(given)}] exceeds the allowed "
                      f"maximum [{MAX_ATTRIBUTES}].")
    return {check_name(name): _attribute(name, value, "user") for name, value in given.items()}


def system_attributes(given: dict[str, Any] | None) -> dict[str, Attribute]:
    """A message's ``MessageSystemAttributes`` (the model's enum limits the names), checked:
    each a non-empty String."""
    out: dict[str, Attribute] = {}
    for name, value in (given or {}).items():
        attribute = _attribute(name, value, "system")
        if attribute.data_type != "String":
            raise invalid(f"Message system attribute '{name}' must be of type String.")
        out[name] = attribute
    return out


def check_name(name: str) -> str:
    """``name`` if it is a valid attribute name.

    Raises:
        SqsError: ``InvalidParameterValue``.
    """
    lower = name.lower()
    if (not _NAME.fullmatch(name) or name.startswith(".") or name.endswith(".")
            or ".." in name or lower.startswith(_RESERVED_PREFIXES)):
        raise invalid(
            f"Message (user) attribute name '{name}' is invalid. Names are 1 to {MAX_NAME} "
            "characters of A-Z, a-z, 0-9, underscore, hyphen and period; they may not start "
            "with AWS. or Amazon., start or end with a period, or hold two periods in a row."
        )
    return name


def _attribute(name: str, value: dict[str, Any], kind: str) -> Attribute:
    data_type = value["DataType"]
    base, _, custom = data_type.partition(".")
    if base not in BASE_TYPES or len(data_type) > MAX_NAME or ("." in data_type and not custom):
        raise invalid(f"The message {kind} attribute '{name}' has an invalid message attribute "
                      f"type, the set of supported type prefixes is Binary, Number, and String.")
    if value.get("StringListValues") or value.get("BinaryListValues"):
        raise invalid(f"Message {kind} attribute '{name}': list values are not supported.")
    if base == "Binary":
        binary = value.get("BinaryValue")
        if not binary or "StringValue" in value:
            raise invalid(f"Message {kind} attribute '{name}' must contain a non-empty "
                          "message attribute value for message attribute type 'Binary'.")
        return Attribute(data_type, binary=binary)
    text = value.get("StringValue")
    if not text or "BinaryValue" in value:
        raise invalid(f"Message {kind} attribute '{name}' must contain a non-empty message "
                      f"attribute value for message attribute type '{base}'.")
    check_text(text, f"message {kind} attribute '{name}'")
    if base == "Number":
        _check_number(name, text)
    return Attribute(data_type, text=text)


def _check_number(name: str, text: str) -> None:
    try:
        number = Decimal(text)
    except InvalidOperation:
        number = Decimal("NaN")
    digits = number.as_tuple().digits if number.is_finite() else ()
    if (not number.is_finite() or len(str(int("".join(map(str, digits)) or "0"))) > 38
            or (number != 0 and not -128 <= number.adjusted() <= 126)):
        raise invalid(f"Could not cast message attribute '{name}' value to number.")
