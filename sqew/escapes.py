"""Text for a terminal or a log line: characters that could drive the terminal or break the
line, shown as escapes.

User-supplied text (a nack's ``error``, attributes, payload strings, key names, a URL's path
as the server logs it) may hold ESC sequences (``\\x1b[2J`` clears a screen, OSC sets a
window title), the one-character C1 controls that some terminals obey as well (``\\x9b`` is
CSI), newlines and carriage returns that forge or overwrite lines, line and paragraph
separators, and the bidirectional controls that reorder what is displayed. ``escape_controls``
writes each of them as a Python-style escape (``\\n``, ``\\t``, ``\\x1b``, ``\\u202e``) and
leaves everything else, backslashes included, as it is: what a person reads is what was sent,
made visible. JSON output needs none of this (it is exact data; JSON escapes C0 controls
itself).
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CONTROLS = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0, DEL, C1
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional controls
    "\u2028\u2029]"  # line and paragraph separators
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character escaped (see the module docstring)."""
    if _CONTROLS.search(text) is None:  # the common case: nothing to replace, no copy
        return text
    return _CONTROLS.sub(_escape, text)
