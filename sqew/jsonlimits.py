"""JSON that is valid but that readers cannot take: too deep, or numbers out of every range.

Two kinds of valid JSON break the programs that read messages back:

- **Nesting.** JSON decoders recurse once per level (msgspec and Python's ``json`` through the
  interpreter's recursion limit of 1000), so a payload nested ~1000 deep fails to decode as a
  ``RecursionError``. docs/rest.md caps the depth at the server setting ``max_json_depth``
  (default 64).
- **Numbers.** ``1e400`` or an integer of 5000 digits is valid JSON, stored as sent, yet no
  client can decode it back: msgspec refuses numbers beyond the float range and integers longer
  than Python's int-string limit (4300 digits), and Python's ``json`` gives ``inf`` or raises.
  A poll leasing such a message would fail in every client, leaving the batch leased until it
  ends in the dead-letter queue. Enqueue refuses them instead.

**How depth is counted.** The depth of a JSON value is the number of arrays and objects around
its innermost element: ``1`` and ``"a"`` are 0 deep, ``[]`` and ``{"a": 1}`` are 1, ``[[1]]`` is
2. ``max_json_depth`` applies to each *payload* as the producer wrote it; the request around it
adds its own fixed levels (``levels``): ``{"payload": X}`` one, ``{"messages": [{"payload": X}]}``
three. Request bodies that carry no payload (acks, queue settings, …) are allowed the deepest
envelope, three levels, beyond the limit: their valid shapes are at most three deep.

**Cost.** Both checks look at the text before any decoder does, and are built from C-speed
bytes operations (``translate``, ``count``, ``replace``, ``in``), never a Python loop over bytes:
a body with no more brackets than the limit is not measured for depth, and numbers are decoded
only when the text has a digit before an ``e`` or a run of 309+ digits (the only numbers that
can overflow), so their cost is of the order of decoding the text itself, whatever its size.
"""

from __future__ import annotations

import itertools
import sys

import msgspec

from sqew import errors

DEFAULT_MAX_DEPTH = 64
"""The default ``max_json_depth`` (docs/cli.md, the server settings)."""
MAX_DEPTH = 256
"""The largest ``max_json_depth`` a server may be given: a value this deep, decoded in a client
already some hundred frames deep, stays clear of Python's recursion limit (1000)."""
MESSAGE_LEVELS = 1
"""Levels a single-message body adds around its payload: ``{"payload": X}``."""
BATCH_LEVELS = 3
"""Levels a batch body adds around each payload: ``{"messages": [{"payload": X}]}``; also what
any other request body is allowed beyond the limit (see the module docstring)."""
MAX_INT_DIGITS: int = getattr(sys.int_info, "default_max_str_digits", 4300)
"""The longest integer (in digits) that Python — hence msgspec and ``json`` — decodes by
default."""

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_SQUARE = bytes.maketrans(b"{}", b"[]")
_SIGNS = bytes.maketrans(b"[]", b"\x01\xff")  # read as signed bytes: +1 / -1
_PASSES = 8  # most JSON is shallower: measured by passes alone
# One pass marks what both checks look for: brackets as "[", digits as "0", exponents as "e".
_MARKS = bytes.maketrans(b"{}0123456789E", b"[]0000000000e")
# A float overflows only with an exponent or with 309+ integer digits (10**308 < max < 10**309);
# an integer is too long only past 4300 digits. Either shows as one of these after the marking.
_EXPONENT = b"0e"
_LONG_RUN = b"0" * 309


def check_depth(
    text: bytes, limit: int, *, levels: int = 0, what: str = "payload", field: str = "payload"
) -> None:
    """Refuse JSON text nested deeper than ``limit`` (plus the envelope's ``levels``).

    Args:
        text: the JSON text (need not be valid: malformed text is left to the decoder, but
            never reaches it too deep to decode).
        limit: the most levels a payload may have (``max_json_depth``).
        levels: levels the text adds around its payloads (see ``MESSAGE_LEVELS``).
        what: what is too deep, for the message (``"payload"``, ``"the request body"``).
        field: where, for the error's ``details``.

    Raises:
        sqew.errors.ValidationError: deeper than allowed.
    """
    allowed = limit + levels
    if text.count(b"[") + text.count(b"{") <= allowed:
        return  # not enough brackets to be that deep: nothing to scan
    if depth(text) > allowed:
        raise depth_error(limit, what=what, field=field)


def depth_error(
    limit: int, *, what: str = "payload", field: str = "payload"
) -> errors.ValidationError:
    """The ValidationError for JSON nested deeper than ``limit`` (see ``check_depth``)."""
    why = "max_json_depth" if limit < MAX_DEPTH else "the most sqew ever accepts"
    return errors.ValidationError(
        f"{what} is nested deeper than {limit} levels ({why})",
        details=[{"field": field, "message": f"nested deeper than {limit} levels"}],
    )


