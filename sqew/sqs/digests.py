"""The MD5 digests SQS answers with, computed as SQS computes them (docs/sqs.md).

``MD5OfMessageBody`` is the MD5 of the body's UTF-8 bytes. ``MD5OfMessageAttributes`` (and
``MD5OfMessageSystemAttributes``, the same over the system attributes) digests the attributes
sorted by name, each as: its name, its data type (custom suffix included) and its value, each
prefixed by its length as a 4-byte big-endian integer, with a transport byte between type and
value (1 for String and Number, 2 for Binary). SDKs recompute these to check a message.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping

from sqew.sqs.typed import Attribute

STRING_TRANSPORT = 1
BINARY_TRANSPORT = 2


def of_body(body: str) -> str:
    """The hex MD5 of ``body``'s UTF-8 bytes."""
    return hashlib.md5(body.encode(), usedforsecurity=False).hexdigest()


def of_attributes(attributes: Mapping[str, Attribute]) -> str:
    """The hex MD5 of typed attributes, as SQS digests them."""
    md5 = hashlib.md5(usedforsecurity=False)
    for name in sorted(attributes):
        attribute = attributes[name]
        md5.update(_sized(name.encode()))
        md5.update(_sized(attribute.data_type.encode()))
        if attribute.is_binary:
            md5.update(bytes([BINARY_TRANSPORT]))
            md5.update(_sized(attribute.binary))
        else:
            md5.update(bytes([STRING_TRANSPORT]))
            md5.update(_sized(attribute.text.encode()))
    return md5.hexdigest()


def _sized(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data