def depth(text: bytes) -> int:
    """How deep arrays and objects nest in ``text``, brackets inside strings not counted.

    Exact for balanced brackets; for unbalanced ones (malformed JSON) at least the depth any
    decoder reaches before it fails.
    """
    brackets = _brackets(text)
    # A pass drops every innermost pair, so balanced brackets nested n deep are gone after n
    # passes: a few C-speed passes measure the usual shallow JSON. Deeper, what is left is
    # measured as a running sum (each pass took at most one level off any point of it).
    for passes in range(_PASSES):
        if not brackets:
            return passes
        brackets = brackets.replace(b"[]", b"")
    return _PASSES + max(0, max(itertools.accumulate(_steps(brackets)), default=0))


def too_deep_item(text: bytes, allowed: int, item_depth: int) -> int | None:
    """Which item of a list (items at ``item_depth``, e.g. 3 for the messages of
    ``{"messages": [{...}, ...]}``) first nests deeper than ``allowed``, counting from 0.

    For naming the item in an error: it runs a Python loop over the brackets before the one
    too deep, so call it only once ``check_depth`` has failed.
    """
    running = list(itertools.accumulate(_steps(_brackets(text))))
    try:
        first = running.index(allowed + 1)  # the depth rises one by one: it passes there
    except ValueError:
        return None
    opened = sum(1 for before, after in itertools.pairwise(running[: first + 1])
                 if before == item_depth - 1 and after == item_depth)
    return opened - 1 if opened else None


def _brackets(text: bytes) -> bytes:
    """The brackets of ``text`` outside strings, in order, ``{}`` written as ``[]``."""
    # Only quotes and brackets matter. Once escapes are gone (see ``_unescaped``), a string
    # with no bracket in it is two adjacent quotes. When every quote pairs with the next one
    # that way (the usual case: no string holds a bracket), dropping the quotes is enough.
    structure = _unescaped(text).translate(_SQUARE, _NOT_STRUCTURE)
    quotes = structure.count(b'"')
    if not quotes:
        return structure
    if structure.count(b'""') * 2 == quotes:
        return structure.translate(None, b'"')
    return _between_strings(structure)


def _steps(brackets: bytes) -> memoryview:
    """+1 for every opening and -1 for every closing bracket of ``brackets``."""
    return memoryview(brackets.translate(_SIGNS)).cast("b")


def check_numbers(text: bytes, *, field: str = "payload") -> None:
    """Refuse JSON text with a number no client can decode back (see the module docstring).

    Call it on text whose depth has been checked: the slow path decodes the text.

    Args:
        text: the JSON text (malformed text passes: its decoder reports it).
        field: where the text is, for the error's ``details``.

    Raises:
        sqew.errors.ValidationError: a number beyond the float range, or an integer longer than
            ``MAX_INT_DIGITS`` digits.
    """
    if not may_overflow(text) or not may_overflow(_outside_strings(text)):
        return
    try:
        msgspec.json.decode(text)
    except msgspec.ValidationError as exc:  # untyped decoding validates only number ranges
        if "Integer" in str(exc):
            what = f"an integer longer than {MAX_INT_DIGITS} digits"
        else:
            what = "a number beyond the float range (about ±1.8e308)"
        raise errors.ValidationError(
            f"{field} has {what}, which JSON readers cannot decode; send it as a string",
            details=[{"field": field, "message": what}],
        ) from None
    except msgspec.DecodeError:
        return


def may_overflow(text: bytes) -> bool:
    """Whether ``text`` can hold a number ``check_numbers`` refuses (a cheap test; no means no).
    """
    return _may_overflow(text.translate(_MARKS))


def _may_overflow(marked: bytes) -> bool:
    if _EXPONENT in marked:
        return True
    # Counting digits first is cheaper than looking for a long run of them.
    return marked.count(b"0") >= len(_LONG_RUN) and _LONG_RUN in marked


def check_payload_depth(
    text: bytes, limit: int, *, levels: int = 0, what: str = "payload", field: str = "payload"
) -> bool:
    """``check_depth``, and ``may_overflow`` of the same text, in one pass (the enqueue path).

    Returns:
        Whether the text may hold a number ``check_numbers`` refuses.

    Raises:
        sqew.errors.ValidationError: deeper than allowed (see ``check_depth``).
    """
    marked = text.translate(_MARKS)
    allowed = limit + levels
    if marked.count(b"[") > allowed and depth(text) > allowed:
        raise depth_error(limit, what=what, field=field)
    return _may_overflow(marked)


def _outside_strings(text: bytes) -> bytes:
    """``text`` without its JSON strings (C-speed bytes operations only)."""
    text = _unescaped(text)
    return _between_strings(text) if b'"' in text else text


def _unescaped(text: bytes) -> bytes:
    """``text`` without escaped backslashes and escaped quotes.

    Escaped backslashes go first (pairs from the left, as a decoder reads them), then escaped
    quotes: what is left of a backslash cannot escape a quote, so afterwards every quote
    delimits a string. (Valid JSON has no backslash outside strings.)
    """
    if b"\\" not in text:
        return text
    return text.replace(b"\\\\", b"").replace(b'\\"', b"")


def _between_strings(text: bytes) -> bytes:
    """The pieces of unescaped ``text`` outside its strings: every other piece between quotes."""
    return b"".join(text.split(b'"')[::2])
